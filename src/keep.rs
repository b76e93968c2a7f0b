//! `rlock acquire KEY --keep`: a lock that lives exactly as long as a
//! process (the calling script), as a flock(1) lock lives with its shell's
//! descriptor.
//!
//! # The keeper
//!
//! After the grant, rlock starts a small *keeper* process and exits; the
//! keeper renews the lease every TTL/3 on one connection of its own for as
//! long as the *watched* process lives, and releases every hold of the
//! token (re-entries included) the moment it exits, however it dies
//! (SIGKILL included).
//!
//! - It is started with fork+exec of the program itself (the binary's
//!   hidden `__keep` subcommand, see [`spawn`]), not a bare fork: under
//!   RedLock, requests to a slow master run on detached threads that may
//!   outlive the call (see `quorum.rs`), and a forked child of a
//!   multi-threaded process may find a lock held forever. The settings,
//!   the token included, go through a pipe on its stdin, never argv; the
//!   watched process's pidfd and the release socket are inherited.
//! - It is detached from everything of the caller: a session of its own
//!   (`setsid`: neither Ctrl-C nor a hangup of the script's terminal, nor a
//!   kill of its process group, reaches it; the script's death does, which
//!   is the point), stdio on /dev/null (so `tok=$(rlock acquire k --keep)`
//!   returns at once: the keeper holds no end of the pipe), every other
//!   descriptor closed, cwd `/`, named `rlock-keeper`.
//! - It waits in one `poll` on the watched process's pidfd (readable the
//!   moment it exits), the release socket and a signalfd, with a timeout at
//!   the next renewal: no busy loop. Without pidfd_open (Linux < 5.3) it
//!   checks the process with `kill(pid, 0)` and its start time every 250ms.
//! - SIGTERM, SIGINT, SIGHUP or SIGQUIT to the keeper: it releases and
//!   exits (a systemd stop of the unit, an admin's kill).
//!
//! # Which process is watched
//!
//! By default rlock's parent: the shell that runs the script. A `$(...)`
//! makes the shell fork a subshell for the command substitution; bash and
//! dash usually exec rlock directly in it (so the parent is the script
//! itself), but a subshell that stays (`$(rlock acquire k --keep; echo)`)
//! would be the parent and exit at once. So when the parent runs the same
//! executable with the same command line as the grandparent, and (where
//! /proc shows them) has the same stack and argument addresses — a forked
//! copy, not a new exec of the same program, which address space
//! randomization places elsewhere — and the grandparent reads our stdout
//! (holds the read end of the `$(...)` pipe; a script whose own stdout is
//! a pipe holds the write end of the one a subshell's rlock inherits), the
//! grandparent is watched instead. A `( ... )`
//! subshell is a forked copy too, but nobody above reads its output
//! through a pipe it holds: it is watched itself, as flock(1)'s lock in
//! `( flock 9; ... ) 9>f` ends with the subshell.
//! `--keep-while PID` names the process outright.
//!
//! # Release, and loss
//!
//! `rlock release KEY --token T` on the same host tells the keeper first,
//! over an abstract unix socket named after a hash of the token (the token
//! itself never leaves the process): `release LOCK` (its Redis key)
//! makes the keeper of that lock stop renewing and answer "ok" (a keeper
//! of another lock does not answer: the token names one lock); then the
//! release runs; then "released" ends the keeper quietly, or "held N" (N
//! holds remain) or "held" (the release failed) sets it renewing again,
//! unless its own grant was a re-entry and fewer than its grant's count
//! remain: then its hold was the one given back, and it ends quietly too.
//! Only the keeper's own user (or root) is heard.
//! A release from another host (or network namespace) cannot reach it: the
//! keeper sees the lock gone at its next renewal and treats it as a loss.
//!
//! On a loss (a renewal finds the lock gone or taken, or no renewal was
//! confirmed before the lease's validity ended, e.g. Redis unreachable)
//! the keeper writes a record `P{K}:lost` (JSON: host, pid, when, why,
//! action; it expires after an hour) that `rlock status` shows, applies
//! `--on-lost` to the watched process and every process it started (TERM,
//! KILL, or nothing), and exits. It never re-acquires.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::clock::BootTime;
use crate::conn::{ConnectOptions, Server, Tls};
use crate::exec::OnLost;
use crate::exec::tree::stat;
use crate::lock::LockName;
pub use crate::lock::LostRecord;
use crate::lock::RenewalSchedule;
use crate::{Error, Lease, Locker, Released, Result, Token};

