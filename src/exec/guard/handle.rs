//! rlock's side: the [`Guard`] handle that forks the guard, sends it
//! deadlines, signals and the go, and reads its reports.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::clock::BootTime;
use crate::{Error, Result};

use super::last_errno;
use super::wire::{MAX_RELEASE, MAX_REPORT, Report, ToGuard, spawn_message};

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
    /// Fork the guard. Call before starting any thread (see [`super`]).
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
            // Taken before the fork: the guard's parent until rlock dies.
            let rlock = libc::getpid();
            match libc::fork() {
                -1 => Err(os_error("cannot fork the guard process")),
                0 => {
                    drop(ours);
                    super::process::guard_main(theirs, launch, rlock)
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
        // most the deadline and the release settings (see MAX_RELEASE), so
        // the spawn request is never dropped.
        unsafe {
            libc::send(
                self.sock.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
    }

    /// Should rlock die, have the guard give the lock back with `settings`
    /// (see `release.rs`) once the tree is gone. Sent before the go; more
    /// than [`MAX_RELEASE`] bytes are not sent.
    pub(crate) fn release_if_killed(&self, settings: &[u8]) {
        if settings.len() <= MAX_RELEASE {
            self.send(&ToGuard::Release(settings).encode());
        }
    }

    /// Start the command with `env` added to rlock's environment.
    pub(crate) fn spawn(&self, env: &[(&str, &str)]) -> Result<()> {
        self.send(&spawn_message(env)?);
        Ok(())
    }

    /// SIGKILL the whole tree at `at` (None: never). Replaces the last one.
    pub(crate) fn deadline(&self, at: Option<BootTime>) {
        self.send(&ToGuard::Deadline(at.map(BootTime::since_boot)).encode());
    }

    /// Send `sig` to every process of the tree now.
    pub(crate) fn signal(&self, sig: i32) {
        self.send(&ToGuard::Signal(sig).encode());
    }

    /// Block until the guard reports something.
    pub(crate) fn recv(&self) -> Report {
        let mut buf = [0u8; MAX_REPORT];
        // SAFETY: plain syscall into our buffer.
        let n = unsafe { libc::recv(self.sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        // ECONNRESET: the guard exited with a message of ours unread (it
        // had nothing left to act on). Linux reports that error once, ahead
        // of the reports still queued for us; they follow on the next call.
        if n < 0 && matches!(last_errno(), libc::EINTR | libc::ECONNRESET) {
            return self.recv();
        }
        // A failed read (n < 0) is the guard gone, as an empty one.
        Report::decode(&buf[..usize::try_from(n).unwrap_or(0)])
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
            let pidfd = crate::fd::pidfd_open(self.pid).ok();
            let pidfd = pidfd.as_ref().map_or(-1, AsRawFd::as_raw_fd);
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
