//! What a kept lock covers: the script and what it started after the
//! grant, re-parented children included (issue #29). Each test runs as pid
//! 1 of a pid namespace of its own (`unshare -fp --mount-proc`): when it
//! ends, the kernel kills whatever is left in it, and no signal of a
//! keeper can reach a process outside it.
//!
//! The child ignores SIGTERM and writes `tick` to `$D/out` every 0.1 s;
//! the next holder writes `rival`. Two holders means a `tick` after
//! `rival`: checked by the order of the lines, not by timing.

use std::path::Path;

use super::tmp;
use crate::util::*;

/// Run `sh -c body` as pid 1 of a pid namespace of its own, with `$B`,
/// `$D`, this test's Redis and `$CHILD` (the TERM-ignoring ticker, as a
/// shell command); it must exit 0.
fn in_pid_namespace(r: &Redis, d: &Path, body: &str) {
    let out = std::process::Command::new("unshare")
        .args(["-fp", "--mount-proc", "sh", "-c", body])
        .env("B", env!("CARGO_BIN_EXE_rlock"))
        .env("D", d)
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .env(
            "CHILD",
            "trap '' TERM; while :; do echo tick >>\"$D/out\"; sleep .1; done",
        )
        .env_remove("RLOCK_TOKEN")
        .env_remove("RLOCK_HELD")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{out:?}\nout: {:?}\nlog: {}",
        read(&d.join("out")),
        read(&d.join("log"))
    );
}

/// The lines of `$D/out`.
fn lines(d: &Path) -> Vec<String> {
    read(&d.join("out")).lines().map(str::to_string).collect()
}

/// `rival` is there, after at least one `tick`, and no `tick` follows it.
#[track_caller]
fn no_tick_after_the_rival(d: &Path) {
    let lines = lines(d);
    let at = lines
        .iter()
        .position(|l| l == "rival")
        .unwrap_or_else(|| panic!("no rival in {lines:?}"));
    assert!(at > 0 && lines[at - 1] != "rival", "{lines:?}");
    assert!(
        !lines[at..].iter().any(|l| l == "tick"),
        "the child ran on beside the next holder: {lines:?}"
    );
}

/// Shell lines that wait (at most 10 s) until `$D/out` has a tick.
const TICKING: &str = "i=0; until grep -q tick \"$D/out\" 2>/dev/null; do i=$((i+1)); [ $i -le 100 ] || exit 3; sleep .1; done";

/// The next holder, once it gets the lock: `rival` to `$D/out`; then a
/// second for a child that would still tick.
const RIVAL: &str = "\"$B\" exec -w 20s k -- sh -c 'echo rival >>\"$D/out\"' || exit 4; sleep 1";

