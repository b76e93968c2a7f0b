//! The command's process tree, as /proc shows it.
//!
//! The guard is a child subreaper (PR_SET_CHILD_SUBREAPER): a descendant
//! whose parent dies is re-parented to the guard instead of init, so every
//! process the command ever started — in its process group or not,
//! daemonized or not — stays a descendant of the guard until it exits.
//! Signalling "the tree" therefore means: every live descendant of the
//! guard's pid, but the keepers of `acquire --keep` (see [`is_keeper`]).
//!
//! A walk is a snapshot: a process may fork after it. [`kill_all`] repeats
//! walk-and-SIGKILL until nothing live is left; a process forked by one that
//! is being killed is re-parented to the guard and found by the next walk.
//! [`signal_all`] repeats walk-and-signal until a walk finds no process it
//! has not signalled yet (see there why that one is enough).
//! Pids come from the snapshot, so a process that exits and is reaped
//! between the walk and the kill could in principle be reused by an
//! unrelated process; only tree members are reaped by the guard or their
//! own parents, which are ours, so the window is one syscall wide.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// What /proc/PID/stat says that rlock uses.
pub(crate) struct Stat {
    /// Parent pid.
    pub ppid: libc::pid_t,
    /// Process group id (field 5).
    pub pgid: libc::pid_t,
    /// Session id (field 6).
    pub sid: libc::pid_t,
    /// Start time (field 22), which tells a pid's reuse apart.
    pub start: u64,
    /// startstack (field 28) and arg_start (field 48); zero where /proc
    /// hides them from us.
    pub layout: (u64, u64),
    /// Exited: a zombie whose threads are all gone too (see
    /// `live_threads`).
    pub dead: bool,
}

/// `pid`'s /proc/PID/stat, if it still exists.
pub(crate) fn stat(pid: libc::pid_t) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and ')'.
    let f: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    // f[0] is field 3 (state): field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let zombie = matches!(f.first(), Some(&"Z" | &"X"));
    Some(Stat {
        ppid: f.get(1)?.parse().ok()?,
        pgid: f.get(2).and_then(|v| v.parse().ok()).unwrap_or(0),
        sid: f.get(3).and_then(|v| v.parse().ok()).unwrap_or(0),
        start: num(22).unwrap_or(0),
        layout: (num(28).unwrap_or(0), num(48).unwrap_or(0)),
        dead: zombie && !live_threads(pid),
    })
}

/// Live (not zombie) descendants of `root`, parents before children.
pub(crate) fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    walk(root).into_iter().map(|(pid, _)| pid).collect()
}

/// Live (not zombie) descendants of `root`, parents before children, each
/// with its start time (which tells a reused pid apart).
fn walk(root: libc::pid_t) -> Vec<(libc::pid_t, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut procs: Vec<(libc::pid_t, Stat)> = dir
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<libc::pid_t>().ok()?;
            Some((pid, stat(pid)?)) // None: gone meanwhile
        })
        .collect();
    // The stat files are read one after the other, not at one instant. A
    // parent reaped after its child's stat was read (the child then named
    // it) but before its own was is missing here, and its child was
    // re-parented (to the subreaper) before it was reaped: read that
    // child's stat again, or it would hang from no one and be missed.
    let seen: HashSet<libc::pid_t> = procs.iter().map(|(pid, _)| *pid).collect();
    for (pid, st) in &mut procs {
        if !seen.contains(&st.ppid)
            && let Some(again) = stat(*pid)
        {
            *st = again;
        }
    }
    let mut children: HashMap<libc::pid_t, Vec<(libc::pid_t, &Stat)>> = HashMap::new();
    for (pid, st) in &procs {
        children.entry(st.ppid).or_default().push((*pid, st));
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        if let Some(kids) = children.get(&p) {
            for &(k, st) in kids {
                // An `acquire --keep` keeper (and its guard) is rlock's own
                // process, not the command's work: see [`is_keeper`].
                if is_keeper(k) {
                    continue;
                }
                todo.push(k);
                if !st.dead {
                    out.push((k, st.start));
                }
            }
        }
    }
    out
}

/// Is `pid` the keeper of an `rlock acquire --keep` (or the keeper's
/// guard, a fork of it that keeps that argument: see `crate::proctitle`):
/// this program, run with [`crate::keep::KEEPER_ARG`] as its first
/// argument?
///
/// Such a process is left out of every tree walk, so an `rlock exec`
/// neither passes signals on to a keeper that ended up in its tree (an
/// `acquire --keep` inside the command: when `acquire` exits, its keeper
/// is re-parented to the exec's guard, a subreaper), nor kills it, nor
/// waits for it. Each of those was a path to two holders of the kept
/// lock: a forwarded TERM or HUP made the keeper release while the script
/// that keeps the lock went on (and USR1 killed it); a kill ended the
/// renewals under a script that outlived it. And waiting for it made a
/// cycle when the keeper watched a process that waits for the exec. The
/// keeper ends by itself when its watched process does, which is what
/// protects the kept lock. The command line is set at exec, so the
/// keeper is recognised from its first instruction on, before it names
/// itself; a process of another user (whose executable cannot be read)
/// is never taken for one.
pub(crate) fn is_keeper(pid: libc::pid_t) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    if cmdline.split(|&b| b == 0).nth(1) != Some(crate::keep::KEEPER_ARG.as_bytes()) {
        return false;
    }
    // The same program as ours (an upgrade may have replaced the file
    // under a running one: "/usr/bin/rlock (deleted)").
    let exe = |p: &str| {
        std::fs::read_link(p).ok().map(|l| {
            l.to_string_lossy()
                .trim_end_matches(" (deleted)")
                .to_string()
        })
    };
    let theirs = exe(&format!("/proc/{pid}/exe"));
    theirs.is_some() && theirs == exe("/proc/self/exe")
}

