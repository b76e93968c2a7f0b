//! flock(1)'s options on `rlock exec`: util-linux's own flock test
//! scenarios (tests/ts/flock: flock, unlock, close) with `flock FILE`
//! turned into `rlock exec KEY`, plus one test per option.

use std::time::{Duration, Instant};

use crate::util::*;

/// The scenario of util-linux's tests/ts/flock/flock: a shared lock held
/// for 3 s in the background, then each option against it.
#[test]
fn util_linux_flock_scenarios() {
    let r = Redis::shared();
    let key = "/var/lock/flock-test.lock"; // a path names a Redis key here
    let started = Instant::now();
    let general = rlock(&r)
        .args(["exec", "--shared", key])
        .args(["bash", "-c", "echo Locking; sleep 3; echo Unlocking"])
        .spawn();
    eventually(Duration::from_secs(5), "the shared lock", || {
        rlock(&r)
            .args(["status", key])
            .run()
            .ok()
            .stdout
            .contains("held")
    });
    let do_lock = |opts: &[&str], want: i32, mesg: &str| {
        let run = rlock(&r)
            .args(["exec"])
            .args(opts)
            .args([key, "echo", mesg])
            .run()
            .code(want);
        if want == 0 {
            assert_eq!(run.stdout.trim(), mesg);
        } else {
            assert!(run.stdout.is_empty(), "{}", run.stdout);
        }
    };
    // non-block
    do_lock(&["--nonblock", "--conflict-exit-code", "123"], 123, "never");
    do_lock(&["--nb", "-E", "123"], 123, "never");
    do_lock(&["-n", "-E", "123"], 123, "never");
    // shared
    do_lock(&["--shared"], 0, "Have shared lock");
    do_lock(&["-s"], 0, "Have shared lock");
    // exclusive, said explicitly
    do_lock(
        &["--nonblock", "--exclusive", "--conflict-exit-code", "123"],
        123,
        "never",
    );
    do_lock(&["-n", "-x", "-E", "123"], 123, "never");
    do_lock(&["-n", "-e", "-E", "123"], 123, "never");
    // a timeout of 0 is --nonblock (tests/ts/flock/unlock)
    do_lock(&["--wait", "0", "-E", "123"], 123, "never");
    // timeout: waits for the shared holder, then runs
    do_lock(
        &["--timeout", "5", "--conflict-exit-code", "5"],
        0,
        "After timeout.",
    );
    let waited = started.elapsed();
    finish(general, "general lock").ok();
    assert!(waited >= Duration::from_secs(3), "did not wait: {waited:?}");
    r.assert_nothing_held(&[]);
}

#[test]
fn bare_numbers_are_seconds_for_waits_only() {
    let r = Redis::shared();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    let run = rlock(&r)
        .args(["exec", "-w", "0.5", "k", "true"])
        .run()
        .code(75);
    assert!(
        run.elapsed >= Duration::from_millis(500),
        "{:?}",
        run.elapsed
    );
    rlock(&r)
        .args(["exec", "-w", "500ms", "k", "true"])
        .run()
        .code(75);
    // Durations with no flock counterpart keep requiring a unit.
    rlock(&r)
        .args(["exec", "--ttl", "30", "k2", "true"])
        .run()
        .fails(64, "30s");
    rlock(&r)
        .args(["exec", "--grace", "10", "k2", "true"])
        .run()
        .fails(64, "no unit");
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn dash_c_runs_through_sh() {
    let r = Redis::shared();
    let run = rlock(&r)
        .args(["exec", "k", "-c", "echo $((1+2)) $RLOCK_KEY"])
        .run()
        .ok();
    assert_eq!(run.stdout.trim(), "3 k");
    let run = rlock(&r)
        .args(["exec", "--command", "exit 7", "k"])
        .run()
        .code(7);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    // -c and a command after the key exclude each other.
    rlock(&r)
        .args(["exec", "k", "-c", "true", "--", "echo"])
        .run()
        .code(64);
}

#[test]
fn close_is_accepted_and_the_command_gets_no_descriptor() {
    // tests/ts/flock/close: the child must not inherit the lock's fd. rlock
    // passes none, with or without -o.
    let r = Redis::shared();
    let script = "ls /proc/$$/fd";
    let fds = |out: &[u8]| -> Vec<String> {
        let mut v: Vec<String> = String::from_utf8_lossy(out)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    let direct = std::process::Command::new("sh")
        .args(["-c", script])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let direct = fds(&direct.stdout);
    for opt in ["-o", "--close"] {
        let run = rlock(&r)
            .args(["exec", opt, "k", "sh", "-c", script])
            .run()
            .ok();
        assert_eq!(
            fds(run.stdout.as_bytes()),
            direct,
            "rlock passed a descriptor on"
        );
    }
}

#[test]
fn descriptor_forms_and_no_fork_are_refused_with_a_reason() {
    let r = Redis::shared();
    rlock(&r)
        .args(["exec", "-F", "-n", "k", "true"])
        .run()
        .fails(64, "must stay alive");
    rlock(&r)
        .args(["exec", "--no-fork", "k", "true"])
        .run()
        .fails(64, "renew the lease");
    rlock(&r)
        .args(["exec", "-u", "9"])
        .run()
        .fails(64, "rlock release");
    rlock(&r)
        .args(["exec", "--unlock", "k"])
        .run()
        .fails(64, "rlock acquire");
    rlock(&r)
        .args(["exec", "-x", "-n", "9"])
        .run()
        .fails(64, "descriptor");
    rlock(&r)
        .args(["exec", "--fd", "10", "k", "true"])
        .run()
        .fails(64, "file descriptors");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_crontab_line_works_after_replacing_one_word() {
    // flock -n -E 0 /var/lock/nightly ./report.sh, on two "hosts" at once:
    // one runs, the other skips quietly with 0.
    let r = Redis::shared();
    let line = "exec -n -E 0 /var/lock/nightly sh -c 'echo ran; sleep 1'";
    let words: Vec<String> = shell_words(line);
    let a = rlock(&r).args(&words).spawn();
    eventually(Duration::from_secs(5), "the first to hold the lock", || {
        r.held("/var/lock/nightly")
    });
    let b = rlock(&r).args(&words).run().ok();
    assert!(b.stdout.is_empty(), "both ran");
    let a = finish(a, "first").ok();
    assert_eq!(a.stdout.trim(), "ran");
    r.assert_nothing_held(&[]);
}

/// Split a command line as sh would (single quotes only).
fn shell_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}