/// The binary's first argument that runs [`keeper_main`] (internal).
pub const KEEPER_ARG: &str = "__keep";

/// How long a loss record stays in Redis.
pub const LOST_RECORD_TTL: Duration = Duration::from_secs(3600);

/// How often the keeper looks at the watched process without a pidfd.
const FALLBACK_POLL: Duration = Duration::from_millis(250);

/// The process a keeper keeps the lock for.
#[derive(Debug)]
pub struct Watched {
    pid: libc::pid_t,
    /// Its start time (/proc stat field 22), to tell it from a later
    /// process with the same pid where there is no pidfd.
    start: u64,
    pidfd: Option<OwnedFd>,
}

impl Watched {
    /// The caller's process: rlock's parent, or its grandparent when the
    /// parent is a forked copy of it (a `$(...)` subshell; see the module
    /// doc).
    pub fn caller() -> Result<Watched> {
        // SAFETY: plain syscall.
        let parent = unsafe { libc::getppid() };
        // Run as `rlock exec`'s command itself: its guard would be watched,
        // and the guard (a subreaper, the keeper's new parent) waits for
        // the keeper to exit: neither would ever end.
        let comm = std::fs::read_to_string(format!("/proc/{parent}/comm")).unwrap_or_default();
        if comm.trim_end() == "rlock-guard" {
            return Err(Error::Usage(
                "--keep as rlock exec's own command has no script to keep the lock for; \
                 use it inside the script, or --keep-while PID"
                    .into(),
            ));
        }
        let grand = stat(parent).map(|s| s.ppid);
        let pid = match grand {
            Some(g) if g > 1 && forked_copy(parent, g) && reads_our_output(g) => g,
            _ => parent,
        };
        let w = Watched::open(pid).map_err(|_| {
            Error::Usage(format!(
                "--keep: the calling process (pid {pid}) is already gone"
            ))
        })?;
        // The pidfd is ours now; make sure it names the process we meant,
        // not one that took its pid after it died: our parent is still our
        // parent (and, for the grandparent, its child still its child).
        // SAFETY: plain syscall.
        let still = unsafe { libc::getppid() } == parent
            && (pid == parent || stat(parent).map(|s| s.ppid) == Some(pid));
        if !still {
            return Err(Error::Usage(
                "--keep: the calling process exited before the keeper could start".into(),
            ));
        }
        Ok(w)
    }

    /// Process `pid` (`--keep-while PID`).
    pub fn pid(pid: i32) -> Result<Watched> {
        if pid <= 0 {
            return Err(Error::Usage(format!(
                "--keep-while {pid}: not a process id"
            )));
        }
        Watched::open(pid).map_err(|_| Error::Usage(format!("--keep-while {pid}: no such process")))
    }

