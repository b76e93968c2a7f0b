//! The guard: a small process that is the command's parent, a child
//! subreaper for its whole tree, and a dead-man switch on the lease.
//!
//! rlock forks it first thing in [`super::run`], before any thread exists,
//! and talks to it over a SOCK_SEQPACKET socket pair (one datagram per
//! message, so no framing). The guard:
//! - sits in a process group of its own and ignores job-control and
//!   terminal signals, so neither Ctrl-Z nor a kill of rlock's job (a CI
//!   runner killing the process group) stops or kills it with rlock;
//! - is PR_SET_CHILD_SUBREAPER, and starts the command (in a new process
//!   group, the terminal's foreground group in interactive use), so every
//!   descendant stays in its tree until it exits (see [`super::tree`]);
//! - holds a CLOCK_BOOTTIME timer at the kill deadline rlock last sent
//!   (moved after every confirmed renewal), and SIGKILLs the whole tree when
//!   it fires, whatever rlock is doing: stopped, starved, blocked on a full
//!   stderr, or the machine just resumed from suspend;
//! - does not start the command if that deadline passed before it read
//!   the request to (it was stopped or starved meanwhile);
//! - SIGKILLs the tree when rlock's end of the socket closes (rlock died);
//! - reaps everything, reports the command's stops and exit, and reports
//!   "empty" once no descendant is left, then exits.
//!
//! The guard never prints, reads the environment only through the C
//! library's `environ` (no lock), and takes no lock that another thread of
//! the forking process could hold: in the binary it is forked while rlock
//! has one thread; a library caller with other threads relies on glibc's
//! fork-safe malloc for the few allocations it makes.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::clock::BootTime;
use crate::{Error, Result, exit_code};

use super::tree;

/// Signals the guard ignores for itself; the command gets them back as
/// rlock found them.
const IGNORED: [i32; 10] = {
    let f = super::FORWARDED;
    [
        f[0],
        f[1],
        f[2],
        f[3],
        f[4],
        f[5],
        libc::SIGPIPE,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
    ]
};

/// The longest message rlock sends the guard.
const MAX_MSG: usize = 1 << 16;

/// What the guard tells rlock.
#[derive(Debug)]
pub(crate) enum Report {
    /// The command runs with this pid (and process group).
    Started(libc::pid_t),
    /// The command could not be started.
    SpawnFailed(std::io::Error),
    /// The command was stopped by this signal.
    Stopped(i32),
    /// The command exited with this wait status.
    Exited(std::process::ExitStatus),
    /// The kill deadline passed and the guard SIGKILLed the tree.
    Enforced,
    /// No descendant is left; the guard has exited.
    Empty,
    /// The guard is gone without saying "empty" (killed by someone).
    Gone,
}

/// rlock's handle on its guard.
pub(crate) struct Guard {
    pid: libc::pid_t,
    sock: OwnedFd,
}

/// What the command is and how to start it.
pub(crate) struct Launch<'a> {
    pub program: &'a OsString,
    pub args: &'a [OsString],
    /// rlock's controlling terminal, open.
    pub tty: Option<RawFd>,
    /// Make the command's group the terminal's foreground group.
    pub foreground: bool,
}