#[test]
fn a_child_that_outlives_the_script_keeps_the_lock_until_it_ends() {
    let r = Redis::shared();
    // The script leads its group (setsid, as from a terminal or cron) and
    // ends right after `( child & )`: the child is re-parented to init
    // before any walk can see it under the script; the group finds it.
    let d = tmp("cover-orphan");
    let body = format!(
        "setsid bash -c 'tok=$(\"$B\" acquire k --keep --ttl 3s --grace 1s) || exit 9
           ( bash -c \"for i in \\$(seq 30); do echo tick >>\\\"\\$D/out\\\"; sleep .1; done; echo child-end >>\\\"\\$D/out\\\"\" & )' || exit 5
         {TICKING}
         {RIVAL}"
    );
    in_pid_namespace(&r, &d, &body);
    let l = lines(&d);
    assert_eq!(l[l.len() - 2..], ["child-end", "rival"], "{l:?}");
    // Not leading its group (its caller, `sh caller`, leads it; in the
    // group of the namespace's pid 1 it is refused): a background job the
    // script leaves behind when it exits, found under it by a walk,
    // re-parented with its exit.
    let d = tmp("cover-bg");
    let body = format!(
        "cat >\"$D/caller\" <<'EOS'
bash -c 'tok=$(\"$B\" acquire k --keep --ttl 3s --grace 1s) || exit 9
  bash -c \"for i in \\$(seq 30); do echo tick >>\\\"\\$D/out\\\"; sleep .1; done; echo child-end >>\\\"\\$D/out\\\"\" &
  sleep .5' || exit 5
EOS
         setsid -w sh \"$D/caller\" || exit 6
         {RIVAL}"
    );
    in_pid_namespace(&r, &d, &body);
    let l = lines(&d);
    assert_eq!(l[l.len() - 2..], ["child-end", "rival"], "{l:?}");
    // Not leading its group (its caller, `sh caller`, leads it), the job
    // its last line: re-parented to init as the script exits, before any
    // walk saw it under the script (two holders, found in review): the
    // orphan rule finds it in the caller's group.
    let d = tmp("cover-last-bg");
    let body = format!(
        "cat >\"$D/caller\" <<'EOS'
bash -c 'tok=$(\"$B\" acquire k --keep --ttl 3s --grace 1s) || exit 9
  bash -c \"for i in \\$(seq 30); do echo tick >>\\\"\\$D/out\\\"; sleep .1; done; echo child-end >>\\\"\\$D/out\\\"\" &' || exit 5
EOS
         setsid -w sh \"$D/caller\" || exit 6
         {TICKING}
         {RIVAL}"
    );
    in_pid_namespace(&r, &d, &body);
    let l = lines(&d);
    assert_eq!(l[l.len() - 2..], ["child-end", "rival"], "{l:?}");
    r.assert_nothing_held(&[]);
}

/// The script holds `k` with `acquire_opts`, starts the TERM-ignoring
/// child re-parented (leading its group: `( child & )`; else through a
/// subshell that a walk sees first) and works on; `act` (shell lines)
/// then ends the hold while the next holder waits. The child must be gone
/// before the next holder runs.
fn a_reparented_child_is_stopped(name: &str, acquire_opts: &str, act: &str, lead: bool) {
    let r = Redis::shared();
    let d = tmp(name);
    // Not leading its group: run by `sh -c` that leads it (in the group
    // of the namespace's pid 1 it is refused).
    let (launch, child) = if lead {
        ("setsid bash", "( bash -c \"$CHILD\" & )")
    } else {
        (
            "setsid -w sh -c 'bash \"$0\"; exit $?'",
            "( bash -c \"$CHILD\" & sleep .5 )",
        )
    };
    let body = format!(
        "cat >\"$D/script\" <<'EOS'
\"$B\" -v acquire k --keep {acquire_opts} >/dev/null 2>\"$D/log\" || exit 9
{child}
for i in $(seq 150); do sleep .1; done
EOS
         {launch} \"$D/script\" &
         {TICKING}
         sleep .3
         \"$B\" exec -w 20s k -- sh -c 'echo rival >>\"$D/out\"' &
         rival=$!
         {act}
         wait $rival || exit 4
         sleep 1"
    );
    in_pid_namespace(&r, &d, &body);
    no_tick_after_the_rival(&d);
    // (A break leaves its loss record, for `status`.)
    let lost = format!("{}:lost", r.key("k"));
    r.assert_nothing_held(&[&lost]);
}

#[test]
fn a_break_stops_a_reparented_child_before_the_lock_passes_on() {
    for lead in [true, false] {
        a_reparented_child_is_stopped(
            "cover-break",
            "--ttl 3s --grace 1s",
            "sleep .3; \"$B\" break k --reason x --yes || exit 6",
            lead,
        );
    }
}

#[test]
fn max_hold_stops_a_reparented_child_before_the_lock_passes_on() {
    for lead in [true, false] {
        a_reparented_child_is_stopped(
            "cover-max-hold",
            "--ttl 3s --grace 1s --max-hold 2s",
            "",
            lead,
        );
    }
}

#[test]
fn a_killed_keepers_guard_stops_a_reparented_child_before_the_lease_ends() {
    for lead in [true, false] {
        a_reparented_child_is_stopped(
            "cover-killed-keeper",
            "--ttl 3s --grace 1s",
            "k=$(sed -n 's/.*keeper pid \\([0-9]*\\).*/\\1/p' \"$D/log\")
             [ -n \"$k\" ] || exit 7
             kill -9 \"$k\"",
            lead,
        );
    }
}
