//! Receiving signals without changing how the process handles them.
//!
//! [`Blocked`] blocks a set of signals in the calling thread (threads
//! started afterwards inherit the mask) and makes them readable from a
//! signalfd, which its owner polls among its other descriptors, or reads on
//! a thread started only while it has to block elsewhere
//! ([`Blocked::watch`]); [`watch`] does both at once. No signal handler is
//! installed, so when the watch is dropped
//! the calling thread's mask is restored and the process's dispositions are
//! exactly what they were: a library caller's SIGINT still does what it did
//! before. (signal-hook cannot do that: it never uninstalls its handler, so
//! after use a SIGINT would be swallowed instead of ending the process.)
//! Signals that arrive while the watch is being dropped are taken and
//! dropped with it: they were meant for the wait or command that just ended.
//!
//! A signal ignored (SIG_IGN) when the set is blocked is left out of it:
//! a blocked signal is queued even when ignored, so taking it would undo
//! what `nohup`, or a shell starting a background job (`cmd &` in a script
//! ignores INT and QUIT), asked for. Such a signal neither ends a wait nor
//! is passed on; the command inherits the SIG_IGN, as under flock(1).
//!
//! Every thread of the process must block the set for the signalfd to see
//! process-directed signals; the binary starts its threads while the set
//! is blocked (inside a watch, or under exec's [`Blocked`]), and they
//! inherit the mask.
//!
//! Policy while waiting for a lock ([`cancel_on_signals`]): INT, TERM, HUP
//! and QUIT stop the wait. The signal thread only flags the waiter and
//! pokes its wake-up list in Redis; the waiting thread then leaves the
//! queue itself (and releases the lock if it was granted in the same
//! instant) and reports `Error::Interrupted(sig)`, which the binary turns
//! into exit 128+sig. So a Ctrl-C never leaves a grant or a queue entry
//! behind, and no Redis state is changed from two threads at once.

use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::thread::Scope;
use std::time::Duration;

use crate::{Cancel, Error, Result};

/// Signals that end a wait for a lock.
pub const ENDS_WAIT: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// A set of signals blocked in the calling thread (and in the threads it
/// starts afterwards) and readable, without a thread, from a non-blocking
/// signalfd: [`Blocked::take`], or poll [`Blocked::fd`]. When dropped, in
/// the thread that made it, signals still pending are taken and dropped and
/// the thread's mask is restored.
pub struct Blocked {
    fd: OwnedFd,
    set: libc::sigset_t,
    old: libc::sigset_t,
    // The mask belongs to the thread that blocked the set.
    _thread: PhantomData<*const ()>,
}

fn fail(what: &str) -> Error {
    Error::Protocol(format!(
        "cannot {what} for signals: {}",
        std::io::Error::last_os_error()
    ))
}

impl Blocked {
    /// Block `signals` in this thread and open a signalfd for them, all
    /// but those the process ignores (see the module doc).
    pub fn new(signals: &[i32]) -> Result<Blocked> {
        // SAFETY: plain syscalls on values we own.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals.iter().filter(|&&s| !ignored(s)) {
                libc::sigaddset(&mut set, s);
            }
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            let sfd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if sfd < 0 {
                let err = fail("create a descriptor");
                libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                return Err(err);
            }
            Ok(Blocked {
                fd: OwnedFd::from_raw_fd(sfd),
                set,
                old,
                _thread: PhantomData,
            })
        }
    }

    /// The signalfd, to poll for POLLIN.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The next pending signal of the set, if any (never blocks).
    pub fn take(&self) -> Option<i32> {
        read_one(self.fd.as_raw_fd())
    }

    /// Call `on_signal` on a thread of `scope` for each signal of the set
    /// received until the returned [`Watcher`] is dropped.
    pub fn watch<'s, 'e: 's>(
        &self,
        scope: &'s Scope<'s, 'e>,
        mut on_signal: impl FnMut(i32) + Send + 'e,
    ) -> Result<Watcher> {
        // The thread owns copies of the descriptors: it may outlive this
        // borrow by a moment (a scope joins at its end).
        let sfd = self
            .fd
            .try_clone()
            .map_err(|_| fail("duplicate a descriptor"))?;
        // SAFETY: plain syscall.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if wake < 0 {
            return Err(fail("create a descriptor"));
        }
        // SAFETY: a fresh fd we own.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        let stop = wake
            .try_clone()
            .map_err(|_| fail("duplicate a descriptor"))?;
        scope.spawn(move || {
            let mut fds = [pollin(sfd.as_raw_fd()), pollin(stop.as_raw_fd())];
            loop {
                // SAFETY: a valid array of pollfds.
                if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                    continue; // EINTR
                }
                if fds[1].revents != 0 {
                    return;
                }
                while let Some(sig) = read_one(sfd.as_raw_fd()) {
                    on_signal(sig);
                }
            }
        });
        Ok(Watcher { wake })
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: plain syscalls on this thread's mask.
        unsafe {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            while libc::sigtimedwait(&self.set, std::ptr::null_mut(), &zero) > 0 {}
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// Stops a [`Blocked::watch`] thread when dropped.
pub struct Watcher {
    wake: OwnedFd,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // SAFETY: plain syscall on our own descriptor.
        unsafe { libc::eventfd_write(self.wake.as_raw_fd(), 1) };
    }
}

/// Whether this process ignores `sig` (SIG_IGN).
pub(crate) fn ignored(sig: i32) -> bool {
    // SAFETY: plain syscall; a null new action only reads the old one.
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut now) == 0 && now.sa_sigaction == libc::SIG_IGN
    }
}

/// poll(2) on `fds` for at most `timeout` (rounded up to 1ms, so that a
/// deadline less than 1ms away does not spin).
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> i32 {
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
    // SAFETY: a valid array of pollfds.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) }
}

/// A pollfd waiting for `fd` to be readable.
pub(crate) fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// One signal from a non-blocking signalfd, if one is pending.
fn read_one(fd: RawFd) -> Option<i32> {
    // SAFETY: signalfd_siginfo is plain data; read fills it.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of_val(&info);
    loop {
        // SAFETY: reads one record into `info`.
        let n = unsafe { libc::read(fd, (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
        if n == size as isize {
            return Some(info.ssi_signo as i32);
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

/// Stops watching when dropped, in the thread that started the watch.
pub struct Watch {
    // Dropped in this order: the thread is told to stop, then the pending
    // signals are dropped and the mask restored.
    _watcher: Watcher,
    _blocked: Blocked,
}

/// Call `on_signal` on a thread of `scope` for each of `signals` received
/// until the returned [`Watch`] is dropped.
pub fn watch<'s, 'e: 's>(
    scope: &'s Scope<'s, 'e>,
    signals: &[i32],
    on_signal: impl FnMut(i32) + Send + 'e,
) -> Result<Watch> {
    let blocked = Blocked::new(signals)?;
    let watcher = blocked.watch(scope, on_signal)?;
    Ok(Watch {
        _watcher: watcher,
        _blocked: blocked,
    })
}

/// Watch INT/TERM/HUP/QUIT on a thread of `scope` and cancel `cancel` when
/// one arrives. Drop the watch to stop watching.
pub fn cancel_on_signals<'s, 'e: 's>(
    scope: &'s Scope<'s, 'e>,
    cancel: &'e Cancel,
) -> Result<Watch> {
    watch(scope, &ENDS_WAIT, move |sig| cancel.cancel(sig))
}