    fn open(pid: libc::pid_t) -> std::result::Result<Watched, ()> {
        let start = stat(pid).map(|s| s.start).ok_or(())?;
        // SAFETY: plain syscall; the kernel returns a new descriptor
        // (O_CLOEXEC) or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // A descriptor fits a RawFd; -1 (failure) too.
        let fd = RawFd::try_from(fd).unwrap_or(-1);
        if fd >= 0 {
            // SAFETY: a fresh descriptor we own.
            let pidfd = Some(above_stdio(unsafe { OwnedFd::from_raw_fd(fd) }));
            return Ok(Watched { pid, start, pidfd });
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESRCH) => Err(()),
            // No pidfd_open (Linux < 5.3, or a seccomp filter): poll.
            _ => Ok(Watched {
                pid,
                start,
                pidfd: None,
            }),
        }
    }

    /// The watched process' pid.
    pub fn process_id(&self) -> i32 {
        self.pid
    }

    /// Has it exited (or is it a zombie)?
    fn gone(&self) -> bool {
        if let Some(fd) = &self.pidfd {
            let mut p = crate::signals::pollin(fd.as_raw_fd());
            // SAFETY: one valid pollfd, no wait.
            return unsafe { libc::poll(&mut p, 1, 0) } != 0;
        }
        match stat(self.pid) {
            Some(s) => s.start != self.start || s.dead,
            None => true,
        }
    }
}

/// Is `child` a forked copy of `parent` (a subshell), as far as /proc
/// tells? Same executable, same command line, and the same stack and
/// argument addresses where both are visible.
fn forked_copy(child: libc::pid_t, parent: libc::pid_t) -> bool {
    let exe = |p| std::fs::read_link(format!("/proc/{p}/exe")).ok();
    let cmdline = |p| std::fs::read(format!("/proc/{p}/cmdline")).ok();
    let (Some(a), Some(b)) = (exe(child), exe(parent)) else {
        return false;
    };
    if a != b || cmdline(child).is_none() || cmdline(child) != cmdline(parent) {
        return false;
    }
    match (stat(child), stat(parent)) {
        (Some(c), Some(p)) if c.layout.0 != 0 && p.layout.0 != 0 => c.layout == p.layout,
        _ => true,
    }
}

/// Does `pid` (a grandparent whose child is a forked copy of it) read our
/// stdout, as the shell does the pipe of a `$(...)`? A `( ... )` subshell
/// is a forked copy too, but its shell does not read its output: there the
/// subshell itself is the caller, as flock(1)'s `( flock 9; ... ) 9>f`
/// holds its lock until the subshell ends, not the script. If the
/// grandparent's descriptors cannot be read, it is watched as before.
fn reads_our_output(pid: libc::pid_t) -> bool {
    let Ok(ours) = std::fs::read_link("/proc/self/fd/1") else {
        return false;
    };
    if !ours.to_string_lossy().starts_with("pipe:") {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return true;
    };
    // Its read end: both ends of a pipe read as the same "pipe:[inode]",
    // and a script whose own stdout is a pipe (`script | logger`, a CI
    // runner) holds the write end of the one a `( ... )` subshell's rlock
    // inherited and prints to; that subshell is still the caller.
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|l| l == ours)
            && !write_only(pid, &fd.file_name().to_string_lossy())
    })
}

/// Is descriptor `fd` of `pid` open for writing only (/proc fdinfo
/// flags)? False if that cannot be read.
fn write_only(pid: libc::pid_t, fd: &str) -> bool {
    let Ok(info) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")) else {
        return false;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|f| f & libc::O_ACCMODE == libc::O_WRONLY)
}

/// The abstract socket name of the keeper of `token`: a hash, so the name
/// (visible to every local user in /proc/net/unix) reveals nothing.
fn socket_name(token: &Token) -> Vec<u8> {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_str().as_bytes());
    let hex: String = d.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("rlock-keep-{hex}").into_bytes()
}

fn socket_addr(token: &Token) -> Result<SocketAddr> {
    SocketAddr::from_abstract_name(socket_name(token))
        .map_err(|e| Error::Protocol(format!("keeper socket name: {e}")))
}

/// How the keeper keeps and what it does on a loss.
#[derive(Debug)]
pub struct Keep {
    /// The process whose life the lease lasts.
    pub watched: Watched,
    /// What to do to it if the lock is lost.
    pub on_lost: OnLost,
}

