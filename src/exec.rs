//! `rlock exec`: run a command under a lock.
//!
//! Besides the caller's thread, which makes every decision ([`Supervisor`]),
//! three threads feed it events over one channel:
//! - a signal thread, alive from before the wait for the lock until the
//!   command has exited, so that no signal falls between two handlers;
//! - a reaper that waits for the command and reports its exit;
//! - a renewer that extends the lease every TTL/3 on its own connection and
//!   publishes the confirmed validity deadline (monotonic clock).
//!
//! Signal policy:
//! - While waiting for the lock, INT/TERM/HUP/QUIT end the wait (exit
//!   128+N; nothing is left held or queued). USR1/USR2 are ignored then.
//! - Once the command runs, INT, TERM, HUP, QUIT, USR1 and USR2 received by
//!   rlock go to the command's process group (the command runs in its own
//!   group, so a `sh -c` grandchild gets them too), and rlock keeps
//!   supervising. After a forwarded INT/TERM/HUP/QUIT the command has
//!   `--grace` to exit; then the group gets SIGKILL. A second INT or TERM
//!   escalates at once. So a signal always ends in an exit and a release.
//! - Interactive use (stdin a terminal, rlock in its foreground): the
//!   command stays in rlock's process group, as under flock(1), so it can
//!   read the terminal and job control (Ctrl-Z, fg) works. Signals from the
//!   terminal reach the command directly and are not forwarded a second
//!   time; signals sent to rlock by a process go to the command alone.
//! - If rlock is SIGKILLed, the kernel sends SIGKILL to the command
//!   (PR_SET_PDEATHSIG), and a tiny guard process forked by rlock, which
//!   notices rlock's death when its pipe closes, sends SIGKILL to the whole
//!   group (not in interactive use, where the group is the shell's job).
//!
//! Lock-loss policy: when a renewal finds the lock gone or taken, or when no
//! renewal has been confirmed and the lease is within TTL/3 of its validity
//! deadline, the lock counts as lost: `--on-lost term` sends SIGTERM to the
//! group and SIGKILL after `--grace`, but never later than the validity
//! deadline; `kill` sends SIGKILL at once; `ignore` only reports it. If the
//! command exits while the lock is lost, whatever it left running in its
//! group is killed too. The lock is never re-acquired behind the user's back.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::low_level::siginfo::Cause;

