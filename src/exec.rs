//! `rlock exec`: run a command under a lock.
//!
//! Three threads besides the caller's:
//! - a reaper that waits for the child and reports its status;
//! - a renewer that extends the lease every TTL/3 on its own connection and
//!   publishes the confirmed validity deadline (monotonic clock);
//! - a signal thread that reports INT/TERM/HUP/QUIT/USR1/USR2.
//!
//! All decisions are made in one place, [`supervise`], from their events and
//! two deadlines, so there is no state shared between threads beyond the
//! validity deadline and a stop flag.
//!
//! Signal policy:
//! - INT, TERM, HUP, QUIT, USR1 and USR2 received by rlock go to the child's
//!   process group (the child runs in its own group so that a `sh -c`
//!   grandchild gets them too), and rlock keeps supervising.
//! - After a forwarded INT/TERM/HUP/QUIT, the child has `--grace` to exit;
//!   then the group gets SIGKILL. A second INT or TERM escalates at once.
//!   So a signal always ends in the child's exit and a release.
//! - If rlock itself is SIGKILLed, the kernel sends SIGKILL to the child
//!   (PR_SET_PDEATHSIG), which never runs on without a renewed lock.
//! - When stdin is a terminal and rlock is in its foreground, the child's
//!   group becomes the terminal's foreground group while it runs, so that it
//!   can read the terminal and gets Ctrl-C directly from it, as under a shell.
//!
//! Lock-loss policy: when a renewal finds the lock gone or taken, or when no
//! renewal has been confirmed and the lease is within TTL/3 of its validity
//! deadline, the lock counts as lost: `--on-lost term` sends SIGTERM to the
//! group and SIGKILL after `--grace`, but never later than the validity
//! deadline; `kill` sends SIGKILL at once; `ignore` only reports it. The lock
//! is never re-acquired behind the user's back.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;

use crate::lock::{LockName, Locker};
use crate::{Error, Lease, Result, Token, exit_code};

/// What to do with the child when the lock is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnLost {
    /// SIGTERM to the command's process group, SIGKILL after --grace.
    Term,
    /// SIGKILL to the command's process group at once.
    Kill,
    /// Let the command run on; only report the loss.
    Ignore,
}

/// The command to run and how to treat it.
#[derive(Clone, Debug)]
pub struct Spec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub on_lost: OnLost,
    pub grace: Duration,
}

/// Things worth telling the user while the command runs.
#[derive(Debug)]
pub enum Event<'a> {
    /// The lock was lost; what was done about it.
    Lost { why: &'a str, action: &'a str },
    /// A signal was passed on to the command's process group.
    Forwarded(i32),
    /// The command outlived its grace period and was killed.
    Killed,
}

/// Environment variable listing the locks held by enclosing `rlock exec`s,
/// one `prefix{key}<TAB>token` per line, so a nested exec or acquire of the
/// same lock re-enters instead of waiting for its own parent.
pub const HELD_ENV: &str = "RLOCK_HELD";

/// The token an enclosing `rlock exec` holds for `lock`, if any.
pub fn inherited_token(held: Option<&str>, lock: &LockName) -> Option<Token> {
    held?
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(name, _)| *name == lock.redis_key())
        .and_then(|(_, tok)| Token::parse(tok).ok())
}

fn held_with(held: Option<&str>, lock: &LockName, token: &Token) -> String {
    let mut out: Vec<String> = held
        .unwrap_or("")
        .lines()
        .filter(|l| {
            l.split_once('\t')
                .is_some_and(|(n, _)| n != lock.redis_key())
        })
        .map(str::to_string)
        .collect();
    out.push(format!("{}\t{}", lock.redis_key(), token.as_str()));
    out.join("\n")
}

enum Msg {
    Exited(ExitStatus),
    Signal(i32),
    Lost(String),
}

