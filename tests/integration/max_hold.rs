//! `--max-hold D` on exec, rw and `acquire --keep`: a hung command cannot
//! keep a lock for ever. After D it gets SIGTERM (SIGKILL after --grace),
//! the lock is released, and rlock exits 124, as timeout(1) does.

use std::time::Duration;

use crate::keep::{finish_child, script_in_pid_namespace, wait_line};
use crate::util::*;

/// Far more than a run that stops at --max-hold takes, far less than the
/// command's own 60 s: no timing claim, only "it did not run to its end".
const BOUND: Duration = Duration::from_secs(30);

#[test]
fn exec_stops_the_command_at_max_hold_exits_124_and_frees_the_lock() {
    let r = Redis::shared();
    let out = rlock(&r)
        .args(["exec", "--max-hold", "1s", "k", "--", "sleep", "60"])
        .run()
        .code(124);
    assert!(out.elapsed < BOUND, "{:?}", out.elapsed);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].contains("ran past --max-hold 1s"),
        "{}",
        out.stderr
    );
    // The history says `overran`, not `released`.
    let ev = r.locker().history("k", 100).unwrap();
    assert!(ev.iter().any(|e| e.event == "overran"), "{ev:?}");
    assert!(!ev.iter().any(|e| e.event == "released"), "{ev:?}");
    // Free: another exec gets it without waiting.
    rlock(&r).args(["exec", "-n", "k", "--", "true"]).run().ok();
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_grace() {
    let r = Redis::shared();
    let out = rlock(&r)
        .args([
            "exec",
            "--max-hold",
            "1s",
            "--grace",
            "1s",
            "k",
            "--",
            "sh",
            "-c",
            "trap '' TERM; sleep 60",
        ])
        .run()
        .code(124);
    assert!(out.elapsed < BOUND, "{:?}", out.elapsed);
    rlock(&r).args(["exec", "-n", "k", "--", "true"]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn rw_with_a_command_stops_it_at_max_hold() {
    let r = Redis::shared();
    let out = rlock(&r)
        .args([
            "rw",
            "write",
            "--max-hold",
            "1s",
            "cat",
            "--",
            "sleep",
            "60",
        ])
        .run()
        .code(124);
    assert!(out.elapsed < BOUND, "{:?}", out.elapsed);
    assert!(out.stderr.contains("--max-hold"), "{}", out.stderr);
    rlock(&r)
        .args(["rw", "read", "-n", "cat", "--", "true"])
        .run()
        .ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn a_kept_lock_stops_its_script_at_max_hold_and_is_released() {
    let r = Redis::shared();
    let d = crate::keep::tmp("max-hold");
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "trap 'echo TERM > \"$D/signalled\"; exit 5' TERM
         tok=$(\"$B\" acquire k --keep --max-hold 1s --ttl 3s) || exit 9
         echo \"$$\" > \"$D/pid\"
         sleep 60 & wait",
    );
    wait_line(&d, "pid");
    assert_eq!(wait_line(&d, "signalled"), "TERM");
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(5), "{}", out.1);
    eventually(Duration::from_secs(10), "the lock released", || {
        !r.held("k")
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn bad_max_hold_is_64_and_holds_nothing() {
    let r = Redis::shared();
    for d in ["0", "0s", "soon"] {
        rlock(&r)
            .args(["exec", "--max-hold", d, "k", "--", "true"])
            .run()
            .fails(64, "--max-hold");
    }
    // Plain acquire has no command to stop: only with --keep.
    rlock(&r)
        .args(["acquire", "--max-hold", "1s", "k"])
        .run()
        .fails(64, "--keep");
    rlock(&r)
        .args(["rw", "read", "--max-hold", "1s", "k"])
        .run()
        .fails(64, "--max-hold");
    assert!(r.keys().is_empty(), "{:?}", r.keys());
}

/// A stopped command gets SIGCONT with its SIGTERM, as timeout(1) sends
/// it: it ends at once, not at the SIGKILL after the whole --grace (30 s
/// here; a stopped process acts on no signal but KILL and CONT).
#[test]
fn a_stopped_command_is_continued_with_its_sigterm() {
    let r = Redis::shared();
    let out = rlock(&r)
        .args([
            "exec",
            "--max-hold",
            "1s",
            "--grace",
            "30s",
            "stopped",
            "--",
            "sh",
            "-c",
            "kill -STOP $$; sleep 60",
        ])
        .run()
        .code(124);
    assert!(
        out.elapsed < Duration::from_secs(20),
        "waited for the SIGKILL: {:?}",
        out.elapsed
    );
    assert!(!out.stderr.contains("sent SIGKILL"), "{}", out.stderr);
    rlock(&r)
        .args(["exec", "-n", "stopped", "--", "true"])
        .run()
        .ok();
}
