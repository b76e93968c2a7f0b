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

/// Run `cmd` with `input` on its stdin, its output captured.
pub fn fed(cmd: &mut std::process::Command, input: &str) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A fresh directory `AREA-NAME` of this test process's scratch
/// directory (`rlock_test_support::scratch_dir`).
pub fn tmp_dir(area: &str, name: &str) -> PathBuf {
    rlock_test_support::scratch_dir(&format!("{area}-{name}"))
}

/// The path of a file `AREA-NAME` there, with nothing at it yet
/// (`rlock_test_support::scratch_path`).
pub fn tmp_file(area: &str, name: &str) -> PathBuf {
    rlock_test_support::scratch_path(&format!("{area}-{name}"))
}

/// Send `sig` to process `pid` and wait (up to 10 s) until it has taken
/// it, so that the next one is not merged into it: a signal sent while the
/// same one is still pending is lost. rlock blocks the signals it handles
/// and reads them from a signalfd, so "taken" is "read": the signal has
/// left the process's pending set (ShdPnd in /proc/PID/status).
#[track_caller]
pub fn signal_taken(pid: impl TryInto<libc::pid_t>, sig: i32) {
    let pid = pid.try_into().unwrap_or_else(|_| panic!("not a pid"));
    kill(pid, sig);
    let bit = 1u64 << (sig - 1);
    let status = format!("/proc/{pid}/status");
    let started = Instant::now();
    loop {
        let pending = read(std::path::Path::new(&status))
            .lines()
            .find_map(|l| l.strip_prefix("ShdPnd:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok());
        // Gone counts as taken.
        if pending.is_none_or(|m| m & bit == 0) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "process {pid} did not take signal {sig} in 10 s"
        );
        // (1 ms, not `eventually`'s 10: some tests send hundreds.)
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Bytes waiting unread in the sockets process `pid` has open (`ss -x`'s
/// Recv-Q summed over them): a message sent to a stopped process.
pub fn unread_bytes(pid: i32) -> u64 {
    let out = std::process::Command::new("ss")
        .args(["-xpH"])
        .output()
        .expect("run ss (iproute2)");
    let owner = format!("pid={pid},");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&owner))
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
        .sum()
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

/// SIGKILL an `rlock exec` that waits for its turn together with its
/// guard, as a host's crash or an OOM kill of its whole cgroup would: the
/// guard (rlock's child) first, so it cannot give the waiter's place back
/// (an rlock killed alone has its guard do that at once; a stopped guard
/// would not do: its group, orphaned by rlock's death, gets SIGHUP and
/// SIGCONT), then rlock, which does not look at its guard while it waits.
/// What stays in Redis is a place nobody will take: the claims and waiter
/// leases deal with it.
#[track_caller]
pub fn kill_waiter_with_guard(child: &mut std::process::Child) {
    let pid = child.id() as i32;
    let guards: Vec<i32> = read(std::path::Path::new(&format!(
        "/proc/{pid}/task/{pid}/children"
    )))
    .split_whitespace()
    .filter_map(|p| p.parse().ok())
    .collect();
    assert!(!guards.is_empty(), "rlock {pid} has no guard");
    for &g in &guards {
        kill(g, libc::SIGKILL);
        eventually(Duration::from_secs(10), "the guard to die", || !alive(g));
    }
    kill(pid, libc::SIGKILL);
    child.wait().unwrap();
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

/// `pkill -9 PKILL rlock` in a pid namespace of its own (`unshare -fp
/// --mount-proc`, root) while a guard watches a `sleep 100`: there, with
/// `$B` (the binary), `$D` and `redis`'s URL and prefix, `start` (a shell
/// line) runs in the background and leaves a `sleep 100` under a lock, its
/// pid in `$D/sleep`. The process named `guard` then has its command line
/// written to `$D/guard` (NULs as spaces), pkill runs (it must match), and
/// `start`'s exit code goes to `$D/code`. Returns once no process with the
/// command line `sleep 100` is left in the namespace; panics if one still
/// is 10 s after the kill, or on any other failure of the script.
#[track_caller]
pub fn pkill_in_pid_namespace(
    redis: &super::Redis,
    dir: &std::path::Path,
    start: &str,
    guard: &str,
    pkill: &[&str],
) {
    // The pattern and pkill's options come in the environment: on the
    // namespace's pid 1 command line, `-f rlock` would match that too.
    let body = format!(
        r#"{start} &
        job=$!
        left() {{
          for f in /proc/[0-9]*/cmdline; do
            [ "$(tr '\0' ' ' <"$f" 2>/dev/null)" = 'sleep 100 ' ] && echo "$f"
          done
        }}
        i=0; until [ -s "$D/sleep" ]; do i=$((i+1)); [ $i -le 200 ] || exit 3; sleep 0.05; done
        g=$(pgrep -x "$GUARD") || exit 4
        tr '\0' ' ' <"/proc/$g/cmdline" >"$D/guard"
        pkill -9 $PKILL "$PATTERN" || exit 5
        i=0; while [ -n "$(left)" ]; do
          i=$((i+1)); [ $i -le 100 ] || {{ ps -eo pid,ppid,stat,comm,args; exit 6; }}
          sleep 0.1
        done
        wait $job; echo $? >"$D/code""#
    );
    let out = std::process::Command::new("unshare")
        .args(["-fp", "--mount-proc", "sh", "-c", &body])
        .env("B", env!("CARGO_BIN_EXE_rlock"))
        .env("D", dir)
        .env("RLOCK_URL", redis.url())
        .env("RLOCK_PREFIX", &redis.prefix)
        .env("GUARD", guard)
        .env("PKILL", pkill.join(" "))
        .env("PATTERN", "rlock")
        .env_remove("RLOCK_TOKEN")
        .env_remove("RLOCK_HELD")
        .output()
        .unwrap();
    let what = match out.status.code() {
        Some(3) => "the command to start `sleep 100`",
        Some(4) => "a process named as the guard",
        Some(5) => "pkill to match rlock",
        Some(6) => "no `sleep 100` left 10 s after the kill (the guard died with rlock?)",
        _ => "the script",
    };
    assert!(
        out.status.success(),
        "{what}: {out:?}; stderr of rlock: {}",
        read(&dir.join("err"))
    );
}

/// What the first process of [`in_pid_namespace`]'s namespace runs: the
/// command, in a session and process group of its own (as cron, a service
/// manager or a terminal's shell starts a script: with pid 1 in the
/// script's group, `--keep` refuses, keep::refuse), then a wait (at most
/// 30 s) for rlock's keepers and their guards, whose work the kernel would
/// cut short when the namespace's init exits (it kills every process left
/// in it).
const PID_NS_INIT: &str = r#"setsid -w "$@"; rc=$?; i=0
while { pgrep -x rlock-keeper || pgrep -x rl-keepguard; } >/dev/null && [ $i -lt 600 ]; do
  i=$((i+1)); sleep 0.05
done
exit $rc"#;

/// `cmd` run in a PID namespace of its own (`unshare -fp --mount-proc`),
/// with its environment and stdio settings: for every test that starts an
/// `acquire --keep` keeper, so that no keeper bug can signal a process of
/// the host. Its exit code is the command's. Pids it prints are the
/// namespace's: never signal them from the test.
pub fn in_pid_namespace(cmd: &std::process::Command) -> std::process::Command {
    let mut ns = std::process::Command::new("unshare");
    ns.args(["-fp", "--mount-proc", "sh", "-c", PID_NS_INIT, "sh"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => ns.env(k, v),
            None => ns.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        ns.current_dir(dir);
    }
    ns
}
