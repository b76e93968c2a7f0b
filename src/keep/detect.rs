//! Which process is the script: the decisions of caller detection (see the
//! module doc of [`super`], "Which process is watched"), over what /proc
//! shows ([`Procs`]: [`Live`] reads /proc; the unit tests below give a
//! table of synthetic processes, so every rule is checked without
//! spawning shells).

use std::path::{Path, PathBuf};

use crate::error::{Message, Setting};
use crate::{Error, Result, msg};

type Pid = libc::pid_t;

/// What caller detection reads of a process.
#[derive(Clone, Debug, Default)]
pub(super) struct Info {
    pub ppid: Pid,
    /// Process group id.
    pub pgid: Pid,
    /// Session id.
    pub sid: Pid,
    /// startstack and arg_start (/proc stat fields 28, 48); zero where
    /// /proc hides them.
    pub layout: (u64, u64),
}

/// The processes as caller detection sees them.
pub(super) trait Procs {
    /// This rlock's pid.
    fn me(&self) -> Pid;
    fn info(&self, pid: Pid) -> Option<Info>;
    /// NUL-separated, as /proc/PID/cmdline.
    fn cmdline(&self, pid: Pid) -> Option<Vec<u8>>;
    fn exe(&self, pid: Pid) -> Option<PathBuf>;
    fn comm(&self, pid: Pid) -> Option<String>;
    /// The pipe our stdout is ("pipe:[N]"), if it is one.
    fn our_stdout_pipe(&self) -> Option<PathBuf>;
    /// Does `pid` hold `pipe` open for reading? None: its descriptors
    /// cannot be read.
    fn reads(&self, pid: Pid, pipe: &Path) -> Option<bool>;
    /// The children of `pid`.
    fn children(&self, pid: Pid) -> Vec<Pid>;
    /// Its real and effective uid (/proc/PID/status).
    fn uids(&self, pid: Pid) -> Option<(u32, u32)>;
    /// Our effective uid.
    fn our_uid(&self) -> u32;
    /// May we signal it (`kill(pid, 0)` is not refused with EPERM)?
    fn may_signal(&self, pid: Pid) -> bool;
}

/// What [`find`] found.
pub(super) struct Found {
    /// This rlock, or the outermost wrapper around it.
    pub child: Pid,
    /// The process that started `child`.
    pub parent: Pid,
    /// The script: `parent`, or the script whose `$(...)` subshell it is.
    pub pid: Pid,
    /// `parent` is a subshell that pipes our output to another stage.
    pub piped: bool,
    /// `pid` is a `( ... )` subshell (a forked copy of its parent).
    pub subshell: bool,
}

/// Find the script that runs this rlock, without judging it.
pub(super) fn find(p: &impl Procs) -> Option<Found> {
    let me = p.me();
    let ours = p.cmdline(me).unwrap_or_default();
    // `timeout 60 rlock ...`, `nice rlock ...`, `sudo rlock ...`: a
    // wrapper runs our command line as the tail of its own, and exits
    // when we do. Look through it (and a chain of them).
    let (mut child, mut parent) = (me, p.info(me)?.ppid);
    for _ in 0..8 {
        match p.info(parent) {
            // (exec's guard, a fork of `rlock exec ... -- rlock acquire
            // ...`, has our command line as its tail too if it could not
            // rename itself: `usable` refuses it.)
            Some(s) if !is_guard(p, parent) && wraps(p, parent, &ours) => {
                (child, parent) = (parent, s.ppid);
            }
            _ => break,
        }
    }
    let grand = p.info(parent).map(|s| s.ppid);
    let subshell = grand.filter(|&g| g > 1 && forked_copy(p, parent, g));
    let (pid, piped) = match subshell {
        Some(g) if reads_our_output(p, g) => (g, false),
        Some(_) => (parent, piped_to_sibling(p, parent, child)),
        None => (parent, false),
    };
    Some(Found {
        child,
        parent,
        pid,
        piped,
        subshell: subshell.is_some() && pid == parent,
    })
}

/// Is `pid` a wrapper that runs a command line ending in `ours` (`timeout
/// 60 rlock acquire k --keep`, `nice -n 5 ...`, `sudo ...`)? Its command
/// line is longer and ends with ours, argument for argument.
fn wraps(p: &impl Procs, pid: Pid, ours: &[u8]) -> bool {
    let Some(theirs) = p.cmdline(pid) else {
        return false;
    };
    !ours.is_empty()
        && theirs.len() > ours.len()
        && theirs.ends_with(ours)
        && theirs[theirs.len() - ours.len() - 1] == 0
}