/// What the keeper needs, sent on its stdin (the token must not be on
/// argv).
#[derive(Serialize, Deserialize)]
struct Config {
    urls: Vec<String>,
    password: Option<String>,
    connect_timeout_ms: u64,
    cluster: bool,
    sentinel: Option<String>,
    min_replicas: u32,
    tls: (Option<String>, Option<String>, Option<String>),
    prefix: String,
    key: String,
    token: String,
    /// Release every hold at the end (the keeper's grant was the first).
    all: bool,
    /// The token's holds once the keeper's grant was made (1 unless it
    /// re-entered).
    count: u64,
    ttl_ms: u64,
    /// The lease's validity deadline, CLOCK_BOOTTIME ns.
    valid_until_ns: u64,
    on_lost: String,
    pid: i32,
    start: u64,
    pidfd: Option<i32>,
    listen: i32,
}

impl Config {
    fn connect_options(&self) -> ConnectOptions {
        let path = |p: &Option<String>| p.as_ref().map(std::path::PathBuf::from);
        ConnectOptions {
            urls: self.urls.clone(),
            password: self.password.clone(),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            cluster: self.cluster,
            sentinel: self.sentinel.clone(),
            min_replicas: self.min_replicas,
            tls: Tls {
                ca: path(&self.tls.0),
                cert: path(&self.tls.1),
                key: path(&self.tls.2),
            },
        }
    }
}

/// How a keeper was started.
#[derive(Debug, PartialEq, Eq)]
pub enum Started {
    /// A new keeper, with this pid.
    Keeper(u32),
    /// A keeper of this token runs already (a re-entered `acquire --keep`):
    /// it keeps the lock until its own process exits.
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
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Ok(Started::Already),
        Err(e) => return Err(fail("cannot create the keeper's socket", e)),
    };
    let listener = above_stdio(listener.into());
    let listen = listener.as_raw_fd();
    let pidfd = keep.watched.pidfd.as_ref().map(|f| f.as_raw_fd());
    let tls = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    let config = Config {
        urls: opts.urls.clone(),
        password: opts.password.clone(),
        connect_timeout_ms: crate::duration::millis(opts.connect_timeout),
        cluster: opts.cluster,
        sentinel: opts.sentinel.clone(),
        min_replicas: opts.min_replicas,
        tls: (tls(&opts.tls.ca), tls(&opts.tls.cert), tls(&opts.tls.key)),
        prefix: prefix.to_string(),
        key: lease.key.clone(),
        token: lease.token.as_str().to_string(),
        all: lease.count <= 1,
        count: lease.count,
        ttl_ms: crate::duration::millis(lease.ttl),
        valid_until_ns: crate::duration::nanos(lease.valid_until.since_boot()),
        on_lost: match keep.on_lost {
            OnLost::Term => "term",
            OnLost::Kill => "kill",
            OnLost::Ignore => "ignore",
        }
        .into(),
        pid: keep.watched.pid,
        start: keep.watched.start,
        pidfd,
        listen,
    };
    let config = serde_json::to_vec(&config).map_err(|e| Error::Protocol(e.to_string()))?;
    program
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
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
    // Not waited for: it outlives us, and init (or a subreaper) reaps it.
    Ok(Started::Keeper(child.id()))
}

