//! What a kept lock covers: the watched process and every process started
//! after the grant that acts for it (see the module doc of [`super`],
//! "What the lock covers"), as flock(1)'s lock lives with every copy of
//! its descriptor.
//!
//! The cover is a set of processes, each named by pid *and* start time
//! (/proc stat field 22), so that a pid reused by an unrelated process is
//! never taken for a covered one. A walk of /proc ([`grow`], pure, over a
//! table of [`Row`]s: every process, or the covered ones and what is below
//! them, see [`WALK_EVERY`]) adds:
//! - every live descendant of the watched process or of a covered process
//!   that started after the grant ([`Grant::before`]), but rlock's own
//!   keepers and guards (`exec::tree::is_keeper`) and what is below them;
//!   once covered, a process stays covered after it is re-parented (its
//!   parent exited: a `( job & )` or a daemon's double fork), until it
//!   exits;
//! - if the watched process leads its own process group (a script run
//!   from a terminal, cron, `setsid`), every live member of that group,
//!   in its session and of its real uid, that started after the grant:
//!   a group's members are created in it by its members (or join it with
//!   setpgid from the same session), so they are the script's, even once
//!   re-parented before a walk saw them. Its number cannot name another
//!   group while any process is in it; once a walk finds no process in it,
//!   or a live leader that is not the watched process, the rule is off for
//!   good (the number may be reused);
//! - if it does not lead its group (a script run by another script, a CI
//!   runner, `make`), the orphan rule: a member of that group, in its
//!   session and of its uid, started after the grant, whose parent is
//!   outside the group (re-parented to init or a subreaper): the script's
//!   last-line `job &`, re-parented as the script exited, before any walk
//!   saw it. A member that a walk saw with a parent in the group outside
//!   the cover is another member's, never covered (`State::foreign`); the
//!   rule closes as the leader's does.
//!
//! Not seen: a process that leaves the script's tree before a walk sees it
//! and also leaves its group (a double fork with `setsid` completed
//! between two walks, [`WALK_EVERY`] apart); a process that a covered one
//! hands work to (a daemon it talks to, `systemd-run`, `at`); an orphan
//! of a script that does not lead its group whose new parent, a subreaper,
//! is in that group (with pid 1 there instead, `detect::usable` refuses
//! the script). Taken for
//! the script's by the orphan rule: another member's re-parented child
//! that started and lost its parent between two walks of every process
//! (those run at each renewal): the lock is then held until it ends, and
//! a loss signals it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Watched;
use super::caller::Grant;

type Pid = libc::pid_t;

/// How often the keeper walks the cover while it keeps: a child that
/// forks and whose parent exits within this time, outside the script's
/// group, escapes. Such a walk reads the children lists of the covered
/// processes only ([`below`]); the walk of every process (the group rule,
/// [`table`]) runs at each renewal, when the watched process exits, when
/// signalling and before the lock is given up. Measured: a keeper
/// holding for 10 s beside 400 processes used 40 ms of CPU (debug build;
/// 1.35 s when every walk read every process).
pub(super) const WALK_EVERY: Duration = Duration::from_millis(100);

/// A process, told apart from a later one with the same pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Id {
    pub pid: Pid,
    /// Start time, clock ticks since boot.
    pub start: u64,
}

/// One process of a walk.
#[derive(Clone, Debug, Default)]
pub(super) struct Row {
    pub pid: Pid,
    pub ppid: Pid,
    pub pgid: Pid,
    pub sid: Pid,
    pub start: u64,
    /// Exited (a zombie).
    pub dead: bool,
}

/// The watched process's process group, where a group rule applies: the
/// leader's rule when it leads it, else the orphan rule (module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Group {
    pub sid: Pid,
    /// Real uid of the watched process.
    pub uid: u32,
    /// The group's number (the watched pid when it leads it).
    pub pgid: Pid,
    /// The watched process leads it.
    pub leads: bool,
    /// When the group's leader started, if it was alive at the grant: a
    /// live process with that number and another start time means the
    /// number was reused.
    pub leader_start: Option<u64>,
}