/// Where `--keep` is refused, what to do instead: flock(1)'s idiom for
/// locking a whole script, with `rlock exec`'s guarantees.
fn idiom() -> Message {
    msg![
        "to hold the lock for the whole script, start it with [ -n \"$RLOCK_HELD\" ] || exec \
         rlock exec KEY -- \"$0\" \"$@\" (or name the process with ",
        Setting::KeepPid,
        " PID)"
    ]
}

/// Can `f.pid` (found by [`find`]) be the caller? Refused (usage), since
/// the lock would be gone before the script's next line, kept for a
/// process that did not start rlock, or kept for one that a loss, a
/// break or `--max-hold` could not stop:
/// - `rlock exec`'s guard (rlock acquire as the exec's own command: no
///   script);
/// - an orphan: `f.child` (this rlock or its outermost wrapper) was
///   re-parented to init or a subreaper (`( rlock acquire k --keep & )`,
///   `setsid -f rlock ...`): its parent is in another session, or is pid 1
///   of another session than ours (a lock kept for init would be kept for
///   ever, and a loss would signal what init starts);
/// - a process of another user (`runuser -u nobody -- rlock ...` in a
///   root script): the keeper could not signal it;
/// - a program that is neither a shell nor a script interpreter (`find
///   -exec`, `xargs`, `make`, a subreaper such as `systemd --user` or
///   `tini`): it runs a command for someone and exits or moves on;
/// - a shell run with `-c` whose command string ends with this rlock
///   (`sh -c "rlock acquire k --keep"`): it exits as rlock does. (Not a
///   `( ... )` subshell: its lock ends with it, as flock's does.)
/// - a script in pid 1's process group that does not lead it
///   ([`adopted_in_its_group`]): what it leaves running could not be told
///   from what pid 1 starts.
pub(super) fn usable(p: &impl Procs, f: &Found) -> Result<()> {
    let (parent, child) = (f.parent, f.child);
    if is_guard(p, parent) {
        return Err(Error::Invalid(msg![
            Setting::KeepCaller,
            ": as rlock exec's own command (or orphaned inside it) there is no script to keep \
             the lock for; use it inside the script; or name the process with ",
            Setting::KeepPid,
            " PID"
        ]));
    }
    let no = |why: String| {
        Err(Error::Invalid(
            msg![Setting::KeepCaller, format!(": {why}; ")].and(idiom()),
        ))
    };
    let (Some(ps), Some(cs), Some(ws)) = (p.info(parent), p.info(child), p.info(f.pid)) else {
        return no(format!(
            "the calling process (pid {parent}) is already gone"
        ));
    };
    // A session leader of its own (`setsid rlock ...`) starts a session:
    // its parent is in another one. Init is refused the same way: the
    // machine's init (or a subreaper such as `systemd --user`) is in a
    // session of its own, apart from the user's; but a container's pid 1
    // that is the script itself (`docker run img sh -c 'rlock acquire k
    // --keep; job'`) shares its session with what it starts, and is kept
    // for, as any script. A session leader under pid 1 (`setsid -f rlock
    // ...`: setsid forked and exited) is an orphan too.
    if parent < 1 || (ps.sid != cs.sid && cs.sid != child) || (f.pid == 1 && ws.sid != cs.sid) {
        return no(format!(
            "the process that started rlock has already exited (rlock was re-parented to \
             pid {parent}), so nothing can tell when the script ends"
        ));
    }
    let uid = p.our_uid();
    let other = uid != 0 && p.uids(f.pid).is_some_and(|(r, e)| r != uid || e != uid);
    if other || !p.may_signal(f.pid) {
        let theirs = p.uids(f.pid).map_or("?".into(), |(r, _)| r.to_string());
        return no(format!(
            "the script (pid {}) runs as another user (uid {theirs}) than rlock (uid {uid}), \
             so the keeper could not stop it on a loss, a break or --max-hold",
            f.pid
        ));
    }
    let name = program(p, f.pid);
    if !shell::runs_scripts(&name) {
        return no(format!(
            "rlock was started by pid {} ({name}), which is not a shell or script \
             interpreter but a program that runs commands and exits or moves on, so it \
             cannot tell when the script ends",
            f.pid
        ));
    }
    let argv = p.cmdline(f.pid).unwrap_or_default();
    let argv: Vec<&[u8]> = argv.split(|&b| b == 0).collect();
    // Our arguments from the subcommand on, as the command string would
    // spell them.
    let ours = p.cmdline(p.me()).unwrap_or_default();
    let ours: Vec<String> = ours
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let ours: Vec<&str> = ours.iter().map(String::as_str).collect();
    let ours = ours
        .iter()
        .position(|&a| a == "acquire")
        .map_or(&ours[..0], |at| &ours[at..]);
    if !f.subshell
        && shell::is_shell(&name)
        && shell::command_string(&argv).is_some_and(|s| shell::ends_with(&s, ours))
    {
        return no(format!(
            "rlock was started as the last command of `{name} -c` (pid {}), which exits as \
             soon as rlock does",
            f.pid
        ));
    }
    if adopted_in_its_group(p, f.pid) {
        return no(format!(
            "the script (pid {}) does not lead its process group and pid 1, which adopts \
             what the script leaves running, is in that group too, so such a process could \
             not be told from pid 1's own and a loss, a break or --max-hold could not stop \
             it; run the script in a group of its own (setsid SCRIPT)",
            f.pid
        ));
    }
    Ok(())
}

