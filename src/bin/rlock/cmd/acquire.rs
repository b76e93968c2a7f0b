//! `acquire`, and `rw` without a command: print the token; `--keep`.

use std::io::Write;
use std::os::unix::process::CommandExt;

use rlock::duration::human;
use rlock::{Lease, Locker, Release, Request, exit_code};

use crate::cli;
use crate::cli::{Global, KeepOpts};
use crate::out::stdout;
use crate::setup::{connect, inherited, options, waiting};

/// Name `req`'s holder, and make sure the token(s) can be printed, before
/// anything is taken.
fn prepare(req: &mut Request, keep: Option<&rlock::keep::Keep>, what: &str) -> anyhow::Result<()> {
    // `status` names the holder: this process exits at once, so the script
    // that runs it (as --keep finds it; the watched process with --keep).
    let mut info = req.info().clone();
    info.pid = match keep {
        Some(k) => k.watched.process_id() as u32,
        None => rlock::keep::script_pid(),
    };
    *req = req.to_builder().info(info).build()?;
    if let Err(e) = stdout() {
        // Nobody could learn the token: do not take the lock at all.
        anyhow::bail!("cannot write the {what} to stdout: {e}; nothing acquired");
    }
    Ok(())
}

/// `acquire`, and `rw` without a command: print the token and exit;
/// with `keep`, leave a keeper behind.
pub(crate) fn print_token(
    g: &Global,
    key: &str,
    mut req: Request,
    keep: Option<rlock::keep::Keep>,
) -> anyhow::Result<u8> {
    prepare(&mut req, keep.as_ref(), "token")?;
    let mut locker = connect(g)?;
    let lease = acquire(g, &mut locker, key, req)?;
    if g.verbose {
        say!(
            "rlock: acquired {key:?} (fence {}, ttl {})",
            lease.fence,
            human(lease.ttl)
        );
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", lease.token.as_str())
        .and_then(|_| out.flush())
        .is_err()
    {
        // Nobody can learn the token: do not leave the lock held, not even
        // for a --min-hold (None: given back at once, as a failed exec's).
        let _ = locker.release_with(key, &lease.token, &Release::at_once());
        anyhow::bail!("cannot write the token to stdout; lock released");
    }
    if keep.is_none() && lease.count > 1 {
        // A re-entry of a kept lock (the script exported the token of its
        // `acquire --keep`): the keeper keeps this hold too, so that the
        // script's `release` of it never counts as the keeper's own.
        let _ = rlock::keep::adopt(&locker.name(key)?, &lease.token, locker.timeout());
    }
    if let Some(keep) = keep {
        let mut program = std::process::Command::new("/proc/self/exe");
        program.arg0("rlock-keeper").arg(rlock::keep::KEEPER_ARG);
        match rlock::keep::spawn(program, &options(g), &g.prefix, &lease, &keep) {
            Ok(started) => {
                if g.verbose {
                    match started {
                        rlock::keep::Started::Keeper(pid) => say!(
                            "rlock: keeper pid {pid} keeps {key:?} while pid {} lives",
                            keep.watched.process_id()
                        ),
                        rlock::keep::Started::Already => {
                            say!("rlock: a keeper of this token already keeps {key:?}")
                        }
                    }
                }
            }
            Err(e) => {
                // At once, whatever --min-hold: nothing was done with it.
                let _ = locker.release_with(key, &lease.token, &Release::at_once());
                return Err(anyhow::Error::new(e).context("--keep: lock released"));
            }
        }
    }
    Ok(exit_code::OK)
}

/// `acquire a b c`: take every lock of the set (see [`rlock::lock::set`]: one
/// canonical order, one wait for the set, nothing left held or queued on
/// failure) and print one token per line, in the order the keys were
/// named. With `keep`, one keeper per lock, each watching the same
/// process: a loss of any one applies --on-lost to it.
pub(crate) fn print_tokens(
    g: &Global,
    keys: &[String],
    mut req: Request,
    keep: Option<rlock::keep::Keep>,
) -> anyhow::Result<u8> {
    prepare(&mut req, keep.as_ref(), "tokens")?;
    let mut locker = connect(g)?;
    req = req
        .to_builder()
        .reenter(inherited(&locker, &keys[0])?)
        .build()?;
    let cancel = rlock::Cancel::new();
    let leases = std::thread::scope(|s| -> anyhow::Result<Vec<Lease>> {
        let _guard = rlock::signals::cancel_on_signals(s, &cancel)?;
        let progress = waiting(g);
        let leases = rlock::lock::set::acquire(&mut locker, keys, &req, Some(&cancel), &mut |b| {
            progress.update(b)
        });
        progress.finish();
        Ok(leases?)
    })?;
    let give_back = |locker: &mut Locker| {
        for l in leases.iter().rev() {
            let how = Release::at_once().all_holds(l.count == 1);
            let _ = locker.release_with(&l.key, &l.token, &how);
        }
    };
    if cancel.is_cancelled() {
        give_back(&mut locker);
        return Err(cancel.interrupted().into());
    }
    if g.verbose {
        for l in &leases {
            say!(
                "rlock: acquired {:?} (fence {}, ttl {})",
                l.key,
                l.fence,
                human(l.ttl)
            );
        }
    }
    let text: String = leases
        .iter()
        .map(|l| format!("{}\n", l.token.as_str()))
        .collect();
    let mut out = std::io::stdout().lock();
    if out
        .write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        give_back(&mut locker);
        anyhow::bail!("cannot write the tokens to stdout; locks released");
    }
    if let Some(keep) = keep {
        for l in &leases {
            let mut program = std::process::Command::new("/proc/self/exe");
            program.arg0("rlock-keeper").arg(rlock::keep::KEEPER_ARG);
            if let Err(e) = rlock::keep::spawn(program, &options(g), &g.prefix, l, &keep) {
                give_back(&mut locker);
                return Err(anyhow::Error::new(e).context("--keep: locks released"));
            }
        }
    }
    Ok(exit_code::OK)
}

/// What `--keep` watches, checked before anything is acquired.
pub(crate) fn keeper(g: &Global, keep: &KeepOpts) -> anyhow::Result<Option<rlock::keep::Keep>> {
    if !keep.keep {
        return Ok(None);
    }
    let watched = match keep.keep_while {
        Some(pid) => rlock::keep::Watched::pid(pid)?,
        None => rlock::keep::Watched::caller()?,
    };
    Ok(Some(rlock::keep::Keep {
        watched,
        on_lost: keep.on_lost.unwrap_or(cli::OnLost::Term).into(),
        grace: keep
            .grace
            .map_or(std::time::Duration::from_secs(10), |g| g.0),
        history: crate::setup::history(g)?,
        max_hold: crate::setup::max_hold(keep.max_hold)?,
    }))
}

/// Acquire (or re-enter, inside an `rlock exec` of the same lock), with
/// INT/TERM/HUP/QUIT ending the wait cleanly.
pub(crate) fn acquire(
    g: &Global,
    locker: &mut Locker,
    key: &str,
    req: Request,
) -> anyhow::Result<Lease> {
    let req = req.to_builder().reenter(inherited(locker, key)?).build()?;
    let cancel = rlock::Cancel::new();
    std::thread::scope(|s| {
        let _guard = rlock::signals::cancel_on_signals(s, &cancel)?;
        let progress = waiting(g);
        let lease = locker.acquire(key, &req, Some(&cancel), &mut |b| progress.update(b));
        progress.finish();
        Ok(lease?)
    })
}
