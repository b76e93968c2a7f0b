//! Starting the keeper: [`spawn`] in `rlock acquire --keep`, and the
//! keeper process's first steps ([`keeper_main`]: its settings, detaching)
//! before it runs [`Keeper`].

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::caller::above_stdio;
use super::keeper::Keeper;
use super::protocol::socket_addr;
use super::{KEEPER_ARG, Keep};
use crate::conn::ConnectOptions;
use crate::exec::OnLost;
use crate::lock::LockName;
use crate::signals::poll;
use crate::{Error, Lease, Result};

/// What the keeper needs, sent on its stdin (the token must not be on
/// argv).
#[derive(Serialize, Deserialize)]
pub(super) struct Config {
    pub(super) opts: ConnectOptions,
    pub(super) prefix: String,
    pub(super) key: String,
    pub(super) token: String,
    pub(super) ttl_ms: u64,
    /// The lease's validity deadline, CLOCK_BOOTTIME ns.
    pub(super) valid_until_ns: u64,
    pub(super) on_lost: String,
    pub(super) grace_ms: u64,
    /// `--max-hold` in ms, 0 for none.
    #[serde(default)]
    pub(super) max_hold_ms: u64,
    /// The start time of the `rlock acquire` that made the grant (/proc
    /// stat field 22) and its pid: processes started before it are never
    /// signalled (see `Grant::before`).
    pub(super) since: u64,
    #[serde(default)]
    pub(super) since_pid: i32,
    pub(super) pid: i32,
    pub(super) start: u64,
    pub(super) pidfd: Option<i32>,
    pub(super) listen: i32,
    /// The history's cap and retention (see [`Keep::history`]).
    #[serde(default)]
    pub(super) history: Option<(u32, u64)>,
}

impl Config {
    /// The history limits the keeper's calls use: the default unless
    /// given, or if what was given is out of range (the parent writes
    /// them from a [`crate::lock::HistoryLimits`], in range).
    pub(super) fn history(&self) -> crate::lock::HistoryLimits {
        self.history
            .and_then(|(events, ms)| {
                crate::lock::HistoryLimits::new(events, Duration::from_millis(ms)).ok()
            })
            .unwrap_or_default()
    }

    pub(super) fn connect_options(&self) -> ConnectOptions {
        self.opts.clone()
    }
}

/// How a keeper was started.
#[derive(Debug, PartialEq, Eq)]
pub enum Started {
    /// A new keeper, with this pid.
    Keeper(u32),
    /// A keeper of this token runs already (a re-entered `acquire --keep`):
    /// it took the new hold, and gives it back with its own.
    Already,
}

