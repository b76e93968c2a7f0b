//! The release after the holder's death: when the holder (rlock, or a
//! keeper) dies (its socket closes) the guard stops its reach, and once no
//! process of it is left, gives the lock back through a short-lived
//! *releaser*, this program run again (`/proc/self/exe` [`RELEASER_ARG`]),
//! which reads what a release needs on its stdin, releases with bounded
//! waits, and exits. The guard itself runs no Redis client: it is a fork
//! of a process that may have had threads, and a client allocates, takes
//! locks and starts threads.
//!
//! Sides: [`Releaser`] and [`release_if_killed`], set by the binary;
//! [`settings`] (exec) and [`keep_settings`] (a keeper), what the holder
//! sends its guard after the grant and whenever its holds change (a JSON
//! [`Settings`], on the guard's socket: never on an argv); [`start`], the
//! guard's fork and exec of the releaser; [`releaser_main`], the releaser.

use std::io::Read;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::conn::ConnectOptions;
use crate::{Error, HistoryLimits, Lease, Locker, Result};

/// The argument that makes the binary a releaser (see [`releaser_main`]).
pub const RELEASER_ARG: &str = "__release";

/// [`RELEASER_ARG`] for execve.
const ARG: &std::ffi::CStr = c"__release";

/// The releaser's own name (argv\[0\] and comm): no pattern for rlock
/// matches it, as none matches the guard's.
const NAME: &std::ffi::CStr = c"rl-release";

/// The longest any wait of the releaser is: connecting, and the reply of
/// each release.
const PATIENCE: Duration = Duration::from_secs(5);

/// How the releaser connects: what the binary was started with.
#[derive(Clone, Debug)]
pub struct Releaser {
    /// Servers, password, timeouts, TLS.
    pub opts: ConnectOptions,
    /// The key prefix.
    pub prefix: String,
    /// The history limits a release writes with.
    pub history: HistoryLimits,
}

static RELEASER: Mutex<Option<Releaser>> = Mutex::new(None);

/// Have the guard of every later [`crate::exec::run`] give the lock back
/// once rlock is dead and the command's whole tree is gone, by running
/// this program as `/proc/self/exe` [`RELEASER_ARG`], which must then call
/// [`releaser_main`] (the `rlock` binary does). A library caller that does
/// not set this gets what it always got: the tree killed, the lock held
/// until its lease ends. `None` turns it off.
pub fn release_if_killed(releaser: Option<Releaser>) {
    *RELEASER.lock().unwrap_or_else(|e| e.into_inner()) = releaser;
}

/// What the releaser needs: how to connect, and each hold to give back.
#[derive(Serialize, Deserialize)]
pub(crate) struct Settings {
    pub(crate) opts: ConnectOptions,
    pub(crate) prefix: String,
    /// The history's cap and retention in ms.
    pub(crate) history: (u32, u64),
    /// In the order they are given back.
    pub(crate) holds: Vec<Hold>,
}

/// One hold to give back.
#[derive(Serialize, Deserialize)]
pub(crate) struct Hold {
    pub(crate) key: String,
    pub(crate) token: String,
    /// Every hold of the token (the outermost exec), else one (a
    /// re-entered exec's own: the enclosing holder keeps its hold).
    pub(crate) all: bool,
}

/// The settings for giving back `leases` (the set's first lock first) as
/// rlock would after a failed command — the others in reverse, then the
/// first; each lease's every hold if it was the token's first (count 1),
/// else its one — or None if no [`Releaser`] is set.
pub(crate) fn settings(leases: &[&Lease]) -> Option<Vec<u8>> {
    let r = RELEASER.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
    encode(&r, leases)
}

fn encode(r: &Releaser, leases: &[&Lease]) -> Option<Vec<u8>> {
    let (first, others) = leases.split_first()?;
    let holds = others
        .iter()
        .rev()
        .chain(std::iter::once(first))
        .map(|l| Hold {
            key: l.key.clone(),
            token: l.token.as_str().to_string(),
            all: l.count == 1,
        })
        .collect();
    encode_holds(r, holds)
}

/// The settings while exec waits (sent only once a first try found a
/// lock busy): the place of `waiting` (key, token), the token rlock waits
/// with, given up (every hold of it: a grant that landed meanwhile too),
/// then `held`, the locks of the set taken so far, in reverse. Only holds
/// that are this rlock's alone are named: `waiting` is a fresh token
/// nobody else has, and of `held` only first holds of their token (count
/// 1: a fresh token too). A re-entered hold (count above 1) shares its
/// token with the enclosing holder and is left out: it ends with the
/// enclosing holder's release of every hold, or with its lease. None if
/// no [`Releaser`] is set, or nothing is named.
pub(crate) fn waiting_settings(
    held: &[Lease],
    waiting: Option<(&str, &crate::Token)>,
) -> Option<Vec<u8>> {
    let r = RELEASER.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
    encode_waiting(&r, held, waiting)
}

fn encode_waiting(
    r: &Releaser,
    held: &[Lease],
    waiting: Option<(&str, &crate::Token)>,
) -> Option<Vec<u8>> {
    let place = waiting.map(|(key, t)| Hold {
        key: key.to_string(),
        token: t.as_str().to_string(),
        all: true,
    });
    let holds: Vec<Hold> = place
        .into_iter()
        .chain(held.iter().rev().filter(|l| l.count == 1).map(|l| Hold {
            key: l.key.clone(),
            token: l.token.as_str().to_string(),
            all: true,
        }))
        .collect();
    if holds.is_empty() {
        return None;
    }
    encode_holds(r, holds)
}

