//! `acquire --keep`: the paths to two holders, or to signalling a
//! stranger, that the review of the keeper found (issue #24), each
//! reproduced against real shells, real rlock processes and a real
//! redis-server. Each test failed before its fix.

use std::time::Duration;

use crate::keep::{
    alive_in, delete_lock, finish_child, host_pid, keeper_pid, kill_in, script,
    script_in_pid_namespace, tmp, wait_line,
};
use crate::util::*;

/// The lines of `$D/out`, in order.
fn log_lines(d: &std::path::Path) -> Vec<String> {
    read(&d.join("out")).lines().map(str::to_string).collect()
}

/// A rival of the script: `rlock exec -w WAIT KEY` that writes "rival" to
/// `$D/out` once it holds the lock.
fn rival(r: &Redis, key: &str, wait: &str, d: &std::path::Path) -> Rlock {
    rlock(r).args(["exec", "-w", wait, key, "--"]).args([
        "sh",
        "-c",
        &format!("echo rival >>{}/out", d.display()),
    ])
}

/// Run `sh -c body` as pid 1 of a pid namespace of its own (`unshare`,
/// root), with `$B`, `$D` and this test's Redis; it must exit 0.
fn in_pid_namespace(r: &Redis, d: &std::path::Path, body: &str) {
    let out = std::process::Command::new("unshare")
        .args(["-fp", "--mount-proc", "sh", "-c", body])
        .env("B", env!("CARGO_BIN_EXE_rlock"))
        .env("D", d)
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .env_remove("RLOCK_TOKEN")
        .env_remove("RLOCK_HELD")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Where `what` first appears in `lines` (panics if it does not).
#[track_caller]
fn at(lines: &[String], what: &str) -> usize {
    lines
        .iter()
        .position(|l| l == what)
        .unwrap_or_else(|| panic!("no {what:?} in {lines:?}"))
}

#[test]
fn the_keeper_never_gives_back_a_background_execs_hold() {
    // The script exports its kept token, starts `rlock exec kb` in the
    // background (a re-entry) and exits: the keeper gave back every hold
    // of the token, the running exec's too, and a rival ran beside it.
    let r = Redis::shared();
    let d = tmp("bg-exec");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "export RLOCK_TOKEN=$(\"$B\" acquire kb --keep) || exit 9
         \"$B\" exec kb -- sh -c 'echo job-start >>\"$D/out\"; sleep 2; echo job-end >>\"$D/out\"' >/dev/null 2>&1 &
         sleep 0.5",
    );
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(0), "{}", out.1);
    rival(&r, "kb", "10s", &d).run().ok();
    let lines = log_lines(&d);
    assert!(at(&lines, "job-end") < at(&lines, "rival"), "{lines:?}");
    r.assert_nothing_held(&[]);
}

#[test]
fn signals_exec_passes_on_never_reach_a_keeper_in_its_tree() {
    // `rlock acquire B --keep` inside `rlock exec A`'s script: once
    // acquire exits, its keeper is re-parented into exec's tree. TERM and
    // HUP passed on by exec made it release B, USR1 killed it, while the
    // script (which traps them) worked on under B. (A 5 s TTL: with 1 s, a
    // machine loaded enough to delay renewals past TTL/3 made the keeper
    // rightly declare a loss, and this test fail for another reason.) The
    // loop counts in bash itself: a `$(seq 25)` subshell, which does not
    // inherit the traps, died of a USR1 that came while it ran, the loop
    // ran no round, and the keeper rightly released B when the script
    // ended at once.
    let r = Redis::shared();
    let d = tmp("forwarded");
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "echo $$ >\"$D/pid\"; exec \"$B\" exec --grace 30s A -- bash -c 'trap \":\" USR1 USR2 HUP TERM
           \"$B\" -v acquire B --ttl 5s --keep >/dev/null 2>\"$D/log\" || exit 9
           echo started >>\"$D/out\"
           while [ ! -e \"$D/go\" ]; do echo holds-B >>\"$D/out\"; sleep 0.1; done
           echo done >>\"$D/out\"'",
    );
    wait_line(&d, "out");
    let keeper = keeper_pid(&d);
    // The script, now `rlock exec A`.
    let exec: i32 = wait_line(&d, "pid").parse().unwrap();
    for sig in [libc::SIGUSR1, libc::SIGUSR2, libc::SIGHUP, libc::SIGTERM] {
        kill_in(&sh, exec, sig);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        alive_in(&sh, keeper),
        "the keeper got a signal meant for the command (or: {}; the script: {:?})",
        r.status_json("B")["last_lost"],
        log_lines(&d)
    );
    // A keeper that let B go on a signal would let the rival in before
    // the script is done.
    let rival = rival(&r, "B", "10s", &d).spawn();
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(d.join("go"), "").unwrap();
    finish(rival, "the rival").ok();
    let lines = log_lines(&d);
    assert!(at(&lines, "done") < at(&lines, "rival"), "{lines:?}");
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(0), "{}", out.1);
    r.assert_nothing_held(&[]);
}

