//! The holder's end of its guard: the fork, the page, the socket.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::Page;
use super::wire::{MAX_RELEASE, ToGuard};
use crate::clock::BootTime;

/// The holder's end: its half of the socket pair and the shared page.
pub(crate) struct End {
    sock: OwnedFd,
    page: Page,
}

/// Fork the guard, which runs `guard` with its half of the socket and the
/// page (its kill deadline `deadline`), and exits. Call while this process
/// has one thread.
pub(crate) fn fork(
    deadline: Option<BootTime>,
    guard: impl FnOnce(OwnedFd, Page),
) -> std::io::Result<(libc::pid_t, End)> {
    let page = Page::new().ok_or_else(std::io::Error::last_os_error)?;
    page.set_deadline(deadline);
    let mut fds = [0; 2];
    // SAFETY: plain syscalls; the child runs `guard`, which never returns
    // into the caller.
    unsafe {
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        let (ours, theirs) = (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]));
        match libc::fork() {
            -1 => Err(std::io::Error::last_os_error()),
            0 => {
                drop(ours);
                guard(theirs, page);
                super::exit()
            }
            pid => Ok((pid, End { sock: ours, page })),
        }
    }
}

impl End {
    /// The socket, to poll (exec reads the guard's reports on it).
    pub(crate) fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Send `msg`, never blocking: MSG_NOSIGNAL, as a dead guard must not
    /// kill the holder with SIGPIPE (a failed send means the guard is gone,
    /// which the reader sees); MSG_DONTWAIT, as a guard that someone
    /// stopped reads nothing, and a few hundred messages (a forwarded
    /// signal each) fill the socket. A blocking send then froze exec's
    /// renewer and supervisor with it: no renewal, no kill, and the lease
    /// ran out under the command. A message dropped on a full socket is
    /// safe: deadlines are on the page (a `D` only wakes the guard), and
    /// every kill that matters is also made by the holder itself. Before
    /// exec's start the socket holds at most a wake-up, the release
    /// settings sent while waiting (at most MAX_RELEASE bytes together:
    /// exec's `take::Told`) and the last ones (see
    /// MAX_RELEASE), so the go is never dropped.
    pub(crate) fn send(&self, msg: &[u8]) {
        // SAFETY: plain syscall on our socket.
        unsafe {
            libc::send(
                self.sock.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
    }

    /// SIGKILL the reach at `at` (None: never), replacing the last one on
    /// the page; one moved earlier wakes the guard to read it now.
    pub(crate) fn deadline(&self, at: Option<BootTime>) {
        let before = self.page.deadline();
        self.page.set_deadline(at);
        if at.is_some_and(|at| before.is_none_or(|b| at < b)) {
            self.send(&ToGuard::Deadline(at.map(BootTime::since_boot)).encode());
        }
    }

    /// Should the holder die, have the guard give its holds back with
    /// `settings` (see `release.rs`) once the reach is gone; replaces the
    /// last. More than [`MAX_RELEASE`] bytes are not sent.
    pub(crate) fn release_if_killed(&self, settings: &[u8]) {
        if settings.len() <= MAX_RELEASE {
            self.send(&ToGuard::Release(settings).encode());
        }
    }

    /// The holder ends cleanly (it releases, or has, on its own): set
    /// before its end closes, so the guard does not take it for dead.
    pub(crate) fn finish(&self) {
        self.page.finish();
    }
}