/// What decides the cover besides a walk's table.
#[derive(Clone, Debug)]
pub(super) struct Rules {
    pub watched: Id,
    /// The watched process's group at the grant.
    pub group: Option<Group>,
    pub grant: Grant,
    pub pid_max: Pid,
    /// The keeper (or its guard) walking: never covered.
    pub me: Pid,
}

/// The cover between walks.
#[derive(Clone, Debug, Default)]
pub(super) struct State {
    /// Covered processes besides the watched one, live at the last walk.
    pub ids: Vec<Id>,
    /// The group rule is off (see the module doc).
    pub group_closed: bool,
    /// Members of a group the watched process does not lead, seen started
    /// after the grant by a parent in that group outside the cover: never
    /// the script's, also once re-parented (the orphan rule).
    pub foreign: HashSet<Id>,
}

/// One walk: `state` after the processes of `table` (`full`: every
/// process; else the covered ones and their descendants, and the group
/// rule waits for a full one). `keeper(pid)`: is it rlock's keeper or
/// guard (never covered, nor what is below it); `uid`: a process's real
/// uid. Returns the processes newly covered.
pub(super) fn grow(
    state: &mut State,
    table: &[Row],
    rules: &Rules,
    full: bool,
    keeper: impl Fn(Pid) -> bool,
    uid: impl Fn(Pid) -> Option<u32>,
) -> Vec<Id> {
    let live: HashMap<Pid, &Row> = table
        .iter()
        .filter(|r| !r.dead)
        .map(|r| (r.pid, r))
        .collect();
    let is_live = |id: &Id| live.get(&id.pid).is_some_and(|r| r.start == id.start);
    let mut covered: HashSet<Id> = state.ids.iter().copied().filter(is_live).collect();
    let before: HashSet<Id> = covered.clone();
    let after = |r: &Row| rules.grant.before(r.start, r.pid, rules.pid_max);
    let id = |r: &Row| Id {
        pid: r.pid,
        start: r.start,
    };
    let skip = |r: &Row, known: &HashSet<Id>| {
        r.pid == rules.me || (!known.contains(&id(r)) && keeper(r.pid))
    };
    // The group rules (see the module doc): closed for good once the group
    // is empty or its number was reused.
    let group = rules.group.filter(|_| full && !state.group_closed);
    if let Some(g) = group {
        let leader_start = if g.leads {
            Some(rules.watched.start)
        } else {
            g.leader_start
        };
        let recycled = live
            .get(&g.pgid)
            .is_some_and(|r| leader_start.is_none_or(|s| r.start != s));
        let empty = !table.iter().any(|r| r.pgid == g.pgid);
        if recycled || empty {
            state.group_closed = true;
        }
    }
    // The leader's rule.
    if let Some(g) = group.filter(|g| g.leads && !state.group_closed) {
        let number = g.pgid;
        {
            for r in table.iter().filter(|r| !r.dead && r.pgid == number) {
                if r.sid == g.sid
                    && r.pid != number
                    && after(r)
                    && !skip(r, &before)
                    && uid(r.pid) == Some(g.uid)
                {
                    covered.insert(id(r));
                }
            }
        }
    }
    // The orphan rule: the script does not lead its group. A member of it
    // started after the grant whose parent is outside the group (init, a
    // subreaper: re-parented) and that no walk saw with a parent in the
    // group outside the cover is the script's `job &` whose parent exited
    // before a walk saw it (covered, with what is below it); one seen with
    // such a parent is another member's (marked below, after the cover).
    let orphans = group.filter(|g| !g.leads && !state.group_closed);
    let member = |r: &Row, g: &Group| {
        !r.dead
            && r.pgid == g.pgid
            && r.sid == g.sid
            && r.pid != rules.watched.pid
            && after(r)
            && !skip(r, &before)
    };
    if let Some(g) = orphans {
        for r in table.iter().filter(|r| member(r, &g)) {
            let reparented = live.get(&r.ppid).is_none_or(|p| p.pgid != g.pgid);
            if reparented && !state.foreign.contains(&id(r)) && uid(r.pid) == Some(g.uid) {
                covered.insert(id(r));
            }
        }
    }
    // Descendants of the watched and covered processes.
    let mut children: HashMap<Pid, Vec<&Row>> = HashMap::new();
    for r in live.values() {
        children.entry(r.ppid).or_default().push(r);
    }
    let mut todo: Vec<Pid> = covered.iter().map(|i| i.pid).collect();
    if is_live(&rules.watched) {
        todo.push(rules.watched.pid);
    }
    let mut seen: HashSet<Pid> = todo.iter().copied().collect();
    while let Some(p) = todo.pop() {
        for &r in children.get(&p).map_or(&[][..], Vec::as_slice) {
            if skip(r, &before) || !seen.insert(r.pid) {
                continue;
            }
            // A process from before the grant is walked through (what it
            // starts later may be the script's work), not covered.
            if after(r) {
                covered.insert(id(r));
            }
            todo.push(r.pid);
        }
    }
    if let Some(g) = orphans {
        for r in table
            .iter()
            .filter(|r| member(r, &g) && !covered.contains(&id(r)))
        {
            if live.get(&r.ppid).is_some_and(|p| p.pgid == g.pgid) {
                state.foreign.insert(id(r));
            }
        }
    }
    if full {
        state.foreign.retain(is_live);
    }
    covered.remove(&rules.watched);
    let mut ids: Vec<Id> = covered.into_iter().collect();
    ids.sort_by_key(|i| (i.start, i.pid));
    let new = ids
        .iter()
        .copied()
        .filter(|i| !before.contains(i))
        .collect();
    state.ids = ids;
    new
}

