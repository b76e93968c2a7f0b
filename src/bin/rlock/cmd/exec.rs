//! `exec`, and `rw` with a command.

use std::io::Write;

use rlock::duration::human;
use rlock::exec::{Event, KillCause, Spec};
use rlock::{Request, exit_code};

use crate::cli::{Global, RunOpts};
use crate::setup::{connect, inherited, waiting};

/// `rlock exec k --tll 5s -- true`: an option rlock does not know, before
/// the `--`, became the command (`--tll`, exit 127). When a `--` follows
/// the key, everything between the key and it is rlock's options: a
/// command that starts with a dash before the first `--` on the command
/// line is such an option, mistyped. (`rlock exec k -- --cmd -- x` runs
/// `--cmd`: it comes after the first `--`.)
pub(crate) fn mistyped_option(command: &[std::ffi::OsString]) -> Result<(), rlock::Error> {
    let Some(first) = command.first() else {
        return Ok(());
    };
    if !first.to_string_lossy().starts_with('-') {
        return Ok(());
    }
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some(dd) = raw.iter().position(|a| a == "--") else {
        return Ok(());
    };
    if raw[dd + 1..] == *command {
        return Ok(());
    }
    Err(rlock::Error::Usage(format!(
        "unknown option {:?} (everything between the key and `--` is rlock's options; \
         see --help)",
        first.to_string_lossy()
    )))
}

/// `rlock exec a b c -- cmd`: the keys are everything from the key to the
/// first `--` on the command line (clap puts the names after the first in
/// `command`, with the command itself: it cannot tell them apart). Without
/// a `--`, one key as before (flock's `rlock exec KEY CMD ARGS`); and when
/// a word between the key and the `--` starts with '-', that too is
/// flock's form, a command with its own `--` (`rlock exec k sh -c 'exit 4'
/// -- x`), so options go before the keys or right after the first.
/// Duplicates and more than [`rlock::multi::MAX_KEYS`] names are refused
/// here, before connecting.
pub(crate) fn split_keys(
    key: &str,
    command: &[std::ffi::OsString],
) -> Result<(Vec<String>, Vec<std::ffi::OsString>), rlock::Error> {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut keys = vec![key.to_string()];
    let mut command = command.to_vec();
    if let Some(dd) = raw.iter().position(|a| a == "--") {
        let tail = &raw[dd + 1..];
        if command.len() > tail.len() && command.ends_with(tail) {
            let mut extra: Vec<std::ffi::OsString> =
                command.drain(..command.len() - tail.len()).collect();
            // clap keeps the `--` once the trailing values have begun.
            if extra.last().is_some_and(|a| a == "--") {
                extra.pop();
            }
            if extra
                .iter()
                .any(|a| a.as_encoded_bytes().first() == Some(&b'-'))
            {
                return Ok((keys, command_given(command, extra)));
            }
            for k in extra {
                let k = k
                    .into_string()
                    .map_err(|k| rlock::Error::Usage(format!("lock name {k:?} is not UTF-8")))?;
                keys.push(k);
            }
        }
    }
    rlock::multi::check_keys(&keys)?;
    Ok((keys, command))
}

/// Flock's form after all: the command as clap gave it.
fn command_given(
    mut tail: Vec<std::ffi::OsString>,
    extra: Vec<std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut all = extra;
    all.push("--".into());
    all.append(&mut tail);
    all
}

/// `exec`, and `rw` with a command.
pub(crate) fn exec(
    g: &Global,
    key: &str,
    mut req: Request,
    run: &RunOpts,
    command: &[std::ffi::OsString],
) -> anyhow::Result<u8> {
    let (keys, command) = split_keys(key, command)?;
    // Bad names are bad input, before any connection is tried.
    for k in &keys[1..] {
        rlock::lock::LockName::new(&g.prefix, k)?;
    }
    let command = &command[..];
    if command.is_empty() {
        return Err(rlock::Error::Usage(
            "no command given after the keys: rlock exec KEY... -- CMD [ARGS...]".into(),
        )
        .into());
    }
    mistyped_option(command)?;
    let max_hold = crate::setup::max_hold(run.max_hold)?;
    req.check()?;
    // Request::new made the holder info of this process already: only
    // the command is added (looking the user up again cost a second pass
    // through the password database where USER is not set).
    req.info.cmd = Some(rlock::conn::redact_command(command));
    let mut locker = connect(g)?;
    req.reenter = inherited(&locker, key)?;
    let spec = Spec {
        program: command[0].clone(),
        args: command[1..].to_vec(),
        on_lost: run.on_lost.into(),
        grace: run.grace.0,
        kill_leftovers: run.kill_leftovers,
        max_hold,
    };
    // A loss is reported once, when it happens; the exit code says it again.
    let mut reported = false;
    let progress = waiting(g);
    let set = keys.len() > 1;
    let result = rlock::exec::run_set(
        &mut locker,
        &keys,
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
            Event::ReleaseFailed(e) => {
                say!("rlock: could not release {key:?} (it frees itself when its TTL ends): {e}")
            }
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
