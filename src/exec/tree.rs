//! The command's process tree, as /proc shows it.
//!
//! The guard is a child subreaper (PR_SET_CHILD_SUBREAPER): a descendant
//! whose parent dies is re-parented to the guard instead of init, so every
//! process the command ever started — in its process group or not,
//! daemonized or not — stays a descendant of the guard until it exits.
//! Signalling "the tree" therefore means: every live descendant of the
//! guard's pid.
//!
//! A walk is a snapshot: a process may fork after it. [`kill_all`] repeats
//! walk-and-SIGKILL until nothing live is left; a process forked by one that
//! is being killed is re-parented to the guard and found by the next walk.
//! Pids come from the snapshot, so a process that exits and is reaped
//! between the walk and the kill could in principle be reused by an
//! unrelated process; only tree members are reaped by the guard or their
//! own parents, which are ours, so the window is one syscall wide.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Live (not zombie) descendants of `root`, parents before children.
pub(crate) fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut children: HashMap<libc::pid_t, Vec<libc::pid_t>> = HashMap::new();
    let mut zombies = HashSet::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue; // gone meanwhile
        };
        // "pid (comm) state ppid ...": comm may hold spaces and ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let Some(ppid) = fields.next().and_then(|p| p.parse().ok()) else {
            continue;
        };
        if (state == "Z" || state == "X") && !live_threads(pid) {
            zombies.insert(pid);
        }
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        if let Some(kids) = children.get(&p) {
            for &k in kids {
                todo.push(k);
                if !zombies.contains(&k) {
                    out.push(k);
                }
            }
        }
    }
    out
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

/// Send `sig` to every live descendant of `root`, once.
pub(crate) fn signal_all(root: libc::pid_t, sig: i32) {
    for pid in descendants(root) {
        // SAFETY: plain syscall; see the module comment on pid reuse.
        unsafe { libc::kill(pid, sig) };
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