impl Guard {
    /// Fork the guard. Call before starting any thread (see module doc).
    pub(crate) fn fork(launch: &Launch) -> Result<Guard> {
        let mut fds = [0; 2];
        // SAFETY: plain syscalls; the child runs `guard_main`, which never
        // returns into the caller.
        unsafe {
            if libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            ) != 0
            {
                return Err(os_error("cannot create the guard's socket"));
            }
            let (ours, theirs) = (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]));
            match libc::fork() {
                -1 => Err(os_error("cannot fork the guard process")),
                0 => {
                    drop(ours);
                    guard_main(theirs, launch)
                }
                pid => Ok(Guard { pid, sock: ours }),
            }
        }
    }

    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// The socket, to poll: readable when a report (or the guard's end)
    /// is there for [`Guard::recv`].
    pub(crate) fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn send(&self, msg: &[u8]) {
        // SAFETY: plain syscall on our socket. MSG_NOSIGNAL: a dead guard
        // must not kill rlock with SIGPIPE. A failed send means the guard is
        // gone, which the reader reports.
        //
        // MSG_DONTWAIT: a guard that someone stopped reads nothing, and a
        // few hundred messages (a deadline per renewal, a forwarded signal
        // each) fill the socket. A blocking send then froze the renewer and
        // the supervisor with it: no renewal, no kill, and the lease ran out
        // under the command. A message dropped on a full socket is safe:
        // the guard keeps an earlier deadline (it only kills sooner), and
        // every kill that matters is also made by rlock itself (see
        // `Supervisor::kill_tree`). Before the start the socket holds at
        // most the deadline, so the spawn request is never dropped.
        unsafe {
            libc::send(
                self.sock.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
    }

    /// Start the command with `env` added to rlock's environment.
    pub(crate) fn spawn(&self, env: &[(&str, &str)]) -> Result<()> {
        let mut msg = vec![b'S'];
        for (k, v) in env {
            msg.extend_from_slice(k.as_bytes());
            msg.push(b'=');
            msg.extend_from_slice(v.as_bytes());
            msg.push(0);
        }
        // The guard reads one message of at most MAX_MSG bytes; a longer
        // one would be cut (or not sent at all), and rlock would wait for a
        // start that never comes. Only an RLOCK_HELD set by hand gets here.
        if msg.len() > MAX_MSG {
            return Err(Error::Usage(format!(
                "cannot start the command: its RLOCK_* variables would take {} bytes, more \
                 than {MAX_MSG}; is RLOCK_HELD in the environment set by hand?",
                msg.len()
            )));
        }
        self.send(&msg);
        Ok(())
    }

    /// SIGKILL the whole tree at `at` (None: never). Replaces the last one.
    pub(crate) fn deadline(&self, at: Option<BootTime>) {
        let ns = at.map_or(0, |t| crate::duration::nanos(t.since_boot()).max(1));
        let mut msg = vec![b'D'];
        msg.extend_from_slice(&ns.to_le_bytes());
        self.send(&msg);
    }

    /// Send `sig` to every process of the tree now.
    pub(crate) fn signal(&self, sig: i32) {
        let mut msg = vec![b'K'];
        msg.extend_from_slice(&sig.to_le_bytes());
        self.send(&msg);
    }

    /// Block until the guard reports something.
    pub(crate) fn recv(&self) -> Report {
        let mut buf = [0u8; 16];
        // SAFETY: plain syscall into our buffer.
        let n = unsafe { libc::recv(self.sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        // ECONNRESET: the guard exited with a message of ours unread (it
        // had nothing left to act on). Linux reports that error once, ahead
        // of the reports still queued for us; they follow on the next call.
        if n < 0 && matches!(last_errno(), libc::EINTR | libc::ECONNRESET) {
            return self.recv();
        }
        let int = || i32::from_le_bytes(buf[1..5].try_into().expect("4 bytes"));
        match (n, buf[0]) {
            (5, b'P') => Report::Started(int()),
            (5, b'F') => Report::SpawnFailed(std::io::Error::from_raw_os_error(int())),
            (5, b'T') => Report::Stopped(int()),
            (5, b'E') => {
                use std::os::unix::process::ExitStatusExt;
                Report::Exited(std::process::ExitStatus::from_raw(int()))
            }
            (1, b'L') => Report::Enforced,
            (1, b'Z') => Report::Empty,
            _ => Report::Gone,
        }
    }
}

impl Drop for Guard {
    /// Closing our end tells the guard that rlock is done: if anything is
    /// left in the tree it is killed; then the guard exits and is reaped
    /// here, so no zombie stays behind.
    fn drop(&mut self) {
        // SAFETY: plain syscalls on our own socket and child.
        unsafe {
            libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_RDWR);
            // It exits within milliseconds (a tree to kill takes at most a
            // second); one that someone stopped is not waited for forever.
            // A pidfd says the moment it exits; without one (Linux < 5.3),
            // look every millisecond.
            if libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) != 0 {
                return; // the usual case: it had exited already
            }
            // A descriptor fits a RawFd; -1 (failure) too.
            let pidfd =
                RawFd::try_from(libc::syscall(libc::SYS_pidfd_open, self.pid, 0)).unwrap_or(-1);
            let patience = 3000;
            for _ in 0..patience {
                if libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) != 0 {
                    break;
                }
                if pidfd >= 0 {
                    let mut p = libc::pollfd {
                        fd: pidfd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    if libc::poll(&mut p, 1, patience) == 0 {
                        libc::kill(self.pid, libc::SIGKILL);
                        libc::waitpid(self.pid, std::ptr::null_mut(), 0);
                        break;
                    }
                } else {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            if pidfd >= 0 {
                libc::close(pidfd);
            }
            if libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) == 0 {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

fn os_error(what: &str) -> Error {
    Error::Protocol(format!("{what}: {}", std::io::Error::last_os_error()))
}

// ---------------------------------------------------------------------
// The guard process itself.

/// Signal dispositions and mask as rlock had them, to hand on to the
/// command unchanged.
#[derive(Clone, Copy)]
struct Inherited {
    actions: [libc::sigaction; IGNORED.len() + 1],
    mask: libc::sigset_t,
}

const CHLD: usize = IGNORED.len();

fn guard_main(sock: OwnedFd, launch: &Launch) -> ! {
    let sock = sock.as_raw_fd();
    // SAFETY: plain syscall.
    let job = unsafe { libc::getpgrp() };
    // SAFETY: all plain syscalls on this (single-threaded) process.
    let (inherited, sigfd, timer) = unsafe {
        libc::prctl(libc::PR_SET_NAME, c"rlock-guard".as_ptr());
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        let mut inh: Inherited = std::mem::zeroed();
        let ign = libc::SIG_IGN;
        for (i, &sig) in IGNORED.iter().enumerate() {
            set_action(sig, ign, &mut inh.actions[i]);
        }
        // Children's exits must queue up as zombies for us to reap (an
        // inherited SIG_IGN would have the kernel reap them silently).
        set_action(libc::SIGCHLD, libc::SIG_DFL, &mut inh.actions[CHLD]);
        let mut chld: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &chld, &mut inh.mask);
        let sigfd = libc::signalfd(-1, &chld, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        let timer =
            libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK);
        (inh, sigfd, timer)
    };
    if sigfd < 0 || timer < 0 {
        exit();
    }
    let mut buf = vec![0u8; MAX_MSG];
    // Before the command starts: take the deadline, then the go.
    let main = loop {
        let n = recv(sock, &mut buf);
        match buf.first().filter(|_| n > 0) {
            Some(b'D') => arm(timer, &buf[..n]),
            Some(b'S') if expired(timer) => {
                // The kill deadline passed before the go was read (this
                // process was stopped or starved since rlock sent it): the
                // lease may be over, and the lock another's. Started now,
                // the command would run beside that holder until the timer
                // is next looked at, so it never starts; rlock hears what
                // it hears of a tree killed at the deadline.
                send(sock, b"L");
                send(sock, b"Z");
                exit()
            }
            Some(b'S') => break spawn(launch, &buf[1..n], &inherited),
            _ => exit(), // rlock gave up (busy, error) or died
        }
    };
    let main = match main {
        Ok(pid) => {
            report(sock, b'P', pid);
            pid
        }
        Err(e) => {
            report(sock, b'F', e.raw_os_error().unwrap_or(libc::ENOEXEC));
            exit()
        }
    };
    // The command has its copies: keep nothing else open (no stdio pipe,
    // no Redis connection of rlock's) but the guard's own descriptors.
    // SAFETY: the guard owns every descriptor it has.
    unsafe { close_all_but(&[sock, sigfd, timer, launch.tty.unwrap_or(-1)]) };
    // SAFETY: as above.
    unsafe { crate::fd::stdio_to_null() };
    let me = std::process::id() as libc::pid_t;
    let mut rlock_alive = true;
    let mut main_done = false;
    loop {
        let mut fds = [
            crate::signals::pollin(if rlock_alive { sock } else { -1 }),
            crate::signals::pollin(sigfd),
            crate::signals::pollin(timer),
        ];
        // SAFETY: valid array of pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            continue; // EINTR
        }
        if fds[0].revents != 0 {
            let n = recv(sock, &mut buf);
            match buf.first().filter(|_| n > 0) {
                Some(b'D') => arm(timer, &buf[..n]),
                Some(b'K') if n == 5 => {
                    tree::signal_all(me, i32::from_le_bytes(buf[1..5].try_into().expect("4")))
                }
                Some(_) => {}
                None => {
                    // rlock is gone: nothing may run on without it, and the
                    // terminal goes back to rlock's job (its shell or
                    // script), not to a dead group.
                    rlock_alive = false;
                    if let Some(tty) = launch.tty.filter(|_| launch.foreground) {
                        // First, as rlock's shell is already on its way.
                        // SAFETY: plain syscalls; SIGTTOU is ignored here.
                        unsafe {
                            if libc::tcgetpgrp(tty) == main {
                                libc::tcsetpgrp(tty, job);
                            }
                        }
                    }
                    tree::kill_all(me);
                }
            }
        }
        if fds[2].revents != 0 {
            let mut ticks = 0u64;
            // SAFETY: reads 8 bytes into a u64.
            if unsafe { libc::read(timer, (&mut ticks as *mut u64).cast(), 8) } == 8 {
                tree::kill_all(me);
                if rlock_alive {
                    send(sock, b"L");
                }
            }
        }
        if fds[1].revents != 0 {
            drain(sigfd);
        }
        // Reap whatever has exited (and note stops of the command).
        let empty = loop {
            let mut st = 0;
            // SAFETY: plain syscall.
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::WUNTRACED) };
            if pid == 0 {
                // Children left, but perhaps only keepers of an `acquire
                // --keep` that ran in the command: not the command's work,
                // and never waited for (see `tree::is_keeper`).
                if (!main_done && rlock_alive) || !tree::descendants(me).is_empty() {
                    break false;
                }
                // No live process is left, but some died since the waitpid
                // above: zombies the walk does not count, children of ours
                // or orphans re-parented to us as their parent died. Reap
                // them before saying "empty": a zombie is still a member of
                // its process group, and left to init (after we exit) it
                // kept a dead sub-job's group, still the terminal's
                // foreground group, looking alive to rlock, which then left
                // the terminal there (the script after it could not read
                // it). A zombie's children were re-parented before it died,
                // so none can turn up after this.
                // SAFETY: plain syscall; a null status pointer is allowed.
                while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
                break true;
            }
            if pid < 0 {
                break last_errno() == libc::ECHILD;
            }
            // Once the command is reaped its pid is free: a leftover that
            // left its group can get it, and is not the command.
            if pid == main && !main_done && rlock_alive {
                if libc::WIFSTOPPED(st) {
                    report(sock, b'T', libc::WSTOPSIG(st));
                } else {
                    main_done = true;
                    report(sock, b'E', st);
                }
            }
        };
        if empty && (main_done || !rlock_alive) {
            if rlock_alive {
                send(sock, b"Z");
            }
            exit();
        }
    }
}

/// Close every descriptor of this process but those in `keep` (negative
/// entries are ignored): close_range (Linux 5.9) between the kept ones,
/// else each one /proc lists.
///
/// # Safety
/// Only in a process that owns all its descriptors (the guard; the keeper
/// once detached): nothing else may be using the ones closed.
pub(crate) unsafe fn close_all_but(keep: &[RawFd]) {
    let mut keep = keep.to_vec();
    keep.sort_unstable();
    let mut from = 0;
    let mut ranged = true;
    // SAFETY: plain syscalls; the caller owns the descriptors.
    unsafe {
        for &k in keep.iter().filter(|&&k| k >= 0) {
            if k > from {
                ranged &= libc::syscall(libc::SYS_close_range, from, k - 1, 0) == 0;
            }
            from = k + 1;
        }
        ranged &= libc::syscall(libc::SYS_close_range, from, u32::MAX, 0) == 0;
    }
    if ranged {
        return;
    }
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in open.into_iter().filter(|fd| !keep.contains(fd)) {
        // SAFETY: as above (the directory's own descriptor is closed by
        // now: closing its stale number fails harmlessly).
        unsafe { libc::close(fd) };
    }
}

/// Start the command: a new process group (made the terminal's foreground
/// group if asked), SIGKILLed if the guard dies, with rlock's signal
/// dispositions and mask restored, and rlock's environment plus `env`
/// (NUL-separated `K=V` pairs).
///
/// The child is made with `clone(CLONE_VM | CLONE_VFORK)`, as posix_spawn
/// does: it borrows the guard's memory until it execs, so nothing of the
/// guard's address space is copied (a fork would copy its page tables and
/// leave both processes copy-on-write faults to take). posix_spawn itself
/// cannot set PR_SET_PDEATHSIG, hence this. The child runs on a stack of
/// its own, makes only syscalls and glibc's `execvpe` (written to run after
/// vfork, for posix_spawnp: no malloc, no locks), and the guard installs no
/// signal handler that could run on the child's stack.
fn spawn(launch: &Launch, env: &[u8], inh: &Inherited) -> std::io::Result<libc::pid_t> {
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;
    let einval = || std::io::Error::from_raw_os_error(libc::ENOEXEC);
    let program = CString::new(launch.program.as_bytes()).map_err(|_| einval())?;
    let mut args = vec![program.clone()];
    for a in launch.args {
        args.push(CString::new(a.as_bytes()).map_err(|_| einval())?);
    }
    let added: Vec<CString> = env
        .split(|&b| b == 0)
        .filter(|p| p.contains(&b'='))
        .map(|p| CString::new(p).map_err(|_| einval()))
        .collect::<std::io::Result<_>>()?;
    let name = |kv: &[u8]| -> Vec<u8> { kv.split(|&b| b == b'=').next().unwrap_or(kv).to_vec() };
    let names: Vec<Vec<u8>> = added.iter().map(|c| name(c.as_bytes())).collect();
    let mut envp: Vec<*const libc::c_char> = Vec::new();
    // rlock's environment as the C library has it, read without std's
    // environment lock (a forking library caller's thread may hold it).
    unsafe extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: environ is a NULL-terminated array of C strings; this
    // process has one thread and nothing changes it meanwhile.
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            let kv = CStr::from_ptr(*p).to_bytes();
            if !names.iter().any(|n| *n == name(kv)) {
                envp.push(*p);
            }
            p = p.add(1);
        }
    }
    envp.extend(added.iter().map(|c| c.as_ptr()));
    envp.push(std::ptr::null());
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut child = Child {
        program: program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        // SAFETY: plain syscall.
        guard: unsafe { libc::getpid() },
        tty: launch.tty.filter(|_| launch.foreground).unwrap_or(-1),
        inh: *inh,
        errno: 0,
    };
    // Room for execvpe's path buffer and its argv copy for a script
    // without a #! line; untouched pages cost nothing.
    let mut stack = vec![0u8; 256 * 1024 + 16 * argv.len()];
    // SAFETY: the stack grows down from its 16-aligned end; `child` and
    // everything it points to outlive the clone, which returns only once
    // the child has exec'd or exited (CLONE_VFORK).
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(stack.len()) as usize & !15;
        libc::clone(
            child_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut child as *mut Child).cast(),
        )
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the child is done with our memory (CLONE_VFORK); a volatile
    // read, as the compiler does not know the child wrote it.
    let errno = unsafe { std::ptr::read_volatile(&child.errno) };
    if errno != 0 {
        // SAFETY: reap the child that failed to exec.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        return Err(std::io::Error::from_raw_os_error(errno));
    }
    Ok(pid)
}