use crate::Locker;
use crate::clock::BootTime;
use crate::lock::LockName;
use crate::{Busy, Cancel, Error, Lease, Released, Request, Result, Token, exit_code};

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
    /// The lock is held; the command is about to start.
    Acquired(&'a Lease),
    /// The lock was lost; what was done about it.
    Lost { why: &'a str, action: &'a str },
    /// A signal was passed on to the command.
    Forwarded(i32),
    /// The command outlived its grace period and was killed.
    Killed,
    /// The lock could not be released; it frees itself when its TTL ends.
    ReleaseFailed(&'a Error),
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
    /// The command exited (None: its status could not be read).
    Exited(Option<ExitStatus>),
    /// A signal for rlock; `tty` when the terminal sent it to the whole
    /// foreground group (the command got it already).
    Signal {
        sig: i32,
        tty: bool,
    },
    Lost(String),
}

/// Where a signal goes: while waiting, it cancels the wait; once the
/// command runs, it goes to the supervisor.
enum Route {
    Wait,
    Child(Sender<Msg>),
}

/// Acquire `key` as `req` says, run `spec` under the lock (renewing it,
/// forwarding signals, enforcing the lock-loss policy), release it as soon as
/// the command exits, and return rlock's exit code: the command's, or 128+N
/// if signal N killed it. A lost lock is [`Error::Lost`].
pub fn run(
    locker: &mut Locker,
    key: &str,
    req: &Request,
    spec: &Spec,
    on_wait: &mut dyn FnMut(&Busy),
    on_event: &mut dyn FnMut(Event),
) -> Result<u8> {
    let lock = locker.name(key)?;
    // SAFETY: plain syscall. An inherited "ignore SIGCHLD" would make the
    // kernel reap the command for us, and its exit status would be lost.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    let interactive = interactive();
    let guard = if interactive { None } else { Guard::spawn() };
    let mut signals =
        SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2])
            .map_err(|e| Error::Protocol(format!("cannot install signal handlers: {e}")))?;
    let signal_handle = signals.handle();
    let cancel = Cancel::new();
    let route = Mutex::new(Route::Wait);
    // Shared with the scoped threads, so they live outside the scope.
    let slot = std::sync::OnceLock::new();
    let valid_until = Mutex::new(BootTime::now());
    let stop = AtomicBool::new(false);
    let mut renewer = locker.detached();
    std::thread::scope(|s| {
        s.spawn(|| {
            for origin in signals.forever() {
                let sig = origin.signal;
                match &*route.lock().unwrap_or_else(|e| e.into_inner()) {
                    Route::Wait if matches!(sig, SIGINT | SIGTERM | SIGHUP | SIGQUIT) => {
                        cancel.cancel(sig)
                    }
                    Route::Wait => {}
                    Route::Child(tx) => {
                        let tty = interactive && origin.cause == Cause::Kernel;
                        let _ = tx.send(Msg::Signal { sig, tty });
                    }
                }
            }
        });
        let _close = OnDrop(|| signal_handle.close());
        let acquired = locker.acquire(key, req, Some(&cancel), on_wait)?;
        let lease: &Lease = slot.get_or_init(|| acquired);
        on_event(Event::Acquired(lease));
        let (tx, rx) = mpsc::channel();
        let (child, pgid) = {
            let mut route = route.lock().unwrap_or_else(|e| e.into_inner());
            if cancel.is_cancelled() {
                let _ = locker.release(key, &lease.token);
                return Err(cancel.interrupted());
            }
            match spawn(
                spec,
                lease,
                &lock,
                !interactive,
                guard.as_ref().map(|g| g.fd),
            ) {
                Ok(c) => {
                    *route = Route::Child(tx.clone());
                    let pgid = if interactive {
                        0
                    } else {
                        c.id() as libc::pid_t
                    };
                    (c, pgid)
                }
                Err(e) => {
                    // The child may have armed the guard before its exec failed.
                    if let Some(g) = &guard {
                        g.dismiss();
                    }
                    locker.release(key, &lease.token)?;
                    return Err(e);
                }
            }
        };
        let target = Target {
            pid: child.id() as libc::pid_t,
            pgid,
        };
        let t = tx.clone();
        let mut child = child;
        s.spawn(move || {
            let _ = t.send(Msg::Exited(child.wait().ok()));
        });
        *valid_until.lock().unwrap_or_else(|e| e.into_inner()) = lease.valid_until;
        renewer.set_timeout(
            renewer
                .timeout()
                .min((lease.ttl / 3).max(Duration::from_millis(50))),
        );
        let (t, v, st, r) = (tx.clone(), &valid_until, &stop, &mut renewer);
        let renewing = s.spawn(move || renew_loop(r, lease, v, st, t));
        drop(tx);
        let stop_renewing = OnDrop(|| {
            stop.store(true, Ordering::SeqCst);
            renewing.thread().unpark();
        });
        let sup = Supervisor {
            target,
            lease,
            spec,
            valid_until: &valid_until,
            stop: &stop,
            renewer: renewing.thread(),
        };
        let (status, lost) = sup.run(&rx, on_event);
        // Release at once: the next holder may be waiting. The renewer is
        // stopped first so it cannot extend what we give back.
        drop(stop_renewing);
        let released = locker.release(key, &lease.token);
        if let Some(g) = &guard {
            g.dismiss();
        }
        let lost = lost.or(match &released {
            // Gone although no renewal noticed: lost all the same.
            Ok(Released::NotHeld) => Some("it was gone when the command ended".into()),
            Err(Error::NotOwner { .. }) => {
                Some("another owner held it when the command ended".into())
            }
            _ => None,
        });
        if let Some(why) = lost {
            return Err(Error::Lost {
                key: key.into(),
                why,
            });
        }
        if let Err(e) = &released {
            on_event(Event::ReleaseFailed(e));
        }
        Ok(match status {
            Some(st) => match (st.code(), st.signal()) {
                (Some(c), _) => c as u8,
                (None, Some(sig)) => exit_code::for_signal(sig),
                _ => exit_code::INTERNAL,
            },
            None => exit_code::INTERNAL,
        })
    })
}