/// Run `spec` under `lease` (already acquired through `locker`), renewing
/// it, forwarding signals and enforcing the lock-loss policy. Releases the
/// lease as soon as the child exits and returns rlock's exit code: the
/// child's, or 128+N if signal N killed it; a lost lock is
/// [`Error::Lost`].
pub fn run(
    locker: &mut Locker,
    lease: &Lease,
    spec: &Spec,
    on_event: &mut dyn FnMut(Event),
) -> Result<u8> {
    let lock = locker.name(&lease.key)?;
    let held = std::env::var(HELD_ENV).ok();
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env("RLOCK_KEY", &lease.key)
        .env("RLOCK_TOKEN", lease.token.as_str())
        .env("RLOCK_FENCE", lease.fence.to_string())
        .env(HELD_ENV, held_with(held.as_deref(), &lock, &lease.token))
        .process_group(0);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) run
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // rlock may have died before the line above took effect.
            if libc::getppid() != parent {
                libc::_exit(exit_code::LOST as i32);
            }
            Ok(())
        });
    }

    // Watch signals before the child exists, so none falls in between.
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2])
        .map_err(|e| Error::Protocol(format!("cannot install signal handlers: {e}")))?;
    let sig_handle = signals.handle();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(source) => {
            sig_handle.close();
            locker.release(&lease.key, &lease.token)?;
            let code = match source.kind() {
                std::io::ErrorKind::NotFound => exit_code::NOT_FOUND,
                _ => exit_code::CANNOT_EXECUTE,
            };
            return Err(Error::Spawn {
                program: spec.program.to_string_lossy().into_owned(),
                source,
                code,
            });
        }
    };
    let pgid = child.id() as libc::pid_t;
    let tty = Foreground::take(pgid);

    let (tx, rx) = mpsc::channel();
    let valid_until = Mutex::new(lease.valid_until);
    let stop = AtomicBool::new(false);
    let mut renewer = locker.detached();
    renewer.set_timeout(
        renewer
            .timeout()
            .min((lease.ttl / 3).max(Duration::from_millis(50))),
    );
    let (status, lost, released) = std::thread::scope(|s| {
        let t = tx.clone();
        s.spawn(move || {
            let status = child.wait().unwrap_or_else(|_| ExitStatus::from_raw(0));
            let _ = t.send(Msg::Exited(status));
        });
        let t = tx.clone();
        s.spawn(move || {
            for sig in signals.forever() {
                if t.send(Msg::Signal(sig)).is_err() {
                    break;
                }
            }
        });
        let t = tx.clone();
        let (v, st) = (&valid_until, &stop);
        let renew = s.spawn(move || renew_loop(&mut renewer, lease, v, st, &t));
        drop(tx);
        let sup = Supervisor {
            pgid,
            lease,
            spec,
            valid_until: &valid_until,
            stop: &stop,
            renewer: renew.thread(),
        };
        let (status, lost) = sup.run(&rx, on_event);
        // Release at once: the next holder may be waiting. The renewer is
        // stopped first so it cannot extend what we give back.
        stop.store(true, Ordering::SeqCst);
        renew.thread().unpark();
        sig_handle.close();
        (status, lost, locker.release(&lease.key, &lease.token))
    });
    drop(tty);
    if let Some(why) = lost {
        return Err(Error::Lost {
            key: lease.key.clone(),
            why,
        });
    }
    released?;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => exit_code::for_signal(sig),
        _ => exit_code::INTERNAL,
    })
}

/// Extend the lease every TTL/3 and publish how long it is valid. Reports a
/// definite loss (gone, or another owner); transient failures are retried
/// quickly and left to the supervisor's deadline.
fn renew_loop(
    locker: &mut Locker,
    lease: &Lease,
    valid_until: &Mutex<Instant>,
    stop: &AtomicBool,
    tx: &Sender<Msg>,
) {
    let every = lease.ttl / 3;
    let retry = (every / 4).max(Duration::from_millis(20));
    let mut next = Instant::now() + every;
    loop {
        while !stop.load(Ordering::SeqCst) && Instant::now() < next {
            std::thread::park_timeout(next.saturating_duration_since(Instant::now()));
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let sent = Instant::now();
        match locker.renew(&lease.key, &lease.token, lease.ttl) {
            Ok(valid) => {
                *valid_until.lock().unwrap_or_else(|e| e.into_inner()) = valid;
                next = sent + every;
            }
            Err(Error::Lost { .. }) => {
                let _ = tx.send(Msg::Lost("it expired or was deleted".into()));
                return;
            }
            Err(Error::NotOwner { .. }) => {
                let _ = tx.send(Msg::Lost("another owner holds it now".into()));
                return;
            }
            Err(_) => next = Instant::now() + retry,
        }
    }
}

struct Supervisor<'a> {
    pgid: libc::pid_t,
    lease: &'a Lease,
    spec: &'a Spec,
    valid_until: &'a Mutex<Instant>,
    stop: &'a AtomicBool,
    renewer: &'a std::thread::Thread,
}

