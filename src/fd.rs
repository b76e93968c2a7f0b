//! Descriptor chores that the exec guard and the keeper share.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Point stdin, stdout and stderr at /dev/null: a process that has cut
/// itself off from its caller (exec's guard, the keeper) holds no end of
/// the caller's pipes or terminal, and a stray write still succeeds. If
/// /dev/null cannot be opened, stdio is left as it is.
///
/// Not close-on-exec: these are the process's standard descriptors, for
/// whatever it runs next too.
///
/// # Safety
/// Only in a process that owns descriptors 0-2 (the guard, the keeper once
/// detached): nothing else may be using what they were.
pub(crate) unsafe fn stdio_to_null() {
    // SAFETY: plain syscalls; the caller owns descriptors 0-2.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
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

/// A pidfd for `pid` (close-on-exec): it names that process even after it
/// has exited and its pid was reused, and is readable the moment it
/// exits. ESRCH: no such process; ENOSYS (Linux < 5.3) or EPERM (a seccomp
/// filter): no pidfds here.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; the kernel returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // A descriptor fits a RawFd; -1 (failure) too.
    match RawFd::try_from(fd).unwrap_or(-1) {
        -1 => Err(std::io::Error::last_os_error()),
        // SAFETY: a fresh descriptor we own.
        fd => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
    }
}

/// `sig` to the process `pidfd` names, whatever its pid is now (Err: why
/// not, EPERM for another user's, ESRCH once it has exited).
pub(crate) fn pidfd_send_signal(pidfd: &OwnedFd, sig: i32) -> std::io::Result<()> {
    // SAFETY: plain syscall on a pidfd we own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