/// Runs its closure when dropped, so cleanup happens on every way out.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Is rlock in the foreground of a terminal on stdin?
fn interactive() -> bool {
    // SAFETY: plain syscalls on fd 0.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Start the command, in its own process group unless in interactive use
/// (where it stays in the terminal's job), arming the guard whose pipe is
/// `guard`.
fn spawn(
    spec: &Spec,
    lease: &Lease,
    lock: &LockName,
    own_group: bool,
    guard: Option<libc::c_int>,
) -> Result<std::process::Child> {
    let held = std::env::var(HELD_ENV).ok();
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env("RLOCK_KEY", &lease.key)
        .env("RLOCK_TOKEN", lease.token.as_str())
        .env("RLOCK_FENCE", lease.fence.to_string())
        .env(HELD_ENV, held_with(held.as_deref(), lock, &lease.token));
    if own_group {
        cmd.process_group(0);
    }
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls (prctl, getppid, getpid, write, _exit) run
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
            // Arm the guard from here, before the command can start anything:
            // our process group is our pid. (The pipe is close-on-exec.)
            if let Some(fd) = guard {
                let pid = libc::getpid();
                libc::write(fd, (&pid as *const libc::pid_t).cast(), 4);
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|source| Error::Spawn {
        program: spec.program.to_string_lossy().into_owned(),
        code: match source.kind() {
            std::io::ErrorKind::NotFound => exit_code::NOT_FOUND,
            _ => exit_code::CANNOT_EXECUTE,
        },
        source,
    })
}

/// A forked process that SIGKILLs the command's process group if rlock dies
/// without dismissing it: it blocks reading a pipe whose only writer is
/// rlock, and end-of-file means rlock is gone. PR_SET_PDEATHSIG covers only
/// the direct child; this covers what it started.
///
/// It is forked first thing, while rlock is still single-threaded and small
/// (a fork later costs about a millisecond), learns the group to guard from
/// the command itself (which writes its pid to the pipe between fork and
/// exec, so no window is left where rlock could die unguarded), and is never
/// waited for: it exits by itself when dismissed.
struct Guard {
    pid: libc::pid_t,
    fd: libc::c_int,
}

impl Guard {
    fn spawn() -> Option<Guard> {
        let mut fds = [0; 2];
        // SAFETY: the child calls only async-signal-safe functions (close,
        // signal, setpgid, read, killpg, _exit) and never returns into Rust.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return None;
            }
            match libc::fork() {
                -1 => {
                    libc::close(fds[0]);
                    libc::close(fds[1]);
                    None
                }
                0 => {
                    libc::close(fds[1]);
                    // Outlive a kill of rlock's own job (a CI runner killing
                    // the process group), which is when it is needed.
                    libc::setpgid(0, 0);
                    for sig in [
                        SIGINT,
                        SIGTERM,
                        SIGHUP,
                        SIGQUIT,
                        SIGUSR1,
                        SIGUSR2,
                        libc::SIGPIPE,
                    ] {
                        libc::signal(sig, libc::SIG_IGN);
                    }
                    let mut pgid: libc::pid_t = 0;
                    let armed = read_full(fds[0], (&mut pgid as *mut libc::pid_t).cast(), 4) == 4;
                    let mut byte = 0u8;
                    if armed && read_full(fds[0], &mut byte, 1) == 0 && pgid > 1 {
                        libc::killpg(pgid, SIGKILL);
                    }
                    libc::_exit(0)
                }
                pid => {
                    libc::close(fds[0]);
                    Some(Guard { pid, fd: fds[1] })
                }
            }
        }
    }

    /// rlock is done with the group: let the guard go without killing.
    fn dismiss(&self) {
        // SAFETY: writes one byte to our own pipe; Drop closes it.
        unsafe { libc::write(self.fd, b"x".as_ptr().cast(), 1) };
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Unarmed, end-of-file lets the guard go; armed but not dismissed
        // (an early return), it kills the group, which is what we want.
        // SAFETY: plain syscalls on our own fd and child.
        unsafe {
            libc::close(self.fd);
            libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG);
        }
    }
}