/// Start the keeper of `lease`. `program` runs the keeper: a command that
/// ends in [`keeper_main`] (the binary: `rlock __keep`). The keeper gets
/// the settings on its stdin, its stdout and stderr on /dev/null, and a
/// session of its own.
pub fn spawn(
    mut program: Command,
    opts: &ConnectOptions,
    prefix: &str,
    lease: &Lease,
    keep: &Keep,
) -> Result<Started> {
    let fail = |what: &str, e: std::io::Error| Error::Protocol(format!("{what}: {e}"));
    // Bound here, so a second keeper of one token is seen at once, and a
    // release right after we exit finds the socket.
    let listener = match UnixListener::bind_addr(&socket_addr(&lease.token)?) {
        Ok(l) => l,
        // A keeper of this token runs: the grant re-entered its lock
        // (`acquire --keep` again in the script). Its hold is the
        // keeper's to give back too; if the keeper does not take it, the
        // caller gives it back.
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let lock = LockName::new(prefix, &lease.key)?;
            return if super::protocol::adopt(&lock, &lease.token, opts.connect_timeout) {
                Ok(Started::Already)
            } else {
                Err(Error::Protocol(
                    "the keeper of this token did not take the re-entered hold".into(),
                ))
            };
        }
        Err(e) => return Err(fail("cannot create the keeper's socket", e)),
    };
    let listener = above_stdio(listener.into());
    let listen = listener.as_raw_fd();
    let pidfd = keep.watched.pidfd.as_ref().map(|f| f.as_raw_fd());
    let grant = super::caller::Grant::ours();
    let config = Config {
        opts: opts.clone(),
        prefix: prefix.to_string(),
        key: lease.key.clone(),
        token: lease.token.as_str().to_string(),
        ttl_ms: crate::duration::millis(lease.ttl),
        valid_until_ns: crate::duration::nanos(lease.valid_until.since_boot()),
        on_lost: match keep.on_lost {
            OnLost::Term => "term",
            OnLost::Kill => "kill",
            OnLost::Ignore => "ignore",
        }
        .into(),
        grace_ms: crate::duration::millis(keep.grace),
        max_hold_ms: keep.max_hold.map_or(0, crate::duration::millis),
        since: grant.start,
        since_pid: grant.pid,
        pid: keep.watched.pid,
        start: keep.watched.start,
        pidfd,
        listen,
        history: Some((
            keep.history.events,
            crate::duration::millis(keep.history.retention),
        )),
    };
    let config = serde_json::to_vec(&config).map_err(|e| Error::Protocol(e.to_string()))?;
    program
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .current_dir("/");
    // SAFETY: only async-signal-safe syscalls between fork and exec.
    unsafe {
        program.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Hand these two on through exec.
            for fd in [Some(listen), pidfd].into_iter().flatten() {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = program
        .spawn()
        .map_err(|e| fail("cannot start the keeper process", e))?;
    let sent = child
        .stdin
        .take()
        .map(|mut s| s.write_all(&config))
        .unwrap_or_else(|| Err(std::io::ErrorKind::BrokenPipe.into()));
    if let Err(e) = sent {
        let _ = child.kill();
        let _ = child.wait();
        return Err(fail("cannot pass the settings to the keeper", e));
    }
    // Return only once the keeper's guard exists (it says so on its
    // stdout): until then, a keeper killed would leave nobody to stop the
    // script before the lease ends, and the script must not start its work
    // under the lock before that.
    if !ready(child.stdout.take()) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Error::Protocol(
            "the keeper process did not start (nothing keeps the lock)".into(),
        ));
    }
    // Not waited for: it outlives us, and init (or a subreaper) reaps it.
    Ok(Started::Keeper(child.id()))
}

/// Did the keeper say it is ready (one byte on `out` within 5s)?
fn ready(out: Option<std::process::ChildStdout>) -> bool {
    let Some(mut out) = out else {
        return false;
    };
    let mut fds = [crate::signals::pollin(out.as_raw_fd())];
    if poll(&mut fds, Duration::from_secs(5)) <= 0 {
        return false;
    }
    let mut b = [0u8; 1];
    matches!(out.read(&mut b), Ok(1))
}

/// The keeper process: read the settings from stdin, then keep the lock
/// (see the module doc). Returns the exit code; never prints.
pub fn keeper_main() -> Result<u8> {
    let typed = || {
        Error::invalid(format!(
            "`{KEEPER_ARG}` is internal: the keeper that `rlock acquire --keep` starts"
        ))
    };
    // SAFETY: plain syscall. Someone typed `rlock __keep`: nothing to read.
    if unsafe { libc::isatty(0) } == 1 {
        return Err(typed());
    }
    let mut raw = Vec::new();
    if std::io::stdin().lock().read_to_end(&mut raw).is_err() {
        return Err(typed());
    }
    let config = serde_json::from_slice::<Config>(&raw).map_err(|_| typed())?;
    drop(raw);
    let ready = detach(&config);
    // Detached: nobody reads an error from here on.
    Ok(match Keeper::new(config, ready) {
        Some(mut k) => k.run(),
        None => crate::exit_code::USAGE,
    })
}

/// The keeper's own name, no descriptor of the caller's but ours, stdio on
/// /dev/null. Returns the pipe that was stdout, to say "ready" on (see
/// `spawn`), or None.
fn detach(config: &Config) -> Option<OwnedFd> {
    // SAFETY: the keeper owns every descriptor it has (it was just
    // started, single-threaded, from rlock's own binary).
    unsafe {
        crate::hold::guard::close_all_but(&[0, 1, 2, config.listen, config.pidfd.unwrap_or(-1)])
    };
    // SAFETY: plain syscall; a new descriptor (3 or above) or -1.
    let ready = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    // SAFETY: a fresh descriptor we own.
    let ready = (ready >= 0).then(|| unsafe { OwnedFd::from_raw_fd(ready) });
    // SAFETY: plain syscalls on this process and its own descriptors.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"rlock-keeper".as_ptr());
        crate::fd::stdio_to_null();
    }
    ready
}
