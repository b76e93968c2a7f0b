//! Receiving signals without changing how the process handles them.
//!
//! [`watch`] blocks a set of signals in the calling thread (threads started
//! afterwards inherit the mask) and reads them from a signalfd on a thread
//! of its own. No signal handler is installed, so when the watch is dropped
//! the calling thread's mask is restored and the process's dispositions are
//! exactly what they were: a library caller's SIGINT still does what it did
//! before. (signal-hook cannot do that: it never uninstalls its handler, so
//! after use a SIGINT would be swallowed instead of ending the process.)
//! Signals that arrive while the watch is being dropped are taken and
//! dropped with it: they were meant for the wait or command that just ended.
//!
//! Every thread of the process must block the set for the signalfd to see
//! process-directed signals; the binary starts its threads only inside a
//! watch.
//!
//! Policy while waiting for a lock ([`cancel_on_signals`]): INT, TERM, HUP
//! and QUIT stop the wait. The signal thread only flags the waiter and
//! pokes its wake-up list in Redis; the waiting thread then leaves the
//! queue itself (and releases the lock if it was granted in the same
//! instant) and reports `Error::Interrupted(sig)`, which the binary turns
//! into exit 128+sig. So a Ctrl-C never leaves a grant or a queue entry
//! behind, and no Redis state is changed from two threads at once.

use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::thread::Scope;

use crate::{Cancel, Error, Result};

/// Signals that end a wait for a lock.
pub const ENDS_WAIT: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Stops watching when dropped, in the thread that started the watch.
pub struct Watch {
    wake: OwnedFd,
    set: libc::sigset_t,
    old: libc::sigset_t,
    // The mask belongs to the thread that made the watch.
    _thread: PhantomData<*const ()>,
}

/// Call `on_signal` on a thread of `scope` for each of `signals` received
/// until the returned [`Watch`] is dropped.
pub fn watch<'s, 'e: 's>(
    scope: &'s Scope<'s, 'e>,
    signals: &[i32],
    mut on_signal: impl FnMut(i32) + Send + 'e,
) -> Result<Watch> {
    let fail = |what: &str| {
        Error::Protocol(format!(
            "cannot {what} for signals: {}",
            std::io::Error::last_os_error()
        ))
    };
    // SAFETY: plain syscalls on values we own.
    let (set, old, sfd, wake) = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        let sfd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        let wake = libc::eventfd(0, libc::EFD_CLOEXEC);
        if sfd < 0 || wake < 0 {
            let err = fail("create descriptors");
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            for fd in [sfd, wake] {
                if fd >= 0 {
                    libc::close(fd);
                }
            }
            return Err(err);
        }
        (
            set,
            old,
            OwnedFd::from_raw_fd(sfd),
            OwnedFd::from_raw_fd(wake),
        )
    };
    let stop = wake
        .try_clone()
        .map_err(|_| fail("duplicate a descriptor"))?;
    scope.spawn(move || {
        let mut fds = [
            libc::pollfd {
                fd: sfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            // SAFETY: a valid array of pollfds.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                continue; // EINTR
            }
            if fds[1].revents != 0 {
                return;
            }
            // SAFETY: signalfd_siginfo is plain data; read fills it.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of_val(&info);
            // SAFETY: reads one record into `info`.
            let n = unsafe {
                libc::read(
                    sfd.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n == size as isize {
                on_signal(info.ssi_signo as i32);
            }
        }
    });
    Ok(Watch {
        wake,
        set,
        old,
        _thread: PhantomData,
    })
}

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: plain syscalls on our own descriptor and this thread's
        // mask.
        unsafe {
            libc::eventfd_write(self.wake.as_raw_fd(), 1);
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            while libc::sigtimedwait(&self.set, std::ptr::null_mut(), &zero) > 0 {}
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// Watch INT/TERM/HUP/QUIT on a thread of `scope` and cancel `cancel` when
/// one arrives. Drop the watch to stop watching.
pub fn cancel_on_signals<'s, 'e: 's>(
    scope: &'s Scope<'s, 'e>,
    cancel: &'e Cancel,
) -> Result<Watch> {
    watch(scope, &ENDS_WAIT, move |sig| cancel.cancel(sig))
}
