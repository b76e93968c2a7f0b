//! Which process a keeper keeps the lock for (see the module doc of
//! [`super`], "Which process is watched").

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::detect::{Found, Live, Procs, descends_from, enclosing_exec, find, usable};
use crate::error::Setting;
use crate::exec::tree::stat;
use crate::{Error, Result, msg};

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
    /// The caller's process: the script that runs this `rlock acquire
    /// --keep`, found from rlock's parent (see the module doc, "Which
    /// process is watched"), or an error (usage) when no process can be
    /// trusted to be it: a lock is never granted that would be gone
    /// before the script's next line, nor one kept for a process that did
    /// not start this rlock.
    pub fn caller() -> Result<Watched> {
        // SAFETY: plain syscall.
        let first = unsafe { libc::getppid() };
        let Some(found) = find(&Live) else {
            return Err(Error::Invalid(msg![
                Setting::KeepCaller,
                ": the calling process is already gone"
            ]));
        };
        usable(&Live, &found)?;
        let Found { pid, piped, .. } = found;
        if piped {
            // `$(rlock acquire k --keep | tail -n1)`, `( rlock acquire k
            // --keep | tee f; ... )`: the parent is a subshell that runs
            // a pipeline and, in the `$(...)`, ends with it: the lock
            // would go with it at once.
            return Err(Error::Invalid(msg![
                Setting::KeepCaller,
                ": rlock's output goes to a pipeline in a subshell, which ends with it; use \
                 tok=$(rlock acquire KEY --keep) without a pipe, or name the process with ",
                Setting::KeepPid,
                " PID"
            ]));
        }
        let w = Watched::open(pid).map_err(|_| {
            Error::Invalid(msg![
                Setting::KeepCaller,
                format!(": the calling process (pid {pid}) is already gone")
            ])
        })?;
        // The pidfd is ours now; make sure it names the process we meant,
        // not one that took its pid after it died: every link from us up
        // to it is still as we found it.
        let mut at = first;
        for _ in 0..16 {
            match stat(at) {
                _ if at == pid => break,
                Some(s) => at = s.ppid,
                None => break,
            }
        }
        // SAFETY: plain syscall.
        if unsafe { libc::getppid() } != first || at != pid {
            return Err(Error::Invalid(msg![
                Setting::KeepCaller,
                ": the calling process exited before the keeper could start"
            ]));
        }
        Ok(w)
    }

    /// Process `pid` (`--keep-while PID`).
    pub fn pid(pid: i32) -> Result<Watched> {
        if pid <= 0 {
            return Err(Error::Invalid(msg![
                Setting::KeepPid,
                format!(" {pid}: not a process id")
            ]));
        }
        let no = |why: &str| {
            Err(Error::Invalid(msg![
                Setting::KeepPid,
                format!(" {pid}: {why}")
            ]))
        };
        if pid == 1 {
            return no("pid 1 (init) never exits, so the lock would be kept for ever");
        }
        if stat(pid).is_none() {
            return no("no such process");
        }
        if pid == std::process::id().cast_signed() || crate::exec::tree::is_keeper(pid) {
            return no("a process of rlock's own");
        }
        if !Live.may_signal(pid) {
            return no(
                "another user's process, which the keeper could not stop on a loss, a break or \
                 --max-hold",
            );
        }
        // Inside `rlock exec`: the exec's command must be what the lock is
        // kept for. A process outside it can outlive the exec, whose end
        // gives back every hold of its token (a kept re-entry of the
        // exec's lock included), and can wait for the exec while the
        // exec's script waits for it.
        if let Some(guard) = enclosing_exec(&Live)
            && !descends_from(&Live, pid, guard)
        {
            return no(
                "inside rlock exec, the process to keep the lock for must be one of the \
                 exec's command's processes",
            );
        }
        Watched::open(pid)
            .map_err(|_| Error::Invalid(msg![Setting::KeepPid, format!(" {pid}: no such process")]))
    }

    fn open(pid: libc::pid_t) -> std::result::Result<Watched, ()> {
        let start = stat(pid).map(|s| s.start).ok_or(())?;
        let e = match crate::fd::pidfd_open(pid) {
            Ok(fd) => {
                let pidfd = Some(above_stdio(fd));
                return Ok(Watched { pid, start, pidfd });
            }
            Err(e) => e,
        };
        match e.raw_os_error() {
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

    /// Its pidfd, or -1 (none: poll ignores it).
    pub(super) fn pidfd_raw(&self) -> RawFd {
        self.pidfd.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// `sig` to the watched process alone (what it started: see
    /// [`super::cover::Cover::stop`]), through its pidfd, which names it
    /// even if it has exited since and its pid was reused. Err: why not
    /// (EPERM for another user's); Ok once it is gone (ESRCH).
    pub(super) fn signal(&self, sig: i32) -> std::io::Result<()> {
        if self.gone() {
            return Ok(());
        }
        let res = match &self.pidfd {
            Some(fd) => crate::fd::pidfd_send_signal(fd, sig),
            // SAFETY: plain syscall; `gone` has just checked the pid's
            // start time (the window is this one call).
            None => match unsafe { libc::kill(self.pid, sig) } {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            },
        };
        match res {
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
            res => res,
        }
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

/// The grant's `rlock acquire`: what the script started after it is what
/// a loss, a break or `--max-hold` stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Grant {
    /// Its start time (CLOCK_BOOTTIME clock ticks, /proc stat field 22).
    pub start: u64,
    /// Its pid; 0 if unknown (then a process started in the same tick
    /// counts as after it).
    pub pid: libc::pid_t,
}

impl Grant {
    /// This process, the `rlock acquire` that makes the grant.
    pub(super) fn ours() -> Grant {
        let pid = std::process::id().cast_signed();
        Grant {
            start: stat(pid).map_or(0, |s| s.start),
            pid,
        }
    }

    /// Did the process `pid`, started at `start` (ticks), start after
    /// rlock, so after the script ran it? Start times count 10 ms ticks:
    /// `sleep 300 & tok=$(rlock acquire k --keep)` starts both in one
    /// tick as often as not. In the same tick, pids tell: the kernel hands
    /// them out in increasing order, wrapping at `pid_max`, and a script's
    /// forks come one after the other; so a pid less than half of
    /// `pid_max` ahead of ours (modulo it) is a later one. (Thousands of
    /// forks fit in a tick, never half of pid_max, at least 32768.)
    pub(super) fn before(&self, start: u64, pid: libc::pid_t, pid_max: libc::pid_t) -> bool {
        if start != self.start || self.pid <= 0 {
            return start > self.start || (start == self.start && self.pid <= 0);
        }
        let ahead = i64::from(pid) - i64::from(self.pid);
        let ahead = ahead.rem_euclid(i64::from(pid_max.max(1)));
        ahead != 0 && ahead < i64::from(pid_max) / 2
    }
}

/// /proc/sys/kernel/pid_max (the kernel's default where it cannot be read).
pub(super) fn pid_max() -> libc::pid_t {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(4_194_304)
}

/// The script running this rlock, as `--keep` would find it; for a plain
/// `acquire`, whose own process exits at once, the holder worth naming in
/// `status` (and the one a later wait of the same script finds to be its
/// own ancestor).
pub fn script_pid() -> u32 {
    find(&Live).map_or(0, |f| u32::try_from(f.pid).unwrap_or(0))
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
    fn started_after_the_grant_by_tick_then_by_pid() {
        let g = Grant {
            start: 500,
            pid: 1000,
        };
        let max = 32768;
        // Another tick decides.
        assert!(g.before(501, 3, max));
        assert!(!g.before(499, 2000, max));
        // In rlock's tick: a later pid is a later fork, ours and earlier
        // ones are not (`sleep 300 &` just before rlock).
        assert!(g.before(500, 1001, max));
        assert!(g.before(500, 1500, max));
        assert!(!g.before(500, 1000, max));
        assert!(!g.before(500, 999, max));
        // Across the wrap: rlock got pid_max - 1, then pids start over.
        let g = Grant {
            start: 500,
            pid: max - 1,
        };
        assert!(g.before(500, 301, max));
        assert!(!g.before(500, max - 5, max));
        // Just after the wrap, a process from before it is not later.
        let g = Grant {
            start: 500,
            pid: 305,
        };
        assert!(!g.before(500, max - 2, max));
        assert!(g.before(500, 306, max));
        // No pid known (a keeper's config without one): by tick alone.
        let g = Grant { start: 500, pid: 0 };
        assert!(g.before(500, 1, max) && g.before(501, 1, max) && !g.before(499, 1, max));
    }

    #[test]
    fn our_parent_is_watchable_and_we_init_and_a_bogus_pid_are_not() {
        // SAFETY: plain syscall.
        let parent = Watched::pid(unsafe { libc::getppid() }).unwrap();
        assert!(!parent.gone());
        // rlock itself exits at once; init never does.
        assert!(Watched::pid(std::process::id() as i32).is_err());
        assert!(Watched::pid(1).is_err());
        assert!(Watched::pid(0).is_err());
        assert!(Watched::pid(-5).is_err());
        // Beyond pid_max.
        assert!(Watched::pid(i32::MAX).is_err());
    }
}
