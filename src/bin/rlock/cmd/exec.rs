//! `exec`, and `rw` with a command.

use std::io::Write;

use rlock::duration::human;
use rlock::exec::{Event, KillCause, Spec};
use rlock::{Request, exit_code};

use crate::cli::{Global, RunOpts};
use crate::errors;
use crate::setup::{connect, inherited, waiting};

/// `exec`, and `rw` with a command: `keys` all held (the first is
/// RLOCK_KEY's), `command` as [`crate::readings`] settled it.
pub(crate) fn exec(
    g: &Global,
    keys: &[String],
    req: Request,
    run: &RunOpts,
    command: &[std::ffi::OsString],
) -> anyhow::Result<u8> {
    let key = &keys[0];
    let max_hold = crate::setup::max_hold(run.max_hold)?;
    // The request's holder info is this process's already: only the
    // command is added (looking the user up again cost a second pass
    // through the password database where USER is not set).
    let mut info = req.info().clone();
    info.cmd = Some(rlock::conn::redact_command(command));
    let mut locker = connect(g)?;
    // Should rlock die, its guard gives the lock back through this binary.
    rlock::exec::release_if_killed(Some(rlock::exec::Releaser {
        opts: crate::setup::options(g),
        prefix: g.prefix.clone(),
        history: crate::setup::history(g)?,
    }));
    let req = req
        .to_builder()
        .info(info)
        .reenter(inherited(&locker, key)?)
        .build()?;
    let spec = Spec {
        program: command[0].clone(),
        args: command[1..].to_vec(),
        on_lost: run.on_lost.into(),
        grace: run.grace.0,
        kill_leftovers: run.kill_leftovers,
        max_hold,
        held: crate::setup::held(),
        exported: crate::setup::exported(),
    };
    // A loss is reported once, when it happens; the exit code says it again.
    let mut reported = false;
    let progress = waiting(g);
    let set = keys.len() > 1;
    let result = rlock::exec::run_set(
        &mut locker,
        keys,
        &req,
        &spec,
        &mut |busy| progress.update(busy),
        &mut |ev| match ev {
            Event::Acquired(lease) => {
                // Before the command writes anything.
                progress.finish();
                if g.verbose {
                    say!(
                        "rlock: acquired {key:?} (fence {}, ttl {})",
                        lease.fence,
                        human(lease.ttl)
                    )
                }
            }
            Event::Lost { why, action } => {
                reported = true;
                if set && why.starts_with('"') {
                    // The renewer names the lock of the set it lost.
                    say!("rlock: lock {why}; {action}")
                } else if set {
                    // No renewal confirmed: the set as a whole.
                    say!("rlock: locks {keys:?} lost: {why}; {action}")
                } else {
                    say!("rlock: lock {key:?} lost: {why}; {action}")
                }
            }
            Event::Forwarded(sig) if g.verbose => {
                say!("rlock: passed signal {sig} to the command")
            }
            Event::Killed { cause, command } if !g.quiet => {
                let what = if command {
                    "the command"
                } else {
                    "what the command left running"
                };
                let grace = human(run.grace.0);
                match cause {
                    KillCause::Grace(sig) => say!(
                        "rlock: {what} did not exit within {grace} of {} (--grace); sent SIGKILL",
                        signal_name(sig)
                    ),
                    KillCause::Again(sig) => {
                        say!(
                            "rlock: a second {}: sent SIGKILL to {what}",
                            signal_name(sig)
                        )
                    }
                    KillCause::Leftovers => say!(
                        "rlock: what the command left running did not exit within {grace} of \
                         SIGTERM (--kill-leftovers); sent SIGKILL"
                    ),
                }
            }
            Event::Unconfirmed(d) if !g.quiet => say!(
                "rlock: lock {key:?}: no renewal confirmed for {}; the command runs on \
                 (--on-lost ignore) and renewing goes on",
                human(d)
            ),
            Event::Overran(max) => say!(
                "rlock: the command ran past --max-hold {} on lock {key:?}: sent SIGTERM, \
                 SIGKILL in {} if it is still running; the lock is released once it is gone \
                 (exit 124)",
                human(max),
                human(run.grace.0)
            ),
            Event::ReleasedLate(margin) => say!(
                "rlock: lock {key:?}: Redis answered the release only after the lease had \
                 ended, but the command and everything it started had exited {} before \
                 the lease's end; its exit status stands",
                human(margin)
            ),
            Event::ReleaseFailed(e) => say!(
                "rlock: could not release {key:?} (it frees itself when its TTL ends): {}",
                e.render(&errors::flag)
            ),
            _ => {}
        },
    );
    progress.finish();
    let finished = match result {
        Err(rlock::Error::Lost { .. }) if reported => return Ok(exit_code::LOST),
        r => r?,
    };
    if g.verbose {
        say!(
            "rlock: released {key:?}; the command exited with {}",
            finished.code
        );
    }
    if finished.interactive {
        rlock::exec::tty::reraise_in_job(finished.signal);
    }
    Ok(finished.code)
}

/// "SIGTERM" for 15: the signals rlock passes on by name, others by number.
pub(crate) fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGUSR1 => "SIGUSR1".into(),
        libc::SIGUSR2 => "SIGUSR2".into(),
        _ => format!("signal {sig}"),
    }
}
