//! Interactive use: the command owns the terminal, and job control works.
//!
//! When rlock runs in the foreground of a terminal on stdin, the command's
//! process group (a new one, as in non-interactive use) is made the
//! terminal's foreground group, the way a shell starts a job. Ctrl-C and
//! Ctrl-Z then reach the command's group only. When the command stops
//! (Ctrl-Z), rlock takes the terminal back and stops its own job with the
//! same signal, so the shell sees the job stopped; on `fg` or `bg` rlock
//! hands the terminal back (fg only) and continues the command — unless the
//! lease ran out meanwhile: a stopped job renews nothing, and the guard
//! kills the command at the kill deadline as for any lost lock.

/// Is rlock in the foreground of a terminal on stdin?
pub fn interactive() -> bool {
    // SAFETY: plain syscalls on fd 0.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Make `pgid` the terminal's foreground group, from whichever group we
/// are in (SIGTTOU blocked for this thread meanwhile, as shells do).
fn set_foreground(pgid: libc::pid_t) {
    // SAFETY: plain syscalls on this thread's mask and fd 0.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        libc::tcsetpgrp(0, pgid);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Give the terminal to the command's group (it also takes it itself
/// before exec, so either order of the two is fine).
pub(crate) fn give(pgid: libc::pid_t) {
    set_foreground(pgid);
}

/// Take the terminal back if the command's group has it.
pub(crate) fn take_back(pgid: libc::pid_t) {
    // SAFETY: plain syscalls.
    unsafe {
        if libc::tcgetpgrp(0) == pgid {
            set_foreground(libc::getpgrp());
        }
    }
}

/// The command was stopped by `sig`: stop rlock's job likewise, and when
/// it is continued, continue the command if `still_valid()`.
pub(crate) fn suspend(pgid: libc::pid_t, sig: i32, still_valid: impl Fn() -> bool) {
    take_back(pgid);
    // SAFETY: plain syscalls. Stopping our own group stops this process
    // (every thread) until the shell sends SIGCONT, so kill returns then.
    unsafe {
        let stop = if sig == libc::SIGSTOP {
            libc::SIGSTOP
        } else {
            libc::SIGTSTP
        };
        libc::kill(0, stop);
        if !still_valid() {
            return; // the guard kills it at the deadline
        }
        if libc::tcgetpgrp(0) == libc::getpgrp() {
            give(pgid); // `fg`; after `bg` the terminal stays with the shell
        }
        libc::killpg(pgid, libc::SIGCONT);
    }
}

/// After an interactive command died of Ctrl-C or Ctrl-\, end rlock's own
/// job the same way, as the terminal would have had rlock not handed it
/// the terminal: a shell script that ran `rlock exec` then stops too,
/// instead of going on with its next line. Call with rlock's signal
/// dispositions as they were at start (the binary: at the very end).
pub fn reraise_in_job(code: u8) {
    let sig = i32::from(code) - 128;
    if sig == libc::SIGINT || sig == libc::SIGQUIT {
        // SAFETY: plain syscall.
        unsafe { libc::kill(0, sig) };
    }
}
