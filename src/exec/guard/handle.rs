//! rlock's side: the [`Guard`] handle that forks the guard, sets its kill
//! deadline on the page they share, sends it signals and the go, and reads
//! its reports.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use crate::clock::BootTime;
use crate::{Error, Result};

use super::last_errno;
use crate::hold::guard::End;
use crate::hold::guard::wire::{MAX_REPORT, Report, ToGuard, spawn_message};

/// rlock's handle on its guard.
pub(crate) struct Guard {
    pid: libc::pid_t,
    end: End,
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
        let (pid, end) = crate::hold::guard::fork(None, |sock, page| {
            super::reach::guard_main(sock, launch, page)
        })
        .map_err(|e| Error::Protocol(format!("cannot fork the guard process: {e}")))?;
        Ok(Guard { pid, end })
    }

    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// The socket, to poll: readable when a report (or the guard's end)
    /// is there for [`Guard::recv`].
    pub(crate) fn fd(&self) -> RawFd {
        self.end.fd()
    }

    /// Should rlock die, have the guard give the lock back with `settings`
    /// (see `hold::guard::release`) once the tree is gone, or at once
    /// before the go. Sent once a wait begins, and before the go; each
    /// replaces the last (empty: none).
    pub(crate) fn release_if_killed(&self, settings: &[u8]) {
        self.end.release_if_killed(settings);
    }

    /// Start the command with `env` added to rlock's environment.
    pub(crate) fn spawn(&self, env: &[(&str, &str)]) -> Result<()> {
        self.end.send(&spawn_message(env)?);
        Ok(())
    }

    /// SIGKILL the whole tree at `at` (None: never). Replaces the last one.
    pub(crate) fn deadline(&self, at: Option<BootTime>) {
        self.end.deadline(at);
    }

    /// Send `sig` to every process of the tree now.
    pub(crate) fn signal(&self, sig: i32) {
        self.end.send(&ToGuard::Signal(sig).encode());
    }

    /// Block until the guard reports something.
    pub(crate) fn recv(&self) -> Report {
        let mut buf = [0u8; MAX_REPORT];
        // SAFETY: plain syscall into our buffer.
        let n = unsafe { libc::recv(self.end.fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
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
    /// Closing our end after the page's "finished" tells the guard that
    /// rlock is done (not dead: it released on its own): if anything is
    /// left in the tree it is killed; then the guard exits and is reaped
    /// here, so no zombie stays behind. (A guard that reported the empty
    /// tree waits for this close, so that rlock killed before its release
    /// is released for: the usual case waits here for its exit.)
    fn drop(&mut self) {
        self.end.finish();
        // SAFETY: plain syscalls on our own socket and child.
        unsafe {
            libc::shutdown(self.end.fd(), libc::SHUT_RDWR);
            // It exits within milliseconds (a tree to kill takes at most a
            // second); one that someone stopped is not waited for forever.
            // A pidfd says the moment it exits; without one (Linux < 5.3),
            // look every millisecond.
            if libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) != 0 {
                return; // it had exited already (a dead guard, a kill)
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
