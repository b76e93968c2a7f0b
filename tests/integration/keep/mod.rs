//! `rlock acquire --keep`: a lock that lives as long as the script.
//!
//! Each test runs a real shell script that takes the lock with `--keep`;
//! `$B` is the rlock binary and `$D` a directory of the test's own. The
//! shared helpers are here (keep_safety.rs and new_user.rs use them too),
//! the tests one file per concern.

mod cover;
mod lifetime;
mod reentry;
mod refuse;
mod usage;
mod watched;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// A bash script (for `script_in_pid_namespace`) that keeps lock `k`
/// (1.5 s TTL, the keeper's log in `$D/log`), writes its pid to `$D/pid`
/// and waits; a SIGTERM makes it write `$D/signalled` and exit 5.
pub const KEPT_UNTIL_SIGNALLED: &str = "trap 'echo TERM > \"$D/signalled\"; exit 5' TERM
         tok=$(\"$B\" -v acquire k --keep --ttl 1500ms 2>\"$D/log\") || exit 9
         echo \"$$\" > \"$D/pid\"
         sleep 30 & wait";

pub fn tmp(name: &str) -> PathBuf {
    tmp_dir("keep", name)
}

/// Start `shell -c body` with `$B`, `$D`, RLOCK_URL and RLOCK_PREFIX set
/// (and no other RLOCK_* variable).
pub fn script(r: &Redis, shell: &str, dir: &Path, body: &str) -> Child {
    spawn_piped(script_command(r, shell, dir, body))
}

/// [`script`] in a PID namespace of its own (`util::in_pid_namespace`):
/// for tests outside keep/ whose script starts a keeper. The pids it
/// writes are the namespace's.
pub fn script_in_pid_namespace(r: &Redis, shell: &str, dir: &Path, body: &str) -> Child {
    spawn_piped(in_pid_namespace(&script_command(r, shell, dir, body)))
}

/// The host's pid of `pid`, a pid of the namespace of `ns` (a child of
/// [`script_in_pid_namespace`]): the process of that namespace whose NSpid
/// (/proc/PID/status) ends with `pid`. None once it is gone. The one way a
/// test signals a process of the namespace: its pids mean nothing here.
pub fn host_pid(ns: &Child, pid: i32) -> Option<i32> {
    let status = |p: &str| std::fs::read_to_string(format!("/proc/{p}/status")).ok();
    let field = |s: &str, name: &str| -> Vec<String> {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let link = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    let procs: Vec<String> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    // The namespace is that of unshare's child, its pid 1.
    let unshare = ns.id().to_string();
    let init = procs
        .iter()
        .find(|p| status(p).is_some_and(|s| field(&s, "PPid:") == [unshare.clone()]))?;
    let ns_link = link(init)?;
    let want = pid.to_string();
    procs
        .iter()
        .find(|p| {
            link(p).as_ref() == Some(&ns_link)
                && status(p).is_some_and(|s| field(&s, "NSpid:").last() == Some(&want))
        })
        .and_then(|p| p.parse().ok())
}

/// `sig` to `pid` of the namespace of `ns` (see [`host_pid`]); it must run.
#[track_caller]
pub fn kill_in(ns: &Child, pid: i32, sig: i32) {
    let host = host_pid(ns, pid).unwrap_or_else(|| panic!("no pid {pid} in the namespace"));
    kill(host, sig);
}

/// Whether `pid` of the namespace of `ns` runs (see [`host_pid`]).
pub fn alive_in(ns: &Child, pid: i32) -> bool {
    host_pid(ns, pid).is_some_and(alive)
}

fn spawn_piped(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn script_command(r: &Redis, shell: &str, dir: &Path, body: &str) -> Command {
    let mut cmd = Command::new(shell);
    for (k, _) in std::env::vars() {
        if k.starts_with("RLOCK_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(["-c", body])
        .env("B", env!("CARGO_BIN_EXE_rlock"))
        .env("D", dir)
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix);
    cmd
}

/// What a script wrote to `$D/name`, once it has written a line.
#[track_caller]
pub fn wait_line(dir: &Path, name: &str) -> String {
    let f = dir.join(name);
    eventually(Duration::from_secs(10), name, || read(&f).ends_with('\n'));
    read(&f).trim().to_string()
}

/// The keeper's pid, from `rlock -v acquire --keep 2>$D/log`.
#[track_caller]
pub fn keeper_pid(dir: &Path) -> i32 {
    let log = dir.join("log");
    eventually(Duration::from_secs(10), "the keeper's pid", || {
        read(&log).contains("keeper pid ")
    });
    let text = read(&log);
    let after = text.split("keeper pid ").nth(1).unwrap();
    after.split_whitespace().next().unwrap().parse().unwrap()
}

/// Delete every key of lock `key` but its fencing counter, as an admin's
/// DEL would.
pub fn delete_lock(r: &Redis, key: &str) {
    let keys: Vec<String> = r.cmd(&["KEYS", &format!("{}*", r.key(key))]);
    for k in keys.iter().filter(|k| !k.ends_with(":fence")) {
        let _: i64 = r.cmd(&["DEL", k]);
    }
}

/// The pid the holder of `key` is recorded as (the watched process).
fn holder_pid(r: &Redis, key: &str) -> i64 {
    r.status_json(key)["holders"][0]["pid"]
        .as_i64()
        .unwrap_or(-1)
}

/// Wait for a script: (exit code, stderr).
pub fn finish_child(c: &mut Child) -> (Option<i32>, String) {
    let st = c.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = c.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    (st.code(), err)
}

/// Let a script that waits for `$D/go` end.
fn go(dir: &Path) {
    std::fs::write(dir.join("go"), "").unwrap();
}

/// Wait for a script that must exit 0; `who` (its shell, where a test
/// runs several) prefixes its stderr in the failure.
#[track_caller]
fn exits_0(sh: &mut Child, who: &str) {
    let (code, err) = finish_child(sh);
    if who.is_empty() {
        assert_eq!(code, Some(0), "{err}");
    } else {
        assert_eq!(code, Some(0), "{who}: {err}");
    }
}

/// The end of most tests here: the script exits 0 ([`exits_0`]), and
/// `key` is free within `limit` after it, let go by its keeper.
#[track_caller]
fn exits_0_then_free(r: &Redis, sh: &mut Child, who: &str, key: &str, limit: Duration) {
    exits_0(sh, who);
    eventually(limit, "free after the script", || !r.held(key));
}