/// What the cloned child needs, in the guard's memory.
struct Child {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    guard: libc::pid_t,
    tty: RawFd,
    inh: Inherited,
    /// Set by the child if it fails before or at exec.
    errno: i32,
}

/// The child between clone and exec: syscalls only (see [`spawn`]).
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the guard's `Child`, valid until we exec or exit;
    // only async-signal-safe calls follow.
    unsafe {
        let c = &mut *arg.cast::<Child>();
        let fail = |c: &mut Child| -> ! {
            std::ptr::write_volatile(&mut c.errno, last_errno().max(1));
            libc::_exit(127)
        };
        if libc::setpgid(0, 0) != 0 {
            fail(c);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            fail(c);
        }
        if libc::getppid() != c.guard {
            libc::_exit(i32::from(exit_code::LOST)); // the guard died already
        }
        if c.tty >= 0 {
            // Still ignoring SIGTTOU (the guard's setting), so a
            // background group may take the terminal.
            libc::tcsetpgrp(c.tty, libc::getpid());
        }
        for (i, &sig) in IGNORED.iter().enumerate() {
            // SIGPIPE as std leaves it for any child: the default. The
            // Rust runtime ignored it in rlock before main ran; a
            // command must not inherit that (`... | head` would spin).
            if sig == libc::SIGPIPE {
                libc::signal(sig, libc::SIG_DFL);
            } else {
                libc::sigaction(sig, &c.inh.actions[i], std::ptr::null_mut());
            }
        }
        libc::sigaction(libc::SIGCHLD, &c.inh.actions[CHLD], std::ptr::null_mut());
        libc::pthread_sigmask(libc::SIG_SETMASK, &c.inh.mask, std::ptr::null_mut());
        libc::execvpe(c.program, c.argv, c.envp);
        fail(c)
    }
}