/// The keeper process: read the settings from stdin, then keep the lock
/// (see the module doc). Returns the exit code; never prints.
pub fn keeper_main() -> Result<u8> {
    let typed = || {
        Error::Usage(format!(
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
    detach(&config);
    // Detached: nobody reads an error from here on.
    Ok(match Keeper::new(config) {
        Some(mut k) => k.run(),
        None => crate::exit_code::USAGE,
    })
}

/// The keeper's own name, no descriptor of the caller's but ours, stdin on
/// /dev/null.
fn detach(config: &Config) {
    // SAFETY: the keeper owns every descriptor it has (it was just
    // started, single-threaded, from rlock's own binary).
    unsafe { crate::exec::close_all_but(&[0, 1, 2, config.listen, config.pidfd.unwrap_or(-1)]) };
    // SAFETY: plain syscalls on this process and its own descriptors.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"rlock-keeper".as_ptr());
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

struct Keeper {
    /// None until a connect succeeds.
    locker: Option<Locker>,
    prefix: String,
    opts: ConnectOptions,
    name: LockName,
    key: String,
    token: Token,
    all: bool,
    /// As in [`Config`].
    count: u64,
    ttl: Duration,
    valid_until: BootTime,
    on_lost: OnLost,
    watched: Watched,
    listener: UnixListener,
    sigfd: crate::signals::Blocked,
    /// A release in progress: its connection, and the point after which
    /// we renew anyway.
    releasing: Option<(UnixStream, BootTime)>,
}

/// Signals that make the keeper release and exit.
const ENDS: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

impl Keeper {
    fn new(c: Config) -> Option<Keeper> {
        let opts = c.connect_options();
        let token = Token::parse(&c.token).ok()?;
        let name = LockName::new(&c.prefix, &c.key).ok()?;
        // SAFETY: descriptors handed to us by `spawn`, now ours alone.
        let listener = unsafe { UnixListener::from_raw_fd(c.listen) };
        listener.set_nonblocking(true).ok()?;
        // SAFETY: as above.
        let pidfd = c.pidfd.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        let sigfd = end_signals()?;
        // Connecting may fail now (Redis down): renewals retry, connect
        // included, until the lease's validity ends.
        let locker = Locker::connect(&opts, &c.prefix).ok();
        Some(Keeper {
            locker,
            prefix: c.prefix,
            opts,
            name,
            key: c.key,
            all: c.all,
            count: c.count,
            token,
            ttl: Duration::from_millis(c.ttl_ms),
            valid_until: BootTime::from_since_boot(Duration::from_nanos(c.valid_until_ns)),
            on_lost: match c.on_lost.as_str() {
                "kill" => OnLost::Kill,
                "ignore" => OnLost::Ignore,
                _ => OnLost::Term,
            },
            watched: Watched {
                pid: c.pid,
                start: c.start,
                pidfd,
            },
            listener,
            sigfd,
            releasing: None,
        })
    }

    fn run(&mut self) -> u8 {
        let RenewalSchedule {
            every,
            retry,
            first: mut next,
        } = RenewalSchedule::new(self.valid_until, self.ttl);
        let (key, token, ttl) = (self.key.clone(), self.token.clone(), self.ttl);
        loop {
            if self.watched.gone() {
                return self.release_and_exit();
            }
            let paused = self
                .releasing
                .as_ref()
                .is_some_and(|(_, until)| !until.passed());
            if !paused && next.passed() {
                let sent = BootTime::now();
                match self.locker().and_then(|l| l.renew(&key, &token, ttl)) {
                    Ok(valid) => {
                        self.valid_until = valid;
                        next = sent + every;
                    }
                    // A release announced to us took it: nothing lost.
                    Err(Error::Lost { .. } | Error::NotOwner { .. })
                        if self.releasing.is_some() =>
                    {
                        return 0;
                    }
                    Err(Error::Lost { .. }) => {
                        return self.lost("it expired or was deleted");
                    }
                    Err(Error::NotOwner { .. }) => {
                        return self.lost("another owner holds it now");
                    }
                    Err(_) => next = BootTime::now() + retry,
                }
                continue;
            }
            if self.valid_until.passed() {
                return self
                    .lost("no renewal confirmed before the lease ended (Redis unreachable?)");
            }
            let mut wake = if paused {
                self.releasing.as_ref().map_or(next, |(_, u)| *u)
            } else {
                next
            };
            wake = wake.min(self.valid_until);
            let mut timeout = wake.remaining();
            if self.watched.pidfd.is_none() {
                timeout = timeout.min(FALLBACK_POLL);
            }
            let release_fd = self.releasing.as_ref().map_or(-1, |(s, _)| s.as_raw_fd());
            let mut fds = [
                crate::signals::pollin(self.watched.pidfd.as_ref().map_or(-1, |f| f.as_raw_fd())),
                crate::signals::pollin(self.listener.as_raw_fd()),
                crate::signals::pollin(release_fd),
                crate::signals::pollin(self.sigfd.fd()),
            ];
            let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
            // A 0ms timeout for a deadline less than 1ms away would spin;
            // round up.
            let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
            // SAFETY: a valid array of pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if n <= 0 {
                continue; // timeout, EINTR
            }
            if fds[3].revents != 0 {
                return self.release_and_exit();
            }
            if fds[0].revents != 0 {
                return self.release_and_exit();
            }
            if fds[2].revents != 0
                && let Some(code) = self.verdict()
            {
                return code;
            }
            if fds[2].revents != 0 {
                next = BootTime::now();
            }
            if fds[1].revents != 0 {
                self.accept();
            }
        }
    }

    fn locker(&mut self) -> Result<&mut Locker> {
        if self.locker.is_none() {
            self.locker = Some(Locker::connect(&self.opts, &self.prefix)?);
        }
        Ok(self.locker.as_mut().expect("just connected"))
    }

    /// A connection on the release socket: "release" from our user (or
    /// root) pauses renewals until the verdict.
    fn accept(&mut self) {
        let Ok((stream, _)) = self.listener.accept() else {
            return;
        };
        if !trusted(&stream) {
            return;
        }
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut line = String::new();
        let mut r = BufReader::new(&stream);
        // A release of another lock with this token (the socket is named
        // after the token alone) is none of ours: no "ok", so the releaser
        // goes on without us; were it heard, its "nothing held" would end
        // the keeper without a release, and the lease would run out under
        // the script.
        if r.read_line(&mut line).is_err()
            || line.trim_end_matches('\n') != format!("release {}", self.name.redis_key())
        {
            return;
        }
        if (&stream).write_all(b"ok\n").is_err() {
            return;
        }
        // The releaser has its connect timeout per try: give it a few, but
        // never let the lease run out unrenewed for it.
        let margin = self.ttl / 3;
        let until = (BootTime::now() + self.opts.connect_timeout * 3)
            .min(self.valid_until.saturating_sub(margin));
        self.releasing = Some((stream, until));
    }

    /// The releaser's verdict: Some(exit code) if it released the lock.
    fn verdict(&mut self) -> Option<u8> {
        let (stream, _) = self.releasing.take()?;
        let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
        let mut line = String::new();
        let _ = BufReader::new(&stream).read_line(&mut line);
        let line = line.trim();
        if line == "released" {
            return Some(0);
        }
        // "held N": N holds remain. Fewer than there were once our grant
        // was made, and that grant a re-entry (`acquire --keep` inside an
        // exec of the same lock): our hold is the one given back, the rest
        // are the enclosing holders'. Renewing on, we would release one of
        // theirs when the watched process ends, the lock freed under them.
        let left = line
            .strip_prefix("held ")
            .and_then(|n| n.parse::<u64>().ok());
        match left {
            Some(n) if !self.all && n < self.count => Some(0),
            _ => None, // held, or the release failed, or the releaser died: renew now
        }
    }

    /// The watched process is gone, or we were told to stop: give every
    /// hold back, retrying while the lease lasts.
    fn release_and_exit(&mut self) -> u8 {
        loop {
            let (key, token, all) = (self.key.clone(), self.token.clone(), self.all);
            // Honours a --min-hold given at the grant.
            let release = |l: &mut Locker| l.release_with(&key, &token, all, Some(Duration::ZERO));
            match self.locker().and_then(release) {
                Ok(_) => return 0,
                Err(e) if !matches!(e, Error::Unavailable { .. }) => return 0,
                Err(_) if self.valid_until.passed() => return 0,
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// The lock is lost: record it, apply --on-lost, exit.
    fn lost(&mut self, why: &str) -> u8 {
        // Only a process that still runs: it may have exited during the
        // renewal that found the loss, and once it is reaped its pid may
        // belong to another process (a pidfd does not hold the number).
        let gone = self.watched.gone();
        let action = match self.on_lost {
            OnLost::Ignore => "nothing done (--on-lost ignore)",
            _ if gone => "nothing done (the process had exited)",
            OnLost::Term => "SIGTERM sent",
            OnLost::Kill => "SIGKILL sent",
        };
        // The script first: the record may take a connect timeout.
        match self.on_lost {
            _ if gone => {}
            OnLost::Term => signal_tree(&self.watched, libc::SIGTERM),
            OnLost::Kill => signal_tree(&self.watched, libc::SIGKILL),
            OnLost::Ignore => {}
        }
        let record = LostRecord {
            host: crate::lock::HolderInfo::current(None).host,
            pid: self.watched.pid as u32,
            when: crate::lock::format_ms(now_ms()),
            when_ms: now_ms(),
            why: why.to_string(),
            action: action.to_string(),
        };
        let _ = record_loss(&self.opts, &self.name, &record);
        crate::exit_code::LOST
    }
}

/// Is the peer our own user, or root (SO_PEERCRED)?
fn trusted(stream: &UnixStream) -> bool {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: 0,
    };
    #[allow(
        clippy::cast_possible_truncation,
        reason = "a ucred is 12 bytes, far below socklen_t::MAX"
    )]
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt fills `cred`, of the size given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: plain syscall.
    rc == 0 && (cred.uid == 0 || cred.uid == unsafe { libc::geteuid() })
}

/// `sig` to the watched process and every process it started (a
/// snapshot: children first collected, so that none escapes by being
/// re-parented when it dies). Call only once [`Watched::gone`] said it
/// runs.
fn signal_tree(root: &Watched, sig: i32) {
    match &root.pidfd {
        // SAFETY: plain syscall on our pidfd, which names that process
        // even if it has exited since and its pid was reused.
        Some(fd) => unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        },
        // SAFETY: plain syscall; `gone` has just checked the pid's start
        // time (the window is this one call).
        None => unsafe {
            libc::kill(root.pid, sig);
        },
    }
    crate::exec::tree::signal_all(root.pid, sig);
}

/// TERM, INT, HUP and QUIT blocked and readable on a signalfd, whatever
/// dispositions we inherited (an ignored signal would never reach it).
fn end_signals() -> Option<crate::signals::Blocked> {
    for s in ENDS {
        // SAFETY: plain syscall on this single-threaded process.
        unsafe { libc::signal(s, libc::SIG_DFL) };
    }
    crate::signals::Blocked::new(&ENDS).ok()
}

/// `fd`, moved to 3 or above if it is 0, 1 or 2 (rlock started with a
/// standard descriptor closed): the keeper's stdio is set up over those.
fn above_stdio(fd: OwnedFd) -> OwnedFd {
    if fd.as_raw_fd() > 2 {
        return fd;
    }
    // SAFETY: plain syscall; a new descriptor we own, or -1.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return fd;
    }
    // SAFETY: as above.
    unsafe { OwnedFd::from_raw_fd(new) }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, crate::duration::millis)
}