impl Supervisor<'_> {
    fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn signal(&self, sig: i32) {
        // SAFETY: plain syscall; the group exists until the child is reaped
        // and we stop signalling once the reaper reports its exit.
        unsafe { libc::killpg(self.pgid, sig) };
    }

    /// Returns the child's exit status and, if the lock was lost, why.
    fn run(
        &self,
        rx: &mpsc::Receiver<Msg>,
        on_event: &mut dyn FnMut(Event),
    ) -> (ExitStatus, Option<String>) {
        // Without a confirmed renewal, the lock counts as lost this long
        // before its validity deadline, leaving time to stop the child.
        let lead = self.lease.ttl / 3;
        let mut lost: Option<String> = None;
        let mut kill_at: Option<Instant> = None;
        let mut interrupts = 0;
        loop {
            let now = Instant::now();
            let mut wake = now + Duration::from_secs(3600);
            if lost.is_none() {
                wake = wake.min(self.valid_until().checked_sub(lead).unwrap_or(now));
            }
            if let Some(k) = kill_at {
                wake = wake.min(k);
            }
            let msg = match rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => {
                    return (ExitStatus::from_raw(0), lost);
                }
            };
            let now = Instant::now();
            match msg {
                Some(Msg::Exited(status)) => return (status, lost),
                Some(Msg::Signal(sig)) => {
                    self.signal(sig);
                    on_event(Event::Forwarded(sig));
                    if matches!(sig, SIGINT | SIGTERM) {
                        interrupts += 1;
                    }
                    if interrupts >= 2 {
                        self.signal(SIGKILL);
                        on_event(Event::Killed);
                        kill_at = None;
                    } else if matches!(sig, SIGINT | SIGTERM | SIGHUP | SIGQUIT) {
                        let at = now + self.spec.grace;
                        kill_at = Some(kill_at.map_or(at, |k| k.min(at)));
                    }
                }
                Some(Msg::Lost(why)) if lost.is_none() => {
                    kill_at = self.lose(&why, kill_at, on_event);
                    lost = Some(why);
                }
                Some(Msg::Lost(_)) => {}
                None => {
                    if lost.is_none() && now + lead >= self.valid_until() {
                        let why = format!(
                            "no renewal confirmed for {}",
                            humantime::format_duration(self.lease.ttl - lead)
                        );
                        kill_at = self.lose(&why, kill_at, on_event);
                        lost = Some(why);
                    }
                    if kill_at.is_some_and(|k| now >= k) {
                        self.signal(SIGKILL);
                        on_event(Event::Killed);
                        kill_at = None;
                    }
                }
            }
        }
    }

    /// Apply the lock-loss policy; returns the new SIGKILL deadline.
    fn lose(
        &self,
        why: &str,
        kill_at: Option<Instant>,
        on_event: &mut dyn FnMut(Event),
    ) -> Option<Instant> {
        self.stop.store(true, Ordering::SeqCst);
        self.renewer.unpark();
        let now = Instant::now();
        match self.spec.on_lost {
            OnLost::Term => {
                let at = (now + self.spec.grace).min(self.valid_until().max(now));
                self.signal(SIGTERM);
                let action = format!(
                    "sent SIGTERM to the command, SIGKILL in {} if it is still running",
                    humantime::format_duration(
                        Duration::from_millis((at - now).as_millis() as u64)
                    )
                );
                on_event(Event::Lost {
                    why,
                    action: &action,
                });
                Some(kill_at.map_or(at, |k| k.min(at)))
            }
            OnLost::Kill => {
                self.signal(SIGKILL);
                on_event(Event::Lost {
                    why,
                    action: "killed the command",
                });
                None
            }
            OnLost::Ignore => {
                on_event(Event::Lost {
                    why,
                    action: "the command runs on without the lock (--on-lost ignore)",
                });
                kill_at
            }
        }
    }
}

/// While it lives, the child's process group is the terminal's foreground
/// group (when rlock was in the foreground of a terminal on stdin).
struct Foreground {
    ours: libc::pid_t,
}

impl Foreground {
    fn take(child: libc::pid_t) -> Option<Foreground> {
        // SAFETY: plain syscalls on fd 0.
        unsafe {
            if libc::isatty(0) == 0 || libc::tcgetpgrp(0) != libc::getpgrp() {
                return None;
            }
            let ours = libc::getpgrp();
            if libc::tcsetpgrp(0, child) != 0 {
                return None;
            }
            // It may have touched the terminal before it was allowed to.
            libc::killpg(child, libc::SIGCONT);
            Some(Foreground { ours })
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        // SAFETY: plain syscalls. rlock is in a background group now, so
        // taking the terminal back raises SIGTTOU unless it is ignored.
        unsafe {
            let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            libc::tcsetpgrp(0, self.ours);
            libc::signal(libc::SIGTTOU, old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_env_round_trip() {
        let a = LockName::new("rlock:", "a").unwrap();
        let b = LockName::new("rlock:", "b").unwrap();
        let (ta, tb) = (Token::generate(), Token::generate());
        let env = held_with(None, &a, &ta);
        let env = held_with(Some(&env), &b, &tb);
        assert_eq!(inherited_token(Some(&env), &a), Some(ta));
        assert_eq!(inherited_token(Some(&env), &b), Some(tb.clone()));
        let c = LockName::new("other:", "a").unwrap();
        assert_eq!(inherited_token(Some(&env), &c), None);
        // Re-adding a name replaces its entry.
        let env2 = held_with(Some(&env), &b, &tb);
        assert_eq!(env2.lines().count(), 2);
    }
}
