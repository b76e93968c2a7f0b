//! `rlock exec`: child lifecycle, renewal, signals, lock loss, re-entry,
//! one file per concern; the helpers they share are here.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::util::*;

mod basics;
mod dead_rlock;
mod guard;
mod leftovers;
mod loss;
mod nesting;
mod signals;
mod terminal;
mod whole_script;

fn tmp(name: &str) -> PathBuf {
    tmp_dir("exec", name)
}

/// The pid a command wrote to `file`, once it has.
#[track_caller]
fn wait_pid(file: &Path) -> i32 {
    eventually(Duration::from_secs(5), "a pid in the file", || {
        read(file).trim().parse::<i32>().is_ok()
    });
    read(file).trim().parse().unwrap()
}

/// Paths named `names` in a fresh temp dir `name`.
fn paths<const N: usize>(name: &str, names: [&str; N]) -> [PathBuf; N] {
    let dir = tmp(name);
    names.map(|n| dir.join(n))
}

/// `rlock exec OPTS KEY -- sh -c SCRIPT`, to run or spawn.
fn exec_sh(r: &Redis, opts: &[&str], key: &str, script: &str) -> Rlock {
    rlock(r)
        .args(["exec"])
        .args(opts)
        .args([key, "--", "sh", "-c", script])
}

/// Wait up to `limit` until something has been written to `file`.
#[track_caller]
fn await_written(file: &Path, limit: Duration, what: &str) {
    eventually(limit, what, || !read(file).is_empty());
}

/// No line is added to `ledger` over `pause`: whatever wrote it is gone.
#[track_caller]
fn assert_no_more_lines(ledger: &Path, pause: Duration, what: &str) {
    let at_exit = lines(ledger);
    std::thread::sleep(pause);
    assert_eq!(lines(ledger), at_exit, "{what}");
}

/// Fields of /proc/PID/stat after the command name: state is [0], ppid
/// [1], pgrp [2], session [3], tty [4], tpgid (the terminal's foreground
/// group) [5].
fn stat(pid: i32) -> Vec<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    s.rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether process `pid` is stopped (state T).
fn stopped(pid: i32) -> bool {
    stat(pid).first().map(String::as_str) == Some("T")
}

fn ppid(pid: i32) -> i32 {
    stat(pid).get(1).and_then(|p| p.parse().ok()).unwrap_or(0)
}

fn lines(p: &Path) -> usize {
    read(p).lines().count()
}

/// Delete every key of lock `key` (an admin's DEL, or an eviction).
fn delete_lock(r: &Redis, key: &str) {
    for k in r.keys() {
        if k.starts_with(&r.key(key)) && !k.ends_with(":fence") {
            let _: () = r.cmd(&["DEL", &k]);
        }
    }
}

/// The rlock process whose command is `cmd_pid` (the command's parent is
/// the guard; the guard's parent is rlock).
fn rlock_of(cmd_pid: i32) -> i32 {
    ppid(ppid(cmd_pid))
}

/// Live children of `pid`.
fn descendants_of(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| alive(p))
        .collect()
}