/// Write `record` on every server that answers (it expires after
/// [`LOST_RECORD_TTL`]), but not over a key without a TTL: every loss
/// record has one, so that is data rlock did not write (lua/common.lua).
/// A PTTL the user may not run (an ACL from before +pttl) leaves it unknown,
/// and the record is written as before.
pub fn record_loss(opts: &ConnectOptions, name: &LockName, record: &LostRecord) -> Result<()> {
    let json = serde_json::to_string(record).map_err(|e| Error::Protocol(e.to_string()))?;
    let mut last = Ok(());
    for server in Server::open_all(opts)? {
        let res = server.connect().and_then(|mut c| {
            let ttl: redis::RedisResult<i64> =
                redis::cmd("PTTL").arg(name.lost_key()).query(&mut c);
            if matches!(ttl, Ok(-1)) {
                return Err(Error::Conflict(format!(
                    "{} holds data rlock did not write: the loss is not recorded there",
                    name.lost_key()
                )));
            }
            redis::cmd("SET")
                .arg(name.lost_key())
                .arg(&json)
                .arg("PX")
                .arg(crate::duration::millis(LOST_RECORD_TTL))
                .query::<()>(&mut c)
                .map_err(|e| Error::from_redis(e, "record a lost lock"))
        });
        if res.is_err() {
            last = res;
        }
    }
    last
}