/// Install `handler` for `sig`, saving the old action in `old`.
///
/// # Safety
/// Plain syscall; `handler` must be SIG_IGN or SIG_DFL.
unsafe fn set_action(sig: i32, handler: libc::sighandler_t, old: &mut libc::sigaction) {
    // SAFETY: zeroed sigaction is a valid empty action.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    // SAFETY: as the caller promises.
    unsafe { libc::sigaction(sig, &act, old) };
}

/// Set the timer from a 'D' message: absolute CLOCK_BOOTTIME ns, 0 = off.
fn arm(timer: RawFd, msg: &[u8]) {
    let Some(ns) = msg
        .get(1..9)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
    else {
        return;
    };
    let at = Duration::from_nanos(ns);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: at.as_secs() as libc::time_t,
            tv_nsec: at.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: plain syscall; a zero it_value disarms the timer.
    unsafe { libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
}

/// Has the timer fired since it was last armed (and not been read)?
fn expired(timer: RawFd) -> bool {
    let mut ticks = 0u64;
    // SAFETY: reads 8 bytes into a u64; the timer is non-blocking.
    unsafe { libc::read(timer, (&mut ticks as *mut u64).cast(), 8) == 8 }
}

fn drain(sigfd: RawFd) {
    let mut info = [0u8; 128];
    // SAFETY: reads whole signalfd_siginfo records into our buffer.
    while unsafe { libc::read(sigfd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

fn recv(sock: RawFd, buf: &mut [u8]) -> usize {
    loop {
        // SAFETY: plain syscall into our buffer.
        let n = unsafe { libc::recv(sock, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 0 {
            return n as usize;
        }
        if last_errno() != libc::EINTR {
            return 0;
        }
    }
}

fn send(sock: RawFd, msg: &[u8]) {
    // SAFETY: plain syscall; MSG_NOSIGNAL as rlock is maybe gone.
    unsafe { libc::send(sock, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
}

fn report(sock: RawFd, tag: u8, value: i32) {
    let mut msg = [0u8; 5];
    msg[0] = tag;
    msg[1..].copy_from_slice(&value.to_le_bytes());
    send(sock, &msg);
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn exit() -> ! {
    // SAFETY: ends the guard without running the forked copy of rlock's
    // atexit handlers or destructors.
    unsafe { libc::_exit(0) }
}
