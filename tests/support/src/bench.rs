//! What both bench programs (`cli` and `market`) share: throwaway
//! redis-servers that a watchdog knows about, the watchdog itself, and a
//! few small helpers.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

pub use crate::{CLUSTER_NODE, Redis, create_cluster};

/// A redis-server (the shared test fixture) that the watchdog knows about.
pub fn start_redis(extra: &[&str]) -> Redis {
    let r = Redis::start_with(extra);
    watch(&r.child, &r.dir);
    r
}

pub fn redis_version(r: &Redis) -> String {
    let text: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut r.conn())
        .expect("INFO server");
    text.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string()
}

/// Keep the first few errors: enough to explain a row, never a flood.
pub fn note(errors: &mut Vec<String>, e: String) {
    if errors.len() < 3 {
        errors.push(e);
    }
}

/// kill(2); a negative pid means a process group.
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Servers started (Redis, etcd), for the watchdog: pid and directory.
/// Each adds itself when it starts; etcd leaves when it is dropped.
static SERVERS: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());

pub fn watch(server: &Child, dir: &Path) {
    let mut s = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    s.push((server.id(), dir.to_path_buf()));
}

pub fn unwatch(server: &Child) {
    let mut s = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    s.retain(|(pid, _)| *pid != server.id());
}

/// Kill every watched server and remove its directory: for the watchdog,
/// and for paths that skip Drop (a panic hook).
pub fn kill_watched() {
    let servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    for (pid, dir) in servers.iter() {
        // Redis servers leave no note when dropped: kill a pid only while
        // it is still a child of ours, never one reused meanwhile.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat.rsplit(") ").next().and_then(|r| r.split(' ').nth(1));
        if ppid == Some(&std::process::id().to_string()) {
            signal(*pid as i32, libc::SIGKILL);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Kill the servers (Redis, etcd) and exit if the run takes far too long:
/// with the servers gone, every client still running errors out and exits.
pub fn watchdog(who: &'static str, limit: Duration) {
    thread::spawn(move || {
        thread::sleep(limit);
        eprintln!("{who}: still running after {limit:?}; giving up");
        kill_watched();
        std::process::exit(2);
    });
}