/// Release `token`'s hold(s) on `key` as [`Locker::release_with`] does,
/// telling this host's keeper of the token first, if there is one, so it
/// stops renewing (and exits once the lock is free) instead of taking the
/// release for a loss.
pub fn release(
    locker: &mut Locker,
    key: &str,
    token: &Token,
    all: bool,
    min_hold: Option<Duration>,
) -> Result<Released> {
    let keeper = announce(&locker.name(key)?, token, locker.timeout());
    let res = locker.release_with(key, token, all, min_hold);
    if let Some(mut s) = keeper {
        let verdict = match &res {
            Ok(Released::Released | Released::NotHeld) => "released".to_string(),
            Ok(Released::StillHeld(n)) => format!("held {n}"),
            Err(_) => "held".to_string(),
        };
        let _ = s.write_all(format!("{verdict}\n").as_bytes());
    }
    res
}

/// Connect to the keeper of `token` for `lock` and have it pause; None if
/// there is none (or it keeps another lock, or does not answer in time).
fn announce(lock: &LockName, token: &Token, timeout: Duration) -> Option<UnixStream> {
    let s = UnixStream::connect_addr(&socket_addr(token).ok()?).ok()?;
    // The keeper may be in the middle of a renewal (bounded by its own
    // connect timeout).
    let wait = timeout.max(Duration::from_secs(1)) * 2;
    s.set_read_timeout(Some(wait)).ok()?;
    s.set_write_timeout(Some(wait)).ok()?;
    (&s).write_all(format!("release {}\n", lock.redis_key()).as_bytes())
        .ok()?;
    let mut answer = String::new();
    BufReader::new(&s).read_line(&mut answer).ok()?;
    (answer.trim() == "ok").then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_hide_the_token() {
        let t = Token::generate();
        let name = String::from_utf8(socket_name(&t)).unwrap();
        assert!(name.starts_with("rlock-keep-"), "{name}");
        assert_eq!(name.len(), "rlock-keep-".len() + 32);
        assert!(!name.contains(t.as_str()));
        assert_eq!(socket_name(&t), socket_name(&t.clone()));
        assert_ne!(socket_name(&t), socket_name(&Token::generate()));
    }

    #[test]
    fn our_own_process_is_watchable_and_a_bogus_pid_is_not() {
        let me = Watched::pid(std::process::id() as i32).unwrap();
        assert!(!me.gone());
        assert!(Watched::pid(0).is_err());
        assert!(Watched::pid(-5).is_err());
        // Beyond pid_max.
        assert!(Watched::pid(i32::MAX).is_err());
    }

    #[test]
    fn a_forked_copy_is_told_from_another_program() {
        let me = std::process::id() as libc::pid_t;
        // SAFETY: plain syscalls; the child only sleeps (async-signal-safe)
        // until it is killed.
        let child = unsafe {
            match libc::fork() {
                0 => loop {
                    libc::pause();
                },
                pid => pid,
            }
        };
        assert!(child > 0);
        let copy = forked_copy(child, me);
        // SAFETY: plain syscalls on our own child.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
        assert!(copy, "a forked child is a copy");
        // Our parent (cargo, or a shell) runs another program.
        // SAFETY: plain syscall.
        assert!(!forked_copy(me, unsafe { libc::getppid() }));
    }
}