#[test]
fn a_wrapper_is_seen_through_and_a_pipeline_is_refused() {
    // `timeout 60 rlock acquire` and `rlock acquire | tail`: the keeper
    // watched the short-lived wrapper or pipeline subshell and released
    // within milliseconds of printing the token.
    let r = Redis::shared();
    let d = tmp("wrapper");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "tok=$(timeout 60 \"$B\" acquire kw --keep) || exit 9
         tok2=$(nice -n 1 \"$B\" acquire kn --keep) || exit 8
         sleep 1
         \"$B\" check kw --token \"$tok\" || exit 7
         \"$B\" check kn --token \"$tok2\" || exit 6
         if tok=$(\"$B\" acquire kp --keep 2>\"$D/err\" | tail -n1); [ -n \"$tok\" ]; then exit 5; fi",
    );
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(0), "{}", out.1);
    let err = read(&d.join("err"));
    assert!(
        err.contains("pipeline") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!r.held("kp"), "a refused pipeline left kp held");
    eventually(Duration::from_secs(2), "free after the script", || {
        !r.held("kw") && !r.held("kn")
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn an_orphaned_keep_and_keep_while_init_are_refused() {
    // `( rlock acquire ko --keep & )`: rlock's parent is gone before it
    // looks, and it was re-parented to init; the keeper kept the lock for
    // init for ever, and a loss then SIGTERMed every process init
    // started. In a pid namespace of its own, so that init is the
    // namespace's and nothing outside can be touched.
    let r = Redis::shared();
    let d = tmp("orphan");
    // The namespace's init (this sh) stays in the test's session; the
    // script runs in a session of its own (setsid), as a user's shell is
    // apart from the machine's init. (A container whose pid 1 is the
    // script itself shares one session with it: kept for, see detect.rs.)
    let body = "setsid sh -c '( \"$B\" acquire ko --keep >/dev/null 2>\"$D/err\" & )'
                for i in $(seq 200); do [ -s \"$D/err\" ] && break; sleep 0.05; done";
    in_pid_namespace(&r, &d, body);
    let err = read(&d.join("err"));
    assert!(
        err.contains("re-parented") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!r.held("ko"));
    rlock(&r)
        .args(["acquire", "ko", "--keep", "--keep-while", "1"])
        .run()
        .fails(64, "init");
    // A container whose pid 1 is the script itself: kept for it. (When
    // pid 1 exits, the kernel kills every process of the namespace, the
    // keeper too: the lock then ends with its TTL, as README says.)
    let body = "tok=$(\"$B\" acquire kc --keep --ttl 2s) || exit 9
                sleep 0.5; \"$B\" check kc --token \"$tok\" || exit 8";
    in_pid_namespace(&r, &d, body);
    eventually(
        Duration::from_secs(8),
        "kc free after the container",
        || !r.held("kc"),
    );
    r.assert_nothing_held(&[]);
}

#[test]
fn a_killed_keeper_has_its_guard_stop_the_script() {
    // SIGKILL of the keeper: nothing renewed any more, the lease ran out
    // and a rival got the lock while the script went on. Its guard now
    // sends the script SIGTERM at once.
    let r = Redis::shared();
    let d = tmp("killed-keeper");
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "\"$B\" -v acquire kk --ttl 2s --keep >/dev/null 2>\"$D/log\" || exit 9
         trap 'echo got-term >>\"$D/out\"; exit 5' TERM
         echo started >>\"$D/out\"
         for i in $(seq 100); do sleep 0.1; done; echo finished >>\"$D/out\"",
    );
    wait_line(&d, "out");
    let keeper = keeper_pid(&d);
    kill_in(&sh, keeper, libc::SIGKILL);
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(5), "{}", out.1);
    assert_eq!(log_lines(&d), ["started", "got-term"]);
    eventually(Duration::from_secs(5), "kk free (its TTL)", || {
        !r.held("kk")
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn a_stopped_keeper_has_its_guard_kill_the_script_before_the_lease_ends() {
    // SIGSTOP of the keeper: no renewal, no loss noticed; a rival waiting
    // got the lock at the lease's end while the script worked on.
    let r = Redis::shared();
    let d = tmp("stopped-keeper");
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "\"$B\" -v acquire ks --ttl 2s --keep >/dev/null 2>\"$D/log\" || exit 9
         for i in $(seq 60); do echo holds >>\"$D/out\"; sleep 0.1; done; echo finished >>\"$D/out\"",
    );
    wait_line(&d, "out");
    let keeper = keeper_pid(&d);
    let keeper = host_pid(&sh, keeper).unwrap();
    kill(keeper, libc::SIGSTOP);
    let rival = rival(&r, "ks", "20s", &d).spawn();
    // The rival runs once the lease has ended; the namespace ends once the
    // keeper, continued, has too.
    finish(rival, "the rival").ok();
    kill(keeper, libc::SIGCONT);
    let out = finish_child(&mut sh);
    // SIGKILLed: the namespace's init says 128+9.
    assert_eq!(out.0, Some(137), "the script was not killed: {}", out.1);
    let lines = log_lines(&d);
    assert_eq!(lines.last().map(String::as_str), Some("rival"), "{lines:?}");
    assert!(!lines.contains(&"finished".to_string()), "{lines:?}");
    r.assert_nothing_held(&[]);
}

#[test]
fn keep_while_outside_the_enclosing_exec_is_refused() {
    // `rlock exec A -- sh -c "rlock acquire B --keep --keep-while
    // $SCRIPT"`: exec A waited for the keeper, the keeper for the script,
    // the script for exec A: both locks renewed for ever.
    let r = Redis::shared();
    let d = tmp("cycle");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "timeout -s KILL 20 \"$B\" exec -w 5s A -- sh -c \"\\\"\\$B\\\" acquire B --keep --keep-while $$ 2>\\\"\\$D/err\\\"\"
         echo $? >\"$D/rc\"",
    );
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(0), "{}", out.1);
    assert_eq!(read(&d.join("rc")).trim(), "64", "{}", read(&d.join("err")));
    assert!(read(&d.join("err")).contains("inside rlock exec"));
    assert!(!r.held("A") && !r.held("B"));
    r.assert_nothing_held(&[]);
}

#[test]
fn on_lost_term_is_followed_by_sigkill_after_grace() {
    // `--on-lost term` promised SIGKILL after --grace, but acquire had no
    // --grace and the keeper never sent SIGKILL: a script trapping TERM
    // ran on past the loss for as long as it liked.
    let r = Redis::shared();
    let d = tmp("grace");
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "\"$B\" -v acquire kg --ttl 3s --keep --grace 500ms >/dev/null 2>\"$D/log\" || exit 9
         trap 'echo got-term >>\"$D/out\"' TERM
         echo started >>\"$D/out\"
         for i in $(seq 300); do sleep 0.1; done; echo finished >>\"$D/out\"",
    );
    wait_line(&d, "out");
    keeper_pid(&d);
    delete_lock(&r, "kg");
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(137), "not killed: {}", out.1);
    assert_eq!(log_lines(&d), ["started", "got-term"]);
    let st = r.status_json("kg");
    assert!(
        st["last_lost"]["action"]
            .as_str()
            .is_some_and(|a| a.contains("SIGKILL after 500ms")),
        "{st}"
    );
    r.assert_nothing_held(&[&format!("{}:lost", r.key("kg"))]);
}