/// The keeper's (or guard's) cover of a watched process.
#[derive(Clone)]
pub(super) struct Cover {
    pub rules: Rules,
    pub state: State,
    /// Where the keeper publishes the cover for its guard.
    board: Option<&'static Board>,
}

impl Cover {
    /// The cover of `watched` for a grant made at `grant`, with nothing
    /// but the watched process in it yet; `me` never counts.
    pub(super) fn new(watched: &Watched, grant: Grant) -> Cover {
        let me = std::process::id().cast_signed();
        let wid = Id {
            pid: watched.pid,
            start: watched.start,
        };
        let group = row(watched.pid)
            .filter(|r| r.start == watched.start)
            .and_then(|r| {
                use super::detect::Procs;
                let (uid, _) = super::detect::Live.uids(watched.pid)?;
                let leads = r.pgid == watched.pid;
                let leader_start = if leads {
                    Some(r.start)
                } else {
                    row(r.pgid).filter(|l| l.pgid == r.pgid).map(|l| l.start)
                };
                Some(Group {
                    sid: r.sid,
                    uid,
                    pgid: r.pgid,
                    leads,
                    leader_start,
                })
            });
        Cover {
            rules: Rules {
                watched: wid,
                group,
                grant,
                pid_max: super::caller::pid_max(),
                me,
            },
            state: State::default(),
            board: Board::new(),
        }
    }

    /// Walk /proc once (`full`: every process, else from the covered ones
    /// down, see [`WALK_EVERY`]); the cover goes to the board. Returns the
    /// processes newly covered.
    pub(super) fn walk(&mut self, full: bool) -> Vec<Id> {
        let full = full || !children_files();
        let table = if full {
            table()
        } else {
            let mut roots: Vec<Pid> = self.state.ids.iter().map(|i| i.pid).collect();
            roots.push(self.rules.watched.pid);
            below(&roots)
        };
        let new = grow(
            &mut self.state,
            &table,
            &self.rules,
            full,
            crate::exec::tree::is_keeper,
            |pid| {
                use super::detect::Procs;
                super::detect::Live.uids(pid).map(|(real, _)| real)
            },
        );
        if let Some(b) = self.board {
            b.publish(&self.state.ids);
        }
        new
    }

