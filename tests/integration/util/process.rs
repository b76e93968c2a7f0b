//! Process and file helpers: signals, liveness, pid reuse, polling, temp
//! directories.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Send signal `sig` to process `pid` (a `u32` from `Child::id` or an
/// `i32` from a pid file).
pub fn kill(pid: impl TryInto<libc::pid_t>, sig: i32) {
    let pid = pid.try_into().unwrap_or_else(|_| panic!("not a pid"));
    // SAFETY: a plain syscall; the pids are our own children's.
    unsafe { libc::kill(pid, sig) };
}

/// A fresh directory `rlock-AREA-PID-NAME` under the temp dir.
pub fn tmp_dir(area: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlock-{area}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file's text, or "" while it does not exist.
pub fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Whether process `pid` runs (a zombie still answers kill(0); look at its
/// state instead).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.rsplit_once(") ").map_or("", |(_, r)| r).starts_with('Z'))
        .unwrap_or(false)
}

/// Where the next pid of this pid namespace is set (root only): tests that
/// need a pid reused write the pid before it there.
pub const NS_LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";

/// Whether this process may write [`NS_LAST_PID`].
pub fn can_set_next_pid() -> bool {
    std::fs::read_to_string(NS_LAST_PID)
        .and_then(|v| std::fs::write(NS_LAST_PID, v.trim()))
        .is_ok()
}

/// Poll `f` until it is true or `limit` passes.
#[track_caller]
pub fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let started = Instant::now();
    while !f() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