/// A keeper's settings: `own` single holds of `token` on `key`, the
/// keeper's grant and the re-entered `acquire --keep`s it adopted, never
/// more (another hold of the token, a re-entered exec's, is its holder's).
pub(crate) fn keep_settings(r: &Releaser, key: &str, token: &str, own: u64) -> Option<Vec<u8>> {
    let hold = || Hold {
        key: key.to_string(),
        token: token.to_string(),
        all: false,
    };
    let holds = (0..own).map(|_| hold()).collect();
    encode_holds(r, holds)
}

fn encode_holds(r: &Releaser, holds: Vec<Hold>) -> Option<Vec<u8>> {
    let s = Settings {
        opts: r.opts.clone(),
        prefix: r.prefix.clone(),
        history: (
            r.history.events,
            crate::duration::millis(r.history.retention),
        ),
        holds,
    };
    serde_json::to_vec(&s).ok()
}

impl Settings {
    pub(crate) fn decode(raw: &[u8]) -> Option<Settings> {
        serde_json::from_slice(raw).ok()
    }

    /// How the releaser connects: as the holder did, each wait at most
    /// [`PATIENCE`].
    fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            connect_timeout: self.opts.connect_timeout.min(PATIENCE),
            ..self.opts.clone()
        }
    }
}

/// Start the releaser with `settings` on its stdin, and wait for it. The
/// guard calls this once rlock is dead and no process of the tree is left.
///
/// Between fork and exec the child makes only syscalls (the guard may be
/// the fork of a process that had threads: no allocation, no lock); the
/// guard writes the settings to the pipe and reaps the child, which
/// bounds its own waits.
pub(super) fn start(settings: &[u8]) {
    unsafe extern "C" {
        static environ: *const *const libc::c_char;
    }
    let argv = [NAME.as_ptr(), ARG.as_ptr(), std::ptr::null()];
    let mut fds = [0; 2];
    // SAFETY: plain syscalls; the child execs or _exits.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return;
        }
        let [read, write] = fds;
        match libc::fork() {
            -1 => {
                libc::close(read);
                libc::close(write);
            }
            0 => {
                // dup2 leaves the new descriptor open across exec.
                if libc::dup2(read, 0) != 0 {
                    libc::_exit(127);
                }
                // The guard's ignored and blocked signals are not the
                // releaser's.
                for sig in 1..libc::SIGRTMIN() {
                    libc::signal(sig, libc::SIG_DFL);
                }
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                libc::execve(c"/proc/self/exe".as_ptr(), argv.as_ptr(), environ);
                libc::_exit(127)
            }
            pid => {
                libc::close(read);
                let mut left = settings;
                while !left.is_empty() {
                    let n = libc::write(write, left.as_ptr().cast(), left.len());
                    if n > 0 {
                        left = &left[n as usize..];
                    } else if n < 0 && super::last_errno() == libc::EINTR {
                        continue;
                    } else {
                        break; // EPIPE: the releaser did not start
                    }
                }
                libc::close(write);
                while libc::waitpid(pid, std::ptr::null_mut(), 0) < 0
                    && super::last_errno() == libc::EINTR
                {}
            }
        }
    }
}

/// The releaser process: read the settings from stdin, give back each
/// hold (one try each, every wait at most 5 s), exit. Returns
/// the exit code: 0 if every release was answered; never prints (its
/// stdout and stderr are the guard's /dev/null).
pub fn releaser_main() -> Result<u8> {
    let typed = || {
        Error::invalid(format!(
            "`{RELEASER_ARG}` is internal: what an `rlock exec` guard runs to release the \
             lock once rlock and the command are gone"
        ))
    };
    // SAFETY: plain syscall. Someone typed `rlock __release`.
    if unsafe { libc::isatty(0) } == 1 {
        return Err(typed());
    }
    let mut raw = Vec::new();
    if std::io::stdin().lock().read_to_end(&mut raw).is_err() {
        return Err(typed());
    }
    let s = Settings::decode(&raw).ok_or_else(typed)?;
    drop(raw);
    // SAFETY: plain syscall on this process.
    unsafe { libc::prctl(libc::PR_SET_NAME, NAME.as_ptr()) };
    let limits = HistoryLimits::new(s.history.0, Duration::from_millis(s.history.1))?;
    let mut locker = Locker::connect(&s.connect_options(), &s.prefix)?;
    locker.set_history(limits);
    let mut failed = false;
    for h in &s.holds {
        let Ok(token) = crate::Token::parse(&h.token) else {
            failed = true;
            continue;
        };
        // Not held any more (the lease ran out, or the lock was lost) is
        // as good as released: release.lua drops nothing else.
        failed |= locker
            .release_with(
                &h.key,
                &token,
                &crate::Release {
                    all: h.all,
                    min_hold: None,
                    within: Some(PATIENCE),
                    ..Default::default()
                },
            )
            .is_err();
    }
    Ok(u8::from(failed))
}

#[cfg(test)]
mod tests;