    /// The guard: add what the keeper last published (it may have died
    /// since), then walk.
    pub(super) fn catch_up(&mut self) {
        if let Some(b) = self.board {
            for i in b.read() {
                if !self.state.ids.contains(&i) {
                    self.state.ids.push(i);
                }
            }
        }
        self.walk(true);
    }

    /// Is any covered process (the watched one aside) alive, as of now?
    pub(super) fn any_live(&self) -> bool {
        self.state.ids.iter().any(|&i| same(i))
    }

    /// `sig` (with SIGCONT after a SIGTERM, as timeout(1) sends it, so a
    /// stopped process can act on it) to the watched process and every
    /// covered one: a walk first, then each process through a pidfd
    /// opened and then checked against its start time (a pid reused
    /// meanwhile is never signalled); then walk-and-signal again while a
    /// walk finds processes not yet signalled (forked meanwhile by a
    /// covered one), at most a few times. Returns whether the watched
    /// process could be signalled (Err: why not, EPERM for another
    /// user's; Ok once it is gone).
    pub(super) fn stop(&mut self, watched: &Watched, sig: i32) -> std::io::Result<()> {
        let sigs: &[i32] = if sig == libc::SIGTERM {
            &[libc::SIGTERM, libc::SIGCONT]
        } else {
            &[sig]
        };
        self.walk(true);
        let mut sent = Ok(());
        let mut todo = self.state.ids.clone();
        for &s in sigs {
            if let Err(e) = watched.signal(s)
                && sent.is_ok()
            {
                sent = Err(e);
            }
            for &i in &todo {
                send(i, s);
            }
        }
        for _ in 0..8 {
            todo = self.walk(true);
            if todo.is_empty() {
                break;
            }
            for &s in sigs {
                for &i in &todo {
                    send(i, s);
                }
            }
        }
        sent
    }
}

/// `sig` to each of `ids` that is still that process.
pub(super) fn send_all(ids: &[Id], sig: i32) {
    for &i in ids {
        send(i, sig);
    }
}

/// Is the process `i` still alive (same pid, same start, not a zombie)?
fn same(i: Id) -> bool {
    row(i.pid).is_some_and(|r| r.start == i.start && !r.dead)
}

/// `sig` to `i`, if it is still that process.
fn send(i: Id, sig: i32) {
    match crate::fd::pidfd_open(i.pid) {
        // The pidfd names whatever had the pid at the open: if the start
        // time matches after it, it is `i` (or `i` has exited, and the
        // signal goes nowhere).
        Ok(fd) => {
            if same(i) {
                let _ = crate::fd::pidfd_send_signal(&fd, sig);
            }
        }
        // No pidfd_open: the window is between the check and the kill.
        Err(e) if e.raw_os_error() != Some(libc::ESRCH) => {
            if same(i) {
                // SAFETY: plain syscall.
                unsafe { libc::kill(i.pid, sig) };
            }
        }
        Err(_) => {}
    }
}

/// `pid`'s row, from /proc/PID/stat.
fn row(pid: Pid) -> Option<Row> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// A /proc/PID/stat line as a row; a zombie leader whose threads still run
/// is alive (see `exec::tree::stat`).
fn parse_stat(pid: Pid, text: &str) -> Option<Row> {
    let f: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    // f[0] is field 3 (state): field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<i64>().ok());
    let zombie = matches!(f.first(), Some(&"Z" | &"X"));
    Some(Row {
        pid,
        ppid: Pid::try_from(num(4)?).ok()?,
        pgid: Pid::try_from(num(5)?).ok()?,
        sid: Pid::try_from(num(6)?).ok()?,
        start: u64::try_from(num(22)?).ok()?,
        dead: zombie && crate::exec::tree::stat(pid).is_none_or(|s| s.dead),
    })
}

