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
    /// The caller's process: the script that runs this `rlock acquire
    /// --keep`, found from rlock's parent (see the module doc, "Which
    /// process is watched"), or an error (usage) when no process can be
    /// trusted to be it: a lock is never granted that would be gone
    /// before the script's next line, nor one kept for a process that did
    /// not start this rlock.
    pub fn caller() -> Result<Watched> {
        let Found {
            first,
            child,
            parent,
            pid,
            piped,
        } = find();
        usable(parent, child)?;
        if piped {
            // `$(rlock acquire k --keep | tail -n1)`, `( rlock acquire k
            // --keep | tee f; ... )`: the parent is a subshell that runs
            // a pipeline and, in the `$(...)`, ends with it: the lock
            // would go with it at once.
            return Err(Error::Usage(
                "--keep: rlock's output goes to a pipeline in a subshell, which ends \
                 with it; use tok=$(rlock acquire KEY --keep) without a pipe, or \
                 --keep-while PID"
                    .into(),
            ));
        }
        let w = Watched::open(pid).map_err(|_| {
            Error::Usage(format!(
                "--keep: the calling process (pid {pid}) is already gone"
            ))
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
        let no = |why: &str| Err(Error::Usage(format!("--keep-while {pid}: {why}")));
        if pid == 1 {
            return no("pid 1 (init) never exits, so the lock would be kept for ever");
        }
        if stat(pid).is_none() {
            return no("no such process");
        }
        if pid == std::process::id().cast_signed() || crate::exec::tree::is_keeper(pid) {
            return no("a process of rlock's own");
        }
        // Inside `rlock exec`: the exec's command must be what the lock is
        // kept for. A process outside it can outlive the exec, whose end
        // gives back every hold of its token (a kept re-entry of the
        // exec's lock included), and can wait for the exec while the
        // exec's script waits for it.
        if let Some(guard) = enclosing_exec()
            && !descends_from(pid, guard)
        {
            return no(
                "inside rlock exec, the process to keep the lock for must be one of the \
                 exec's command's processes",
            );
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

    /// Its pidfd, or -1 (none: poll ignores it).
    pub(super) fn pidfd_raw(&self) -> RawFd {
        self.pidfd.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// `sig` to the watched process and every live process below it that
    /// started at or after `since` (CLOCK_BOOTTIME ticks, /proc stat field
    /// 22: the grant's `rlock acquire` started then), but rlock's own
    /// keepers; nothing once it is gone. The process itself goes through
    /// its pidfd, which names it even if it has exited since and its pid
    /// was reused. So only what the script started while it held the lock
    /// is ever signalled: never a process it did not start, even if /proc
    /// showed another tree under its pid, and never init's whole tree.
    /// Its descendants are collected first, so that none escapes by being
    /// re-parented when it dies.
    pub(super) fn signal_tree(&self, sig: i32, since: u64) {
        if self.gone() {
            return;
        }
        let me = std::process::id().cast_signed();
        let below: Vec<libc::pid_t> = crate::exec::tree::descendants(self.pid)
            .into_iter()
            .filter(|&p| p != me && stat(p).is_some_and(|s| s.start >= since))
            .collect();
        match &self.pidfd {
            // SAFETY: plain syscall on our pidfd.
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    sig,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            },
            // SAFETY: plain syscall; `gone` has just checked the pid's
            // start time (the window is this one call).
            None => unsafe {
                libc::kill(self.pid, sig);
            },
        }
        for pid in below {
            // SAFETY: plain syscall; a pid from the snapshot just taken
            // (see exec's tree.rs on pid reuse).
            unsafe { libc::kill(pid, sig) };
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

/// What [`find`] found.
struct Found {
    /// rlock's parent, as it started.
    first: libc::pid_t,
    /// This rlock, or the outermost wrapper around it.
    child: libc::pid_t,
    /// The process that started `child`.
    parent: libc::pid_t,
    /// The script: `parent`, or the script whose `$(...)` subshell it is.
    pid: libc::pid_t,
    /// `parent` is a subshell that pipes our output to another stage.
    piped: bool,
}

/// Find the script that runs this rlock (see the module doc, "Which
/// process is watched"), without judging it.
fn find() -> Found {
    let me = std::process::id().cast_signed();
    let ours = cmdline(me).unwrap_or_default();
    // SAFETY: plain syscall.
    let first = unsafe { libc::getppid() };
    // `timeout 60 rlock ...`, `nice rlock ...`, `sudo rlock ...`: a
    // wrapper runs our command line as the tail of its own, and exits
    // when we do. Look through it (and a chain of them).
    let (mut child, mut parent) = (me, first);
    for _ in 0..8 {
        match stat(parent) {
            // (exec's guard, a fork of `rlock exec ... -- rlock acquire
            // ...`, has our command line as its tail too: `usable` refuses
            // it.)
            Some(s) if !is_guard(parent) && wraps(parent, &ours) => {
                (child, parent) = (parent, s.ppid);
            }
            _ => break,
        }
    }
    let grand = stat(parent).map(|s| s.ppid);
    let subshell = grand.filter(|&g| g > 1 && forked_copy(parent, g));
    let (pid, piped) = match subshell {
        Some(g) if reads_our_output(g) => (g, false),
        Some(_) => (parent, piped_to_sibling(parent, child)),
        None => (parent, false),
    };
    Found {
        first,
        child,
        parent,
        pid,
        piped,
    }
}

/// The script running this rlock, as `--keep` would find it; for a plain
/// `acquire`, whose own process exits at once, the holder worth naming in
/// `status` (and the one a later wait of the same script finds to be its
/// own ancestor).
pub fn script_pid() -> u32 {
    u32::try_from(find().pid).unwrap_or(0)
}

/// `pid`'s command line, NUL-separated as /proc has it.
fn cmdline(pid: libc::pid_t) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/cmdline")).ok()
}

/// Is `pid` a wrapper that runs a command line ending in `ours` (`timeout
/// 60 rlock acquire k --keep`, `nice -n 5 ...`, `sudo ...`)? Its command
/// line is longer and ends with ours, argument for argument.
fn wraps(pid: libc::pid_t, ours: &[u8]) -> bool {
    let Some(theirs) = cmdline(pid) else {
        return false;
    };
    !ours.is_empty()
        && theirs.len() > ours.len()
        && theirs.ends_with(ours)
        && theirs[theirs.len() - ours.len() - 1] == 0
}

/// Can `parent` (which started `child`, this rlock or the outermost
/// wrapper around it) be the caller? Refused (usage): init and a process
/// of another session (`child`'s parent exited and it was re-parented to
/// init or a subreaper: `( rlock acquire k --keep & )`; a lock kept for
/// init would be kept for ever, and a loss would signal every process
/// init started), and `rlock exec`'s guard (rlock acquire as the exec's
/// own command: no script).
fn usable(parent: libc::pid_t, child: libc::pid_t) -> Result<()> {
    let no = |why: String| {
        Err(Error::Usage(format!(
            "--keep: {why}; or use --keep-while PID"
        )))
    };
    if is_guard(parent) {
        return no(
            "as rlock exec's own command (or orphaned inside it) there is no script to keep \
             the lock for; use it inside the script"
                .into(),
        );
    }
    let (Some(p), Some(c)) = (stat(parent), stat(child)) else {
        return no(format!(
            "the calling process (pid {parent}) is already gone"
        ));
    };
    // A session leader of its own (`setsid rlock ...`) starts a session:
    // its parent is in another one.
    if parent <= 1 || (p.sid != c.sid && c.sid != child) {
        return no(format!(
            "the process that started rlock has already exited (rlock was re-parented to \
             pid {parent}), so nothing can tell when the script ends"
        ));
    }
    Ok(())
}

/// Does a child of `parent` other than `child` read `child`'s stdout (our
/// stdout: a wrapper passes it on): is `child` a stage of a pipeline?
fn piped_to_sibling(parent: libc::pid_t, child: libc::pid_t) -> bool {
    let Ok(ours) = std::fs::read_link("/proc/self/fd/1") else {
        return false;
    };
    if !ours.to_string_lossy().starts_with("pipe:") {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|&p| p != child && p != std::process::id().cast_signed())
        .filter(|&p| stat(p).is_some_and(|s| s.ppid == parent))
        .any(|p| reads_pipe(p, &ours))
}

/// Does `pid` hold the pipe `pipe` (a /proc fd link) open for reading?
/// Both ends of a pipe read as the same "pipe:[inode]".
fn reads_pipe(pid: libc::pid_t, pipe: &std::path::Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|l| l == pipe)
            && !write_only(pid, &fd.file_name().to_string_lossy())
    })
}

/// The guard of the nearest `rlock exec` this process runs under, if any.
fn enclosing_exec() -> Option<libc::pid_t> {
    let mut at = std::process::id().cast_signed();
    for _ in 0..64 {
        at = stat(at)?.ppid;
        if at <= 1 {
            return None;
        }
        if is_guard(at) {
            return Some(at);
        }
    }
    None
}

/// Is `pid` the guard of an `rlock exec` (see exec's guard.rs)?
fn is_guard(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| c.trim_end() == "rlock-guard")
}

/// Is `ancestor` among `pid`'s ancestors?
fn descends_from(pid: libc::pid_t, ancestor: libc::pid_t) -> bool {
    let mut at = pid;
    for _ in 0..64 {
        match stat(at).map(|s| s.ppid) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => at = p,
            _ => return false,
        }
    }
    false
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
    if std::fs::read_dir(format!("/proc/{pid}/fd")).is_err() {
        return true;
    }
    // Its read end: a script whose own stdout is a pipe (`script |
    // logger`, a CI runner) holds the write end of the one a `( ... )`
    // subshell's rlock inherited and prints to; that subshell is still
    // the caller.
    reads_pipe(pid, &ours)
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