#[test]
fn sigterm_to_the_keeper_stops_the_script_before_it_releases() {
    // An admin's `kill KEEPER` released the lock at once while the script
    // worked on under it.
    let r = Redis::shared();
    let d = tmp("term-keeper");
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "\"$B\" -v acquire kt --keep --grace 300ms >/dev/null 2>\"$D/log\" || exit 9
         trap 'echo got-term >>\"$D/out\"' TERM
         for i in $(seq 100); do echo holds >>\"$D/out\"; sleep 0.1; done; echo finished >>\"$D/out\"",
    );
    wait_line(&d, "out");
    let keeper = keeper_pid(&d);
    kill_in(&sh, keeper, libc::SIGTERM);
    rival(&r, "kt", "10s", &d).run().ok();
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(137), "not killed: {}", out.1);
    let lines = log_lines(&d);
    assert_eq!(lines.last().map(String::as_str), Some("rival"), "{lines:?}");
    assert!(lines.contains(&"got-term".to_string()), "{lines:?}");
    r.assert_nothing_held(&[]);
}

/// `pkill -9 PKILL rlock` while a script holds `acquire --keep --ttl 3s`
/// and runs `sleep 100`, in a pid namespace: the pattern matched the
/// keeper's guard too (a fork of the keeper, `rlock-keeper __keep`), and
/// the script ran on past the lease.
/// (The script runs in a group of its own, `setsid`: in the group of the
/// namespace's pid 1, `--keep` refuses it.)
fn pkill_spares_the_keepers_guard(pkill: &[&str]) {
    let r = Redis::shared();
    let d = tmp(&format!("pkill{}", pkill.concat()));
    pkill_in_pid_namespace(
        &r,
        &d,
        r#"setsid -w bash -c 'tok=$("$B" acquire kk --ttl 3s --keep 2>"$D/err") || exit 9
           sleep 100 & echo $! >"$D/sleep"; wait'"#,
        "rl-keepguard",
        pkill,
    );
    let title = read(&d.join("guard"));
    assert_eq!(
        title.trim_end(),
        "rl-keepguard __keep",
        "the guard's command line"
    );
    // `--on-lost term`: the guard TERMs the script too.
    assert_eq!(read(&d.join("code")).trim(), "143", "the script TERMed");
    eventually(Duration::from_secs(15), "the lease to run out", || {
        !r.held("kk")
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn pkill_of_rlocks_name_leaves_the_keepers_guard_to_stop_the_script() {
    pkill_spares_the_keepers_guard(&[]);
}

#[test]
fn pkill_of_rlocks_command_line_leaves_the_keepers_guard_to_stop_the_script() {
    pkill_spares_the_keepers_guard(&["-f"]);
}

#[test]
fn a_killed_keeper_whose_script_is_gone_frees_the_lock_at_once() {
    // `kill -9` of the keeper and of the script together: nothing renewed
    // any more, and the lock stayed held until its lease ended (30 s here).
    // The keeper's guard now sees the keeper die, finds nothing of the
    // script left, and gives the keeper's hold back through the releaser.
    let r = Redis::shared();
    let d = tmp("killed-keeper-gone");
    in_pid_namespace(
        &r,
        &d,
        r#"setsid -w bash -c '"$B" -v acquire kg --ttl 30s --keep >/dev/null 2>"$D/log" || exit 9
               echo $$ >"$D/script"; exec sleep 100' &
           i=0; while ! grep -q "keeper pid" "$D/log" 2>/dev/null || [ ! -s "$D/script" ]; do
             i=$((i+1)); [ $i -gt 200 ] && exit 7; sleep 0.05
           done
           keeper=$(sed -n 's/.*keeper pid \([0-9]*\).*/\1/p' "$D/log")
           kill -9 "$keeper" "$(cat "$D/script")"
           start=$(date +%s%N)
           "$B" exec -w 20s kg -- true; echo $? >"$D/code"
           echo $(( ($(date +%s%N) - start) / 1000000 )) >"$D/ms""#,
    );
    assert_eq!(read(&d.join("code")).trim(), "0", "the next holder ran");
    let ms: u64 = read(&d.join("ms")).trim().parse().unwrap();
    // The lease had 30 s to run; "at once" is well under that even on a
    // loaded machine (the guard looks every 100 ms).
    assert!(ms < 5_000, "the lock came free after {ms} ms");
    eprintln!("killed keeper, script gone: lock free after {ms} ms");
    r.assert_nothing_held(&[]);
}