/// Does this kernel list a thread's children (/proc/TID/task/TID/children,
/// CONFIG_PROC_CHILDREN)? Else every walk is a full one.
fn children_files() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| std::path::Path::new("/proc/thread-self/children").exists())
}

/// `roots` and every process below them, from each thread's list of
/// children: its cost is the size of the cover, not of the machine.
fn below(roots: &[Pid]) -> Vec<Row> {
    let mut out = Vec::new();
    let mut seen: HashSet<Pid> = roots.iter().copied().collect();
    let mut todo = roots.to_vec();
    while let Some(p) = todo.pop() {
        out.extend(row(p));
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let mut path = t.path();
            path.push("children");
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for c in text
                .split_whitespace()
                .filter_map(|c| c.parse::<Pid>().ok())
            {
                if seen.insert(c) {
                    todo.push(c);
                }
            }
        }
    }
    out
}

/// Every process, as /proc shows it now.
fn table() -> Vec<Row> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<Pid>().ok()?;
            row(pid)
        })
        .collect()
}

/// How many processes a board holds (beyond them, the guard sees only
/// what its own walk finds).
const BOARD_SLOTS: usize = 2040;

/// The cover as the keeper last published it, for its guard: two copies
/// in shared memory, each with a sequence number (odd while it is being
/// written). The keeper writes the copy not in use and then switches to
/// it, so a keeper killed or stopped mid-write leaves the other intact;
/// the guard retries a copy whose number changed while it read.
#[repr(C)]
struct Board {
    current: AtomicU64,
    copies: [Page; 2],
}

#[repr(C)]
struct Page {
    seq: AtomicU64,
    len: AtomicU64,
    /// pid, start, pid, start, ...
    words: [AtomicU64; 2 * BOARD_SLOTS],
}

impl Board {
    /// A new board, shared with a later fork; None if it cannot be mapped.
    fn new() -> Option<&'static Board> {
        let size = std::mem::size_of::<Board>();
        // SAFETY: a fresh anonymous shared mapping, zeroed (a valid Board:
        // atomics of zero), never unmapped (it lives as long as the
        // process).
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return None;
            }
            Some(&*p.cast::<Board>())
        }
    }

    fn publish(&self, ids: &[Id]) {
        let k = usize::from(self.current.load(Ordering::SeqCst) & 1 == 0);
        let c = &self.copies[k];
        c.seq.fetch_add(1, Ordering::SeqCst);
        let n = ids.len().min(BOARD_SLOTS);
        for (j, i) in ids.iter().take(n).enumerate() {
            c.words[2 * j].store(i.pid as u64, Ordering::SeqCst);
            c.words[2 * j + 1].store(i.start, Ordering::SeqCst);
        }
        c.len.store(n as u64, Ordering::SeqCst);
        c.seq.fetch_add(1, Ordering::SeqCst);
        self.current.store(k as u64, Ordering::SeqCst);
    }

    fn read(&self) -> Vec<Id> {
        for _ in 0..100 {
            let c = &self.copies[usize::from(self.current.load(Ordering::SeqCst) & 1 == 1)];
            let s = c.seq.load(Ordering::SeqCst);
            if s & 1 == 1 {
                continue;
            }
            let n = usize::try_from(c.len.load(Ordering::SeqCst)).map_or(0, |n| n.min(BOARD_SLOTS));
            let ids = (0..n)
                .map(|j| Id {
                    pid: Pid::try_from(c.words[2 * j].load(Ordering::SeqCst)).unwrap_or(0),
                    start: c.words[2 * j + 1].load(Ordering::SeqCst),
                })
                .filter(|i| i.pid > 0)
                .collect();
            if c.seq.load(Ordering::SeqCst) == s {
                return ids;
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests;