/// Is `pid` a script whose orphans would be hidden from the cover: it does
/// not lead its process group, and pid 1 (which adopts its orphans) is in
/// that group and session? The cover's orphan rule (`cover`'s module doc)
/// tells the script's re-parented `job &` from other members' children by
/// a parent outside the group; with pid 1 inside it, such an orphan looks
/// like a child pid 1 started itself. A group hidden from this pid
/// namespace (pgid 0 for both: joined outside it) counts as the same:
/// nothing tells them apart. Not pid 1 itself: its orphans are its own
/// children (a container's entrypoint script). A subreaper between them
/// (PR_SET_CHILD_SUBREAPER, which /proc does not show) is not checked.
fn adopted_in_its_group(p: &impl Procs, pid: Pid) -> bool {
    let (Some(s), Some(init)) = (p.info(pid), p.info(1)) else {
        return false;
    };
    pid != 1 && s.pgid != pid && init.pgid == s.pgid && init.sid == s.sid
}

/// The name of `pid`'s program: its executable's file name; busybox's
/// applet (`sh`, `find`: its argv[0], or argv[1] after `busybox`); or its
/// comm where the executable cannot be read (another user's process).
fn program(p: &impl Procs, pid: Pid) -> String {
    let base = |a: &[u8]| {
        let name = a.rsplit(|&b| b == b'/').next().unwrap_or_default();
        String::from_utf8_lossy(name).into_owned()
    };
    let exe = p.exe(pid);
    match exe.as_deref().and_then(Path::file_name) {
        Some(b) if b != "busybox" => b.to_string_lossy().into_owned(),
        Some(_) => {
            let argv = p.cmdline(pid).unwrap_or_default();
            let mut args = argv.split(|&b| b == 0).map(base);
            match args.next() {
                Some(a) if a == "busybox" => args.next().unwrap_or_default(),
                a => a.unwrap_or_default(),
            }
        }
        None => p.comm(pid).unwrap_or_default().trim_end().to_string(),
    }
}

/// Does a child of `parent` other than `child` read our stdout (a wrapper
/// passes it on): is `child` a stage of a pipeline?
fn piped_to_sibling(p: &impl Procs, parent: Pid, child: Pid) -> bool {
    let Some(ours) = p.our_stdout_pipe() else {
        return false;
    };
    p.children(parent)
        .into_iter()
        .filter(|&c| c != child && c != p.me())
        .any(|c| p.reads(c, &ours) == Some(true))
}

/// Does `pid` (a grandparent whose child is a forked copy of it) read our
/// stdout, as the shell does the pipe of a `$(...)`? A `( ... )` subshell
/// is a forked copy too, but its shell does not read its output: there the
/// subshell itself is the caller, as flock(1)'s `( flock 9; ... ) 9>f`
/// holds its lock until the subshell ends, not the script. If the
/// grandparent's descriptors cannot be read, it is taken to read it (it is
/// watched).
fn reads_our_output(p: &impl Procs, pid: Pid) -> bool {
    let Some(ours) = p.our_stdout_pipe() else {
        return false;
    };
    // Its read end: a script whose own stdout is a pipe (`script |
    // logger`, a CI runner) holds the write end of the one a `( ... )`
    // subshell's rlock inherited and prints to; that subshell is still
    // the caller.
    p.reads(pid, &ours).unwrap_or(true)
}

