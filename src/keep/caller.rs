//! Which process a keeper keeps the lock for (see the module doc of
//! [`super`], "Which process is watched").

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::exec::tree::stat;
use crate::{Error, Result};

/// The process a keeper keeps the lock for.
#[derive(Debug)]
pub struct Watched {
    pub(super) pid: libc::pid_t,
    /// Its start time (/proc stat field 22), to tell it from a later
    /// process with the same pid where there is no pidfd.
    pub(super) start: u64,
    pub(super) pidfd: Option<OwnedFd>,
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
    pub(super) fn gone(&self) -> bool {
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

/// `fd`, moved to 3 or above if it is 0, 1 or 2 (rlock started with a
/// standard descriptor closed): the keeper's stdio is set up over those.
pub(super) fn above_stdio(fd: OwnedFd) -> OwnedFd {
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

#[cfg(test)]
mod tests {
    use super::*;

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