/// read(2) until `len` bytes, end-of-file or an error other than EINTR.
/// Returns the bytes read. Async-signal-safe.
unsafe fn read_full(fd: libc::c_int, buf: *mut u8, len: usize) -> usize {
    let mut got = 0;
    while got < len {
        // SAFETY: the caller gives a buffer of `len` bytes.
        let n = unsafe { libc::read(fd, buf.add(got).cast(), len - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || unsafe { *libc::__errno_location() } != libc::EINTR {
            break;
        }
    }
    got
}

/// Extend the lease every TTL/3 and publish how long it is valid. Reports a
/// definite loss (gone, or another owner); transient failures are retried
/// quickly and left to the supervisor's deadline.
fn renew_loop(
    locker: &mut Locker,
    lease: &Lease,
    valid_until: &Mutex<BootTime>,
    stop: &AtomicBool,
    tx: Sender<Msg>,
) {
    let every = lease.ttl / 3;
    let retry = (every / 4).clamp(Duration::from_millis(20), Duration::from_millis(500));
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

/// Who gets the command's signals: its process group, or (interactive use,
/// where the group is the shell's job) the command alone.
#[derive(Clone, Copy)]
struct Target {
    pid: libc::pid_t,
    /// 0 when the command shares rlock's group.
    pgid: libc::pid_t,
}

impl Target {
    fn signal(self, sig: i32) {
        // SAFETY: plain syscalls. The group or pid stays ours until the
        // reaper has reported the exit; after that only `sweep` signals.
        unsafe {
            if self.pgid > 0 {
                libc::killpg(self.pgid, sig);
            } else {
                libc::kill(self.pid, sig);
            }
        }
    }

    /// Kill whatever the command left running in its group.
    fn sweep(self) {
        if self.pgid > 0 {
            // SAFETY: plain syscall; ESRCH when the group is empty.
            unsafe { libc::killpg(self.pgid, SIGKILL) };
        }
    }
}

struct Supervisor<'a> {
    target: Target,
    lease: &'a Lease,
    spec: &'a Spec,
    valid_until: &'a Mutex<BootTime>,
    stop: &'a AtomicBool,
    renewer: &'a std::thread::Thread,
}

impl Supervisor<'_> {
    fn valid_until(&self) -> BootTime {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Returns the command's exit status and, if the lock was lost, why.
    fn run(
        &self,
        rx: &mpsc::Receiver<Msg>,
        on_event: &mut dyn FnMut(Event),
    ) -> (Option<ExitStatus>, Option<String>) {
        // Without a confirmed renewal, the lock counts as lost this long
        // before its validity deadline, leaving time to stop the command.
        let lead = self.lease.ttl / 3;
        let mut lost: Option<String> = None;
        let mut kill_at: Option<Instant> = None;
        let mut interrupts = 0;
        loop {
            let now = Instant::now();
            let mut wake = now + Duration::from_secs(3600);
            if lost.is_none() {
                wake = wake.min(now + (self.valid_until() - lead).remaining());
            }
            if let Some(k) = kill_at {
                wake = wake.min(k);
            }
            let msg = match rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return (None, lost),
            };
            let now = Instant::now();
            match msg {
                Some(Msg::Exited(status)) => {
                    // Whatever the command left running must not outlive a
                    // lost lock either.
                    if lost.is_some() && self.spec.on_lost != OnLost::Ignore {
                        self.target.sweep();
                    }
                    return (status, lost);
                }
                Some(Msg::Signal { sig, tty }) => {
                    if !tty {
                        self.target.signal(sig);
                        on_event(Event::Forwarded(sig));
                    }
                    if matches!(sig, SIGINT | SIGTERM) {
                        interrupts += 1;
                    }
                    if interrupts >= 2 {
                        self.kill(on_event);
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
                    if lost.is_none() && BootTime::now() + lead >= self.valid_until() {
                        let why = format!(
                            "no renewal confirmed for {}",
                            humantime::format_duration(self.lease.ttl - lead)
                        );
                        kill_at = self.lose(&why, kill_at, on_event);
                        lost = Some(why);
                    }
                    if kill_at.is_some_and(|k| now >= k) {
                        self.kill(on_event);
                        kill_at = None;
                    }
                }
            }
        }
    }

    fn kill(&self, on_event: &mut dyn FnMut(Event)) {
        self.target.signal(SIGKILL);
        on_event(Event::Killed);
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
                let at = (now + self.spec.grace).min(now + self.valid_until().remaining());
                self.target.signal(SIGTERM);
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
                self.target.signal(SIGKILL);
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