/// Is `child` a forked copy of `parent` (a subshell), as far as /proc
/// tells? Same executable, same command line, and the same stack and
/// argument addresses where both are visible.
fn forked_copy(p: &impl Procs, child: Pid, parent: Pid) -> bool {
    let (Some(a), Some(b)) = (p.exe(child), p.exe(parent)) else {
        return false;
    };
    let cmd = p.cmdline(child);
    if a != b || cmd.is_none() || cmd != p.cmdline(parent) {
        return false;
    }
    match (p.info(child), p.info(parent)) {
        (Some(c), Some(q)) if c.layout.0 != 0 && q.layout.0 != 0 => c.layout == q.layout,
        _ => true,
    }
}

/// Is `pid` the guard of an `rlock exec` (see exec's guard/)?
pub(super) fn is_guard(p: &impl Procs, pid: Pid) -> bool {
    p.comm(pid)
        .is_some_and(|c| c.trim_end() == crate::proctitle::EXEC_GUARD)
}

/// The guard of the nearest `rlock exec` this process runs under, if any.
pub(super) fn enclosing_exec(p: &impl Procs) -> Option<Pid> {
    let mut at = p.me();
    for _ in 0..64 {
        at = p.info(at)?.ppid;
        if at <= 1 {
            return None;
        }
        if is_guard(p, at) {
            return Some(at);
        }
    }
    None
}

/// Is `ancestor` among `pid`'s ancestors (exec's walk, on `p`)?
pub(super) fn descends_from(p: &impl Procs, pid: Pid, ancestor: Pid) -> bool {
    crate::exec::tree::descends_from(|at| p.info(at).map(|s| s.ppid), pid, ancestor)
}

/// The processes of this machine, from /proc.
pub(super) struct Live;

impl Procs for Live {
    fn me(&self) -> Pid {
        std::process::id().cast_signed()
    }

    fn info(&self, pid: Pid) -> Option<Info> {
        crate::exec::tree::stat(pid).map(|s| Info {
            ppid: s.ppid,
            pgid: s.pgid,
            sid: s.sid,
            layout: s.layout,
        })
    }

    fn cmdline(&self, pid: Pid) -> Option<Vec<u8>> {
        std::fs::read(format!("/proc/{pid}/cmdline")).ok()
    }

    fn exe(&self, pid: Pid) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{pid}/exe")).ok()
    }

    fn comm(&self, pid: Pid) -> Option<String> {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()
    }

    fn our_stdout_pipe(&self) -> Option<PathBuf> {
        let ours = std::fs::read_link("/proc/self/fd/1").ok()?;
        ours.to_string_lossy().starts_with("pipe:").then_some(ours)
    }

    fn reads(&self, pid: Pid, pipe: &Path) -> Option<bool> {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
        Some(fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l == pipe)
                && !write_only(pid, &fd.file_name().to_string_lossy())
        }))
    }

    fn children(&self, pid: Pid) -> Vec<Pid> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<Pid>().ok())
            .filter(|&c| self.info(c).is_some_and(|s| s.ppid == pid))
            .collect()
    }

    fn uids(&self, pid: Pid) -> Option<(u32, u32)> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let mut ids = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))?
            .split_whitespace()
            .map(|v| v.parse::<u32>().ok());
        Some((ids.next()??, ids.next()??))
    }

    fn our_uid(&self) -> u32 {
        // SAFETY: plain syscall.
        unsafe { libc::geteuid() }
    }

    fn may_signal(&self, pid: Pid) -> bool {
        // SAFETY: signal 0 only checks that the process exists and that
        // we may signal it.
        let ok = unsafe { libc::kill(pid, 0) } == 0;
        ok || std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM)
    }
}

/// Is descriptor `fd` of `pid` open for writing only (/proc fdinfo
/// flags)? False if that cannot be read.
fn write_only(pid: Pid, fd: &str) -> bool {
    let Ok(info) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")) else {
        return false;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|f| f & libc::O_ACCMODE == libc::O_WRONLY)
}

mod shell;
#[cfg(test)]
mod tests;
