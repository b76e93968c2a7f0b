//! Interactive use: the command owns the terminal, and job control works.
//!
//! When rlock runs in the foreground of its controlling terminal, the command's
//! process group (a new one, as in non-interactive use) is made the
//! terminal's foreground group, the way a shell starts a job. Ctrl-C and
//! Ctrl-Z then reach the command's group only. When the command stops
//! (Ctrl-Z), rlock takes the terminal back and stops its own job with the
//! same signal, so the shell sees the job stopped; on `fg` or `bg` rlock
//! hands the terminal back (fg only) and continues the command — unless the
//! lease ran out meanwhile: a stopped job renews nothing, and the guard
//! kills the command at the kill deadline as for any lost lock. When the
//! command exits, rlock takes the terminal back at once, as a shell does:
//! leftovers it holds the lock for run on in the background.
//!
//! Not in the foreground (a background job `rlock exec ... &`, also in a
//! script: see `started_in_background`; stdin redirected at a prompt is
//! fine): the command runs in the background
//! too, and if it touches the terminal (SIGTTIN/SIGTTOU) rlock stops its
//! own job the same way, so the shell shows it stopped and `fg` resumes it,
//! as it would without rlock. If rlock's job is in the foreground by then
//! (`fg` of a running job sends no SIGCONT, so rlock cannot know sooner),
//! the command is given the terminal instead.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// rlock's controlling terminal, if it has one (whatever stdin is: `echo |
/// rlock exec ...` typed at a prompt is interactive too).
pub(crate) struct Terminal(OwnedFd);

impl Terminal {
    pub(crate) fn open() -> Option<Terminal> {
        // SAFETY: plain syscall; the fd is ours, close-on-exec.
        let fd = unsafe {
            libc::open(
                c"/dev/tty".as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOCTTY,
            )
        };
        // SAFETY: a fresh fd we own.
        (fd >= 0).then(|| Terminal(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Is rlock's process group the terminal's foreground group?
    pub(crate) fn ours(&self) -> bool {
        // SAFETY: plain syscalls.
        unsafe { libc::tcgetpgrp(self.fd()) == libc::getpgrp() }
    }

    /// Make `pgid` the terminal's foreground group, from whichever group we
    /// are in (SIGTTOU blocked for this thread meanwhile, as shells do).
    pub(crate) fn give(&self, pgid: libc::pid_t) {
        // SAFETY: plain syscalls on this thread's mask and our tty fd.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTTOU);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            libc::tcsetpgrp(self.fd(), pgid);
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }

    /// Take the terminal back if the command's group has it.
    pub(crate) fn take_back(&self, pgid: libc::pid_t) {
        // SAFETY: plain syscalls.
        unsafe {
            if libc::tcgetpgrp(self.fd()) == pgid {
                self.give(libc::getpgrp());
            }
        }
    }
}

/// Was rlock started as a background job of a shell without job control
/// (`rlock exec ... &` in a script)? Such a shell leaves it in the script's
/// process group, which may own the terminal, and starts it with SIGINT and
/// SIGQUIT ignored. Handing the terminal to the command then took it from
/// the script, which stopped (SIGTTIN) at its next read of the terminal.
pub(crate) fn started_in_background() -> bool {
    crate::signals::ignored(libc::SIGINT) && crate::signals::ignored(libc::SIGQUIT)
}

impl Terminal {
    /// Take the terminal back if its foreground group is empty: the
    /// command gave it to a group of its own (an interactive shell's job)
    /// and that group died with the tree. Left there, the terminal had no
    /// live foreground group, and the script that ran rlock got SIGTTIN
    /// (or EIO) at its next read. Call once the tree is gone, and only if
    /// rlock's job had the terminal (interactive): a group that is empty
    /// is nobody's, but a shell that has since taken the terminal back is
    /// not to be robbed of it, and `kill(-fg, 0)` tells the two apart.
    pub(crate) fn take_back_from_the_dead(&self) {
        // SAFETY: plain syscalls.
        unsafe {
            let fg = libc::tcgetpgrp(self.fd());
            if fg > 0
                && fg != libc::getpgrp()
                && libc::kill(-fg, 0) != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            {
                self.give(libc::getpgrp());
            }
        }
    }
}

/// The command (group `pgid`) was stopped by `sig`: stop rlock's job
/// likewise, and when it is continued, hand the command the terminal if
/// rlock's job has it (`fg`) and `still_valid()`. Returns whether the
/// caller should continue the command.
pub(crate) fn suspend(
    term: Option<&Terminal>,
    pgid: libc::pid_t,
    sig: i32,
    still_valid: impl Fn() -> bool,
) -> bool {
    if let Some(t) = term {
        // SAFETY: plain syscall.
        let fg = unsafe { libc::tcgetpgrp(t.fd()) };
        if matches!(sig, libc::SIGTTIN | libc::SIGTTOU) && (t.ours() || fg == pgid) {
            // rlock's job is in the foreground (`fg` after `bg`, or after
            // `rlock exec ... &`; the shell sends no SIGCONT to a running
            // job, so this is the first rlock hears of it): the command
            // touched the terminal from the background. Hand it the
            // terminal, as `fg` would have, instead of stopping the job
            // just brought to the foreground. Or the command has the
            // terminal already: it touched it a moment before it got it
            // back (an enclosing exec continued it first, on `fg`).
            t.give(pgid);
            return true;
        }
        t.take_back(pgid);
    }
    let stop = if sig == libc::SIGSTOP {
        libc::SIGSTOP
    } else {
        libc::SIGTSTP
    };
    let before = std::time::Instant::now();
    // SAFETY: plain syscall. Stopping our own group stops this process
    // (every thread) until the shell sends SIGCONT, so kill returns then.
    unsafe { libc::kill(0, stop) };
    if !still_valid() {
        return false; // the guard kills it at the deadline
    }
    if before.elapsed() < std::time::Duration::from_millis(10) {
        // The stop did not take (an orphaned group, SIGTSTP ignored):
        // nobody will continue us, so go on, but not in a tight loop with
        // a command that stops again at once.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if let Some(t) = term.filter(|t| t.ours()) {
        t.give(pgid); // `fg`; after `bg` the terminal stays with the shell
    }
    true
}

/// After an interactive command died of Ctrl-C or Ctrl-\, end rlock's own
/// job the same way, as the terminal would have had rlock not handed it
/// the terminal: a shell script that ran `rlock exec` then stops too,
/// instead of going on with its next line. `signal` is the signal that
/// killed the command, if one did (an `exit 130` is not Ctrl-C). Call with
/// rlock's signal dispositions as they were at start (the binary: at the
/// very end).
pub fn reraise_in_job(signal: Option<i32>) {
    if let Some(sig @ (libc::SIGINT | libc::SIGQUIT)) = signal {
        // SAFETY: plain syscall.
        unsafe { libc::kill(0, sig) };
    }
}