/// A thread-group leader that called pthread_exit shows as a zombie while
/// its other threads run on (Go, some JVMs, C programs): it is alive until
/// every thread of it has exited.
fn live_threads(pid: libc::pid_t) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| {
            let state = s.rsplit_once(')').map_or("", |(_, r)| r.trim_start());
            !(state.starts_with('Z') || state.starts_with('X'))
        })
    })
}

/// Is `pid` an ancestor of this process (its parent, the parent's parent,
/// ...)?
pub fn is_ancestor(pid: u32) -> bool {
    libc::pid_t::try_from(pid).is_ok_and(|pid| {
        descends_from(
            |at| stat(at).map(|s| s.ppid),
            std::process::id().cast_signed(),
            pid,
        )
    })
}

/// Is `ancestor` among `pid`'s ancestors, `parent` giving each process's
/// parent? A bounded walk up the parent links, stopping at pid 1. Also
/// keep's (`keep/detect.rs`), on its table of processes.
pub(crate) fn descends_from(
    parent: impl Fn(libc::pid_t) -> Option<libc::pid_t>,
    pid: libc::pid_t,
    ancestor: libc::pid_t,
) -> bool {
    let mut at = pid;
    for _ in 0..64 {
        match parent(at) {
            Some(q) if q == ancestor => return true,
            Some(q) if q > 1 => at = q,
            _ => return false,
        }
    }
    false
}

/// This process as a child subreaper (PR_SET_CHILD_SUBREAPER) until
/// dropped, then as it was: orphans of its descendants come to it instead
/// of init.
pub(crate) struct Subreaper {
    was: bool,
}

impl Subreaper {
    pub(crate) fn new() -> Subreaper {
        let mut was: libc::c_int = 0;
        // SAFETY: plain syscalls; PR_GET_CHILD_SUBREAPER writes one int.
        unsafe {
            libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut was as *mut libc::c_int);
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        }
        Subreaper { was: was != 0 }
    }
}

impl Drop for Subreaper {
    fn drop(&mut self) {
        if !self.was {
            // SAFETY: plain syscall.
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0) };
        }
    }
}

/// Reap every child of this process that has exited.
pub(crate) fn reap_children() {
    // SAFETY: plain syscall; a null status pointer is allowed.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
}

/// Walks [`signal_all`] makes at most: a tree that keeps forking new
/// processes faster than they are signalled (a fork loop that ignores the
/// signal) cannot hold the caller for ever.
const MAX_WALKS: usize = 100;

/// Send `sig` once to every live descendant of `root`, those forked while
/// it walks included: walk and signal until a walk finds no process it has
/// not signalled yet.
///
/// One walk was not enough: a process forked between the walk's reading of
/// /proc and the signal to its parent got nothing, and when the parent died
/// of it, it was re-parented to the guard and ran on (`--kill-leftovers`
/// then held the lock for the whole `--grace` and SIGKILLed it). The walk
/// after the signals sees every such child: the kernel aborts (and
/// restarts) a fork in a process with a signal pending, so a child the
/// parent forks after our kill returned can only come from a parent that
/// survived the signal (handled or ignored it), which is that process's
/// choice, as for any process that handles SIGTERM; and a child forked
/// before that is in /proc when the next walk starts.
pub(crate) fn signal_all(root: libc::pid_t, sig: i32) {
    let me = std::process::id().cast_signed();
    let mut signalled = HashSet::new();
    for _ in 0..MAX_WALKS {
        let mut more = false;
        // (Never ourselves: a keeper may have been re-parented under `root`.)
        for (pid, start) in walk(root).into_iter().filter(|&(p, _)| p != me) {
            if signalled.insert((pid, start)) {
                more = true;
                // SAFETY: plain syscall; see the module comment on pid reuse.
                unsafe { libc::kill(pid, sig) };
                continue_after(pid, sig);
            }
        }
        if !more {
            return;
        }
    }
}

/// After a SIGTERM, a SIGCONT, as timeout(1) sends: a stopped process
/// (SIGSTOP, Ctrl-Z) acts on its TERM only once continued, and without the
/// CONT would sit out the whole `--grace` and die of the SIGKILL.
pub(crate) fn continue_after(pid: libc::pid_t, sig: i32) {
    if sig == libc::SIGTERM {
        // SAFETY: plain syscall, to the pid just signalled.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
}

/// SIGKILL every descendant of `root` until none is left alive (or a
/// second has passed; a process in uninterruptible sleep dies when it
/// wakes). Returns whether the tree is dead.
pub(crate) fn kill_all(root: libc::pid_t) -> bool {
    for _ in 0..1000 {
        let live = descendants(root);
        if live.is_empty() {
            return true;
        }
        for pid in live {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    descendants(root).is_empty()
}
