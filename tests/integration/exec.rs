//! `rlock exec`: child lifecycle, renewal, signals, lock loss, re-entry.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::util::*;

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

#[test]
fn exit_codes_pass_through() {
    let r = Redis::shared();
    for code in [0, 1, 3, 42, 255] {
        rlock(&r)
            .args(["exec", "k", "--", "sh", "-c", &format!("exit {code}")])
            .run()
            .code(code);
    }
    // Killed by a signal: 128+N, never 0.
    rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", "kill -TERM $$"])
        .run()
        .code(143);
    rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", "kill -KILL $$"])
        .run()
        .code(137);
    // Without `--` too.
    rlock(&r).args(["exec", "k", "true"]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn command_not_found_or_not_executable() {
    let r = Redis::shared();
    rlock(&r)
        .args(["exec", "k", "--", "no-such-command-xyz"])
        .run()
        .fails(127, "cannot run");
    let dir = tmp("noexec");
    let f = dir.join("script");
    std::fs::write(&f, "#!/bin/sh\necho hi\n").unwrap();
    rlock(&r)
        .args(["exec", "k", "--", f.to_str().unwrap()])
        .run()
        .fails(126, "permission denied");
    r.assert_nothing_held(&[]);
    rlock(&r).args(["exec", "k"]).run().fails(64, "no command");
}

#[test]
fn child_sees_key_token_and_fence_but_token_is_on_no_argv() {
    let r = Redis::shared();
    let dir = tmp("env");
    let out = dir.join("env");
    let script = format!(
        "echo \"$RLOCK_KEY $RLOCK_FENCE $RLOCK_TOKEN\" > {0}.tmp; mv {0}.tmp {0}; sleep 1",
        out.display()
    );
    let f = r.fence_ahead("envkey");
    let child = rlock(&r)
        .args(["exec", "envkey", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the child to write its env", || {
        !read(&out).is_empty()
    });
    let line = read(&out);
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts[0], "envkey");
    assert_eq!(parts[1], (f + 1).to_string());
    let token = parts[2];
    uuid::Uuid::parse_str(token).unwrap();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(token),
            "token on the argv of {:?}",
            entry.path()
        );
    }
    finish(child, "exec").ok();
    assert!(!r.held("envkey"));
}

#[test]
fn releases_as_soon_as_the_child_exits() {
    let r = Redis::shared();
    let started = Instant::now();
    rlock(&r)
        .args(["exec", "--ttl", "1m", "k", "--", "sleep", "0.2"])
        .run()
        .ok();
    // Released, not left to expire: the next one gets it at once.
    rlock(&r).args(["acquire", "-n", "k"]).run().ok();
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// rlock's thread count, as the command sees it while it runs (rlock is
/// the parent of its parent, the guard), written to `file`.
fn threads_of_rlock(file: &Path) -> String {
    format!(
        "rp=$(awk '/^PPid/{{print $2}}' /proc/$PPID/status); \
         awk '/^Threads/{{print $2}}' /proc/$rp/status > {}",
        file.display()
    )
}

#[test]
fn the_short_path_runs_no_thread_and_the_renewer_starts_when_due() {
    let r = Redis::start();
    let [quick, late] = paths("threads", ["quick", "late"]);
    exec_sh(&r, &[], "k", &threads_of_rlock(&quick)).run().ok();
    // No signal watcher, no guard reader, no renewer before TTL/3.
    assert_eq!(read(&quick).trim(), "1");
    // Past TTL/3 the renewer runs (and renews: the lock is still ours).
    let script = format!("sleep 0.5; {}", threads_of_rlock(&late));
    exec_sh(&r, &["--ttl", "600ms"], "k", &script).run().ok();
    assert_eq!(read(&late).trim(), "2");
}

#[test]
fn a_signal_during_the_first_attempt_ends_it_with_nothing_held() {
    let r = Redis::start();
    let [ran] = paths("first-attempt", ["ran"]);
    // The first attempt runs without a thread: with Redis stopped, its
    // reply waits, and a SIGTERM meanwhile stays pending in the signalfd.
    kill(r.child_pid(), libc::SIGSTOP);
    let child = rlock(&r)
        .args(["exec", "k", "--", "touch", ran.to_str().unwrap()])
        .spawn();
    let pid = child.id();
    // Blocked means the signals go to the signalfd, not the default action.
    eventually(Duration::from_secs(5), "SIGTERM blocked in rlock", || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                let l = s.lines().find(|l| l.starts_with("SigBlk:"))?.to_string();
                u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok()
            })
            .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
    });
    std::thread::sleep(Duration::from_millis(100));
    kill(pid, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    kill(r.child_pid(), libc::SIGCONT);
    finish(child, "exec").code(128 + libc::SIGTERM);
    assert!(
        !ran.exists(),
        "the command ran after the wait was interrupted"
    );
    r.assert_nothing_held(&[]);
}

#[test]
fn renews_while_the_child_runs_past_the_ttl() {
    let r = Redis::shared();
    let run = rlock(&r)
        .args(["exec", "--ttl", "900ms", "k", "--", "sleep", "2.5"])
        .run()
        .ok();
    assert!(run.elapsed >= Duration::from_millis(2500));
    assert_eq!(run.stderr, "");
}

#[test]
fn busy_exec_honours_no_wait_and_conflict_code() {
    let r = Redis::shared();
    rlock(&r).args(["acquire", "k"]).run().ok();
    let [marker] = paths("busy", ["ran"]);
    let touch = format!("touch {}", marker.display());
    exec_sh(&r, &["-n"], "k", &touch).run().fails(75, "busy");
    let run_quiet = exec_sh(&r, &["-n", "-E", "0"], "k", &touch)
        .run()
        .code(0)
        .stderr;
    // -E 0 makes busy a quiet success, as flock -n: no cron mail.
    assert!(run_quiet.is_empty(), "{run_quiet}");
    assert!(!marker.exists(), "the command ran without the lock");
}

fn trap_script(dir: &Path, sig: &str) -> String {
    // sh -c runs a second shell (the grandchild) that records the signal.
    let got = dir.join("got");
    let ready = dir.join("ready");
    format!(
        "sh -c 'trap \"echo {sig} > {got}; exit 0\" {sig}; touch {ready}; while :; do sleep 0.05; done'",
        got = got.display(),
        ready = ready.display()
    )
}

#[test]
fn every_forwarded_signal_reaches_a_grandchild() {
    let r = Redis::shared();
    for (sig, num) in [
        ("INT", libc::SIGINT),
        ("TERM", libc::SIGTERM),
        ("HUP", libc::SIGHUP),
        ("QUIT", libc::SIGQUIT),
        ("USR1", libc::SIGUSR1),
        ("USR2", libc::SIGUSR2),
    ] {
        let dir = tmp(&format!("sig-{sig}"));
        let child = rlock(&r)
            .args([
                "exec",
                "--grace",
                "3s",
                &format!("k{sig}"),
                "--",
                "sh",
                "-c",
                &trap_script(&dir, sig),
            ])
            .spawn();
        eventually(Duration::from_secs(5), "the grandchild to trap", || {
            dir.join("ready").exists()
        });
        kill(child.id(), num);
        let run = finish(child, sig);
        assert_eq!(read(&dir.join("got")).trim(), sig, "{sig}: {}", run.stderr);
        assert!(!r.held(&format!("k{sig}")), "{sig}: still held");
    }
}

/// `rlock ARGS` started as `nohup` or a script's `cmd &` starts it: with
/// the signals `ignored` (shell names) set to SIG_IGN.
fn spawn_ignoring(r: &Redis, ignored: &str, args: &[&str]) -> std::process::Child {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("trap '' {ignored}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_rlock"))
        .args(args)
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn signals_ignored_at_start_stay_ignored_for_the_command() {
    // `nohup rlock exec ...`, then the terminal hangs up: the command must
    // run on (under flock it would), not be killed after --grace.
    let r = Redis::shared();
    let [ready, out] = paths("ignored-sigs", ["ready", "out"]);
    let script = format!(
        "touch {}; sleep 1; echo done > {}",
        ready.display(),
        out.display()
    );
    let child = spawn_ignoring(
        &r,
        "HUP INT",
        &["exec", "--grace", "200ms", "k", "--", "sh", "-c", &script],
    );
    eventually(Duration::from_secs(5), "the command to start", || {
        ready.exists()
    });
    kill(child.id(), libc::SIGHUP);
    kill(child.id(), libc::SIGINT);
    finish(child, "exec under nohup").ok();
    assert_eq!(read(&out).trim(), "done");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_signal_ignored_at_start_does_not_end_a_wait() {
    // A script's `rlock exec k -- job &` ignores INT (the shell's doing):
    // a Ctrl-C at the script's terminal must not end that wait.
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let mut child = spawn_ignoring(&r, "INT", &["exec", "k", "--", "true"]);
    r.await_waiters("k", 1);
    kill(child.id(), libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "SIGINT ended the wait");
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    finish(child, "exec ignoring INT").ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn a_child_that_ignores_term_is_killed_after_grace() {
    let r = Redis::shared();
    let [ready] = paths("grace", ["ready"]);
    let script = format!(
        "trap '' TERM; touch {}; while :; do sleep 0.05; done",
        ready.display()
    );
    let child = exec_sh(&r, &["--grace", "300ms"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        ready.exists()
    });
    kill(child.id(), libc::SIGTERM);
    let run = finish(child, "exec").code(137);
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    assert!(!r.held("k"));

    // A second TERM escalates at once, whatever the grace.
    let _ = std::fs::remove_file(&ready);
    let child = exec_sh(&r, &["--grace", "1h"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        ready.exists()
    });
    kill(child.id(), libc::SIGTERM);
    // Nothing to wait for: the child ignores the first TERM; give rlock a
    // moment to take it before the second.
    std::thread::sleep(Duration::from_millis(100));
    kill(child.id(), libc::SIGTERM);
    finish(child, "exec").code(137);
    assert!(!r.held("k"));
}

/// Start `exec --ttl ttl` with a child that records when it gets SIGTERM.
fn lossy_child(r: &Redis, dir: &Path, extra: &[&str]) -> std::process::Child {
    let script = format!(
        "trap 'date +%s%N > {t}; exit 0' TERM; touch {ready}; while :; do sleep 0.01; done",
        t = dir.join("term").display(),
        ready = dir.join("ready").display()
    );
    let child = exec_sh(r, extra, "lossy", &script).spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        dir.join("ready").exists()
    });
    child
}

#[test]
fn lock_deleted_by_an_admin_stops_the_child_with_79() {
    let r = Redis::start();
    let dir = tmp("deleted");
    let child = lossy_child(&r, &dir, &["--ttl", "900ms"]);
    let _: () = r.cmd(&["DEL", "rlock:{lossy}:h"]);
    let run = finish(child, "exec").fails_with_lines(79, "lost");
    // One line for the loss, not one when it happens and one at exit (the
    // command's shell may add its own "Terminated").
    let ours = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("rlock:"))
        .count();
    assert_eq!(ours, 1, "{}", run.stderr);
    assert!(
        !read(&dir.join("term")).is_empty(),
        "child was not sent SIGTERM"
    );
}

#[test]
fn flushall_stops_the_child_with_79() {
    let r = Redis::start();
    let dir = tmp("flush");
    let child = lossy_child(&r, &dir, &["--ttl", "900ms"]);
    let _: () = r.cmd(&["FLUSHALL"]);
    finish(child, "exec").fails_with_lines(79, "lost");
    assert!(!read(&dir.join("term")).is_empty());
}

#[test]
fn another_owner_taking_over_stops_the_child() {
    let r = Redis::start();
    let dir = tmp("taken");
    let child = lossy_child(&r, &dir, &["--ttl", "900ms", "--on-lost", "kill"]);
    let _: () = r.cmd(&["FLUSHALL"]);
    rlock(&r).args(["acquire", "lossy"]).run().ok();
    finish(child, "exec").code(79);
    // --on-lost kill: SIGKILL, so the TERM trap never ran.
    assert!(read(&dir.join("term")).is_empty());
}

#[test]
fn on_lost_ignore_lets_the_child_finish_but_reports_79() {
    let r = Redis::start();
    let [done] = paths("ignore", ["done"]);
    let script = format!("sleep 1; touch {}", done.display());
    let child = exec_sh(&r, &["--ttl", "300ms", "--on-lost", "ignore"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("k"));
    let _: () = r.cmd(&["FLUSHALL"]);
    let run = finish(child, "exec").code(79);
    assert!(done.exists(), "the command was stopped: {}", run.stderr);
    assert!(
        run.stderr.contains("runs on without the lock"),
        "{}",
        run.stderr
    );
}

/// `--on-lost ignore` leaves the command's whole tree alone, what it left
/// running included: the leftover runs to its end, and rlock exits 79 only
/// then, as the README says ("exits 79 when the command ends", the lock
/// held for leftovers as for the command). `rlock --help` said instead
/// that whatever the command leaves running is killed when it exits.
#[test]
fn on_lost_ignore_leaves_what_the_command_left_running_alone() {
    let r = Redis::start();
    let [done] = paths("ignore-leftover", ["done"]);
    let script = format!("(sleep 1.5; touch {}) & sleep 0.5", done.display());
    let child = exec_sh(&r, &["--ttl", "3s", "--on-lost", "ignore"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("k"));
    let _: () = r.cmd(&["FLUSHALL"]);
    let run = finish(child, "exec").code(79);
    assert!(
        done.exists(),
        "the leftover was killed, or rlock exited before it: {}",
        run.stderr
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("runs on without the lock"),
        "{}",
        run.stderr
    );
    let help = rlock(&r).args(["--help"]).run().ok().stdout;
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("ignore lets the command and everything it started finish"),
        "rlock --help does not say what ignore does to leftovers"
    );
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn redis_frozen_past_the_ttl_child_is_signalled_before_the_lease_ends() {
    let r = Redis::start();
    let dir = tmp("frozen");
    let child = lossy_child(&r, &dir, &["--ttl", "1500ms", "--connect-timeout", "500ms"]);
    std::thread::sleep(Duration::from_millis(700)); // let a renewal happen
    // The server-side expiry: no renewal can land after the freeze.
    let st = rlock(&r).args(["status", "lossy", "--json"]).run().ok();
    let ttl_ms =
        serde_json::from_str::<serde_json::Value>(&st.stdout).unwrap()["holders"][0]["ttl_ms"]
            .as_u64()
            .unwrap();
    let expires_ns = now_ns() + u128::from(ttl_ms) * 1_000_000;
    let frozen_ns = now_ns();
    kill(r.child_pid(), libc::SIGSTOP);
    let run = finish(child, "exec");
    kill(r.child_pid(), libc::SIGCONT);
    let run = run.code(79);
    let term_ns: u128 = read(&dir.join("term"))
        .trim()
        .parse()
        .expect("child got no SIGTERM");
    assert!(
        term_ns < expires_ns,
        "child signalled {} ms after the lease ended on the server",
        (term_ns - expires_ns) / 1_000_000
    );
    eprintln!(
        "frozen redis (ttl 1500 ms): renewals stopped -> child signalled {} ms; \
         signalled {} ms before the server TTL ran out: {}",
        (term_ns - frozen_ns) / 1_000_000,
        (expires_ns - term_ns) / 1_000_000,
        run.stderr.trim()
    );
}

/// Redis frozen, or killed, 0.2 s into `exec --ttl 3s`: the lock is lost,
/// the command stopped before the lease ends, and then rlock must end at
/// once, with one line. It waited for the final release's resends to the
/// dead Redis, about 6 s after the command was gone (exit at 9.2 s frozen,
/// 6.7 s killed), and a command that outlived the loss's SIGTERM (here one
/// that ignores it, as when rlock itself was started with TERM ignored)
/// added "the command did not exit in time; sent SIGKILL" to the loss's
/// own line, which had said that SIGKILL would follow.
#[test]
fn a_lost_lock_ends_rlock_promptly_with_one_line() {
    for (how, sig) in [("frozen", libc::SIGSTOP), ("killed", libc::SIGKILL)] {
        for cmd in ["exec sleep 30", "trap '' TERM; exec sleep 30"] {
            let r = Redis::start();
            let [pidfile] = paths("lost-promptly", ["pid"]);
            let script = format!("echo $$ > {}; {cmd}", pidfile.display());
            let mut child = exec_sh(&r, &["--ttl", "3s"], "k", &script).spawn();
            let pid = wait_pid(&pidfile);
            std::thread::sleep(Duration::from_millis(200));
            kill(r.child_pid(), sig);
            let mut gone = None;
            while child.try_wait().unwrap().is_none() {
                if gone.is_none() && !alive(pid) {
                    gone = Some(Instant::now());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let exited = Instant::now();
            if sig == libc::SIGSTOP {
                kill(r.child_pid(), libc::SIGCONT);
            }
            let run = finish(child, "exec").code(79);
            let after = exited - gone.unwrap_or(exited);
            assert_eq!(
                run.stderr.lines().count(),
                1,
                "Redis {how}, `{cmd}`: {}",
                run.stderr
            );
            assert!(run.stderr.contains("lost"), "{}", run.stderr);
            assert!(
                after < Duration::from_millis(2500),
                "Redis {how}, `{cmd}`: rlock exited {after:?} after its command was gone"
            );
        }
    }
}

#[test]
fn rlock_killed_takes_its_child_along() {
    let r = Redis::shared();
    let [pidfile] = paths("orphan", ["pid"]);
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut child = exec_sh(&r, &[], "k", &script).spawn();
    let pid = wait_pid(&pidfile);
    assert!(alive(pid));
    child.kill().unwrap();
    child.wait().unwrap();
    eventually(Duration::from_secs(5), "the orphan to die", || !alive(pid));
}

#[test]
fn a_nested_exec_of_another_lock_costs_no_reentry_attempt() {
    // Inside `rlock exec a`, RLOCK_TOKEN is a's token: a nested exec of b
    // must take b with one script call, not first try a's token on b.
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    rlock(&r).args(["exec", "warm", "--", "true"]).run().ok(); // scripts cached
    let _: () = r.cmd(&["CONFIG", "RESETSTAT"]);
    let inner = format!("{bin} exec b -- true");
    rlock(&r)
        .args(["exec", "a", "--", "sh", "-c", &inner])
        .run()
        .ok();
    let info: String = r.cmd(&["INFO", "commandstats"]);
    let calls = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };
    // acquire a, acquire b, release b, release a
    assert_eq!(calls("evalsha") + calls("eval"), 4, "{info}");
}

#[test]
fn nested_exec_of_the_same_key_reenters() {
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    // Inner execs would wait forever for their parent without re-entry;
    // -w bounds the damage if that breaks.
    let inner = format!(
        "{bin} exec -w 3s a -- {bin} exec -w 3s b -- {bin} exec -w 3s a -- sh -c 'echo $RLOCK_FENCE'"
    );
    let f = r.fence_ahead("a");
    let run = exec_sh(&r, &[], "a", &inner).run().ok();
    let first = (f + 1).to_string();
    assert_eq!(run.stdout.trim(), first, "the nested exec got a new grant");
    r.assert_nothing_held(&[]);
    // A nested acquire re-enters too and prints the same token.
    let script = format!(
        "t=$({bin} acquire -n a) && [ \"$t\" = \"$RLOCK_TOKEN\" ] && {bin} release a --token \"$t\""
    );
    exec_sh(&r, &[], "a", &script).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn many_concurrent_execs_never_overlap() {
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let body = "n=$(redis-cli -p $PORT INCR inside); [ \"$n\" = 1 ] || exit 99; sleep 0.01; redis-cli -p $PORT DECR inside >/dev/null";
    let script =
        format!("for i in 1 2 3 4 5; do {bin} exec -w 60s c -- sh -c '{body}' || exit $?; done");
    contenders(8, &script, &r.url(), &r);
    r.assert_nothing_held(&["inside"]);
}

#[test]
fn a_short_nested_ttl_never_shortens_the_outer_lease() {
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let script =
        format!("{bin} exec --ttl 1s k1 -- true; {bin} renew k1 --ttl 2s; {bin} status k1 --json");
    let run = exec_sh(&r, &["--ttl", "1m"], "k1", &script).run().ok();
    let st: serde_json::Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    let ttl = st["holders"][0]["ttl_ms"].as_u64().unwrap();
    assert!(ttl > 50_000, "nested holders cut the lease to {ttl} ms");
}

#[test]
fn release_works_after_the_server_closed_the_idle_connection() {
    let r = Redis::start_with(&["--timeout", "1"]);
    rlock(&r)
        .args(["exec", "k", "--", "sleep", "2.5"])
        .run()
        .ok();
    assert!(!r.held("k"));
}

#[test]
fn after_a_loss_nothing_the_command_started_runs_on() {
    let r = Redis::start();
    let [pidfile] = paths("sweep", ["bg"]);
    let script = format!(
        "(trap '' TERM; exec sleep 30) & echo $! > {}; while :; do sleep 0.05; done",
        pidfile.display()
    );
    let child = exec_sh(&r, &["--ttl", "900ms"], "k", &script).spawn();
    let bg = wait_pid(&pidfile);
    let _: () = r.cmd(&["DEL", "rlock:{k}:h"]);
    finish(child, "exec").code(79);
    eventually(Duration::from_secs(5), "the background job to die", || {
        !alive(bg)
    });
}

#[test]
fn rlock_killed_takes_grandchildren_along() {
    let r = Redis::shared();
    let [pidfile] = paths("orphan-gc", ["pid"]);
    let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let mut child = exec_sh(&r, &[], "k", &script).spawn();
    let pid = wait_pid(&pidfile);
    child.kill().unwrap();
    child.wait().unwrap();
    eventually(Duration::from_secs(5), "the grandchild to die", || {
        !alive(pid)
    });
}

#[test]
fn an_inherited_ignored_sigchld_does_not_hide_the_exit_code() {
    use std::os::unix::process::CommandExt;
    let r = Redis::start();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rlock"));
    cmd.args(["--url", &r.url(), "exec", "k", "--", "sh", "-c", "exit 3"]);
    // SAFETY: signal() is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
            Ok(())
        });
    }
    assert_eq!(cmd.status().unwrap().code(), Some(3));
}

#[test]
fn a_lock_gone_when_the_command_ends_is_reported_lost() {
    let r = Redis::start();
    let script = format!("redis-cli -p {} DEL 'rlock:{{k}}:h' >/dev/null", r.port);
    exec_sh(&r, &["--ttl", "1m"], "k", &script)
        .run()
        .fails(79, "gone when the command ended");
}

#[test]
fn nested_exec_of_a_semaphore_reenters() {
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let inner = format!("{bin} exec -n g -- true");
    exec_sh(&r, &["--limit", "3"], "g", &inner).run().ok();
    r.assert_nothing_held(&[]);
}

/// Run `inner` (a shell command line) under a pseudo-terminal, as from an
/// interactive shell: script(1) gives it a pty as its controlling terminal.
fn under_pty(r: &Redis, inner: &str) -> std::process::Child {
    std::process::Command::new("script")
        .args(["-qec", inner, "/dev/null"])
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .env("BIN", env!("CARGO_BIN_EXE_rlock"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// [`under_pty`], then the pid of the command, once it wrote it to `pidfile`.
fn under_pty_with_pid(r: &Redis, inner: &str, pidfile: &Path) -> (std::process::Child, i32) {
    let child = under_pty(r, inner);
    (child, wait_pid(pidfile))
}

/// Type `bytes` at the pseudo-terminal of a child started by [`under_pty`].
fn type_into(child: &mut std::process::Child, bytes: &[u8]) {
    use std::io::Write;
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(bytes).unwrap();
    stdin.flush().unwrap();
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

#[test]
fn interactive_command_owns_the_terminal_in_its_own_group() {
    let r = Redis::shared();
    let [out] = paths("tty", ["out"]);
    // The command: its group is its own, and is the terminal's foreground.
    let inner = format!(
        "$BIN exec k -- sh -c 'set -- $(cut -d\")\" -f2 /proc/$$/stat); \
         echo \"$$ $3 $6\" > {o}'; echo $? >> {o}",
        o = out.display()
    );
    let mut child = under_pty(&r, &inner);
    child.wait().unwrap();
    let got = read(&out);
    let mut l = got.lines();
    let f: Vec<&str> = l.next().unwrap_or("").split(' ').collect();
    assert_eq!(f.len(), 3, "{got:?}");
    assert_eq!(
        f[0], f[1],
        "the command is not its own group's leader: {got:?}"
    );
    assert_eq!(
        f[1], f[2],
        "the command's group is not the terminal's foreground: {got:?}"
    );
    assert_eq!(l.next(), Some("0"), "{got:?}");
    r.assert_nothing_held(&[]);
}

#[test]
fn interactive_loss_stops_grandchildren_too() {
    // Item 1 of issue 10: a grandchild under a terminal kept writing after
    // the lock was lost and rlock had exited 79.
    let r = Redis::shared();
    let [ticks, code] = paths("tty-loss", ["ticks", "code"]);
    let inner = format!(
        "$BIN exec --ttl 3s k -- sh -c 'sh -c \"for i in \\$(seq 50); do echo tick >> {t}; sleep 0.1; done\"'; echo $? > {c}",
        t = ticks.display(),
        c = code.display()
    );
    let mut child = under_pty(&r, &inner);
    eventually(Duration::from_secs(10), "ticks", || lines(&ticks) >= 3);
    delete_lock(&r, "k");
    await_written(&code, Duration::from_secs(10), "rlock to exit");
    assert_eq!(read(&code).trim(), "79");
    assert_no_more_lines(
        &ticks,
        Duration::from_millis(500),
        "the grandchild ran on after the loss",
    );
    child.wait().unwrap();
}

#[test]
fn interactive_rlock_killed_takes_grandchildren_along() {
    let r = Redis::shared();
    let [pidfile] = paths("tty-kill", ["pid"]);
    let inner = format!(
        "$BIN exec k -- sh -c 'echo $$ > {p}; sh -c \"sleep 30\"'",
        p = pidfile.display()
    );
    let (mut child, cmd) = under_pty_with_pid(&r, &inner, &pidfile);
    eventually(Duration::from_secs(5), "the grandchild", || {
        !descendants_of(cmd).is_empty()
    });
    let gc = descendants_of(cmd);
    kill(rlock_of(cmd) as u32, libc::SIGKILL);
    eventually(Duration::from_secs(5), "the tree to die", || {
        !alive(cmd) && gc.iter().all(|&p| !alive(p))
    });
    child.wait().unwrap();
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

#[test]
fn interactive_job_control_stops_and_continues_the_job() {
    // A real interactive bash on a pty: Ctrl-Z sends SIGTSTP to the
    // terminal's foreground group, which is the command's. rlock must stop
    // its own job so bash sees it stopped, and on `fg` continue the command.
    let r = Redis::shared();
    let [pidfile, out, code] = paths("tty-tstp", ["pid", "out", "code"]);
    let mut bash = under_pty(&r, "bash --norc --noprofile -i");
    let mut say = |s: &str| type_into(&mut bash, s.as_bytes());
    // The command is bash, not dash: dash starts each `sleep` with vfork,
    // and a Ctrl-Z landing between that vfork and the exec stops the child
    // while dash waits for it with every signal blocked, so the job is
    // never seen stopped (by rlock or, without rlock, by the shell).
    say(&format!(
        "$BIN exec k -- bash -c 'echo $$ > {p}; for i in $(seq 20); do sleep 0.05; done; echo done > {o}'\n",
        p = pidfile.display(),
        o = out.display(),
    ));
    let cmd = wait_pid(&pidfile);
    let rl = rlock_of(cmd);
    say("\x1a"); // Ctrl-Z
    eventually(Duration::from_secs(20), "rlock to stop its job", || {
        stopped(rl)
    });
    assert!(stopped(cmd));
    assert!(read(&out).is_empty());
    say("fg\n");
    await_written(&out, Duration::from_secs(10), "the command to finish");
    say(&format!("echo $? > {c}; exit\n", c = code.display()));
    await_written(&code, Duration::from_secs(10), "the exit code");
    assert_eq!(read(&code).trim(), "0");
    assert_eq!(read(&out).trim(), "done");
    bash.wait().unwrap();
    r.assert_nothing_held(&[]);
}

#[test]
fn ctrl_c_in_a_terminal_stops_the_script_that_ran_exec() {
    // The terminal sends SIGINT to its foreground group, the command's; the
    // script's shell is not in it. rlock ends its own job with SIGINT after
    // releasing, so the script stops as it would under flock(1).
    let r = Redis::shared();
    let [pidfile, after] = paths("tty-int", ["pid", "after"]);
    let inner = format!(
        "$BIN exec k -- sh -c 'echo $$ > {p}; sleep 30'; echo $? > {a}",
        p = pidfile.display(),
        a = after.display()
    );
    let (mut child, _) = under_pty_with_pid(&r, &inner, &pidfile);
    type_into(&mut child, b"\x03"); // Ctrl-C
    child.wait().unwrap();
    assert!(
        read(&after).is_empty(),
        "the script went on after Ctrl-C: {}",
        read(&after)
    );
    assert!(!r.held("k"));
}

#[test]
fn a_killed_guard_kills_the_whole_tree_before_the_lock_goes() {
    // PR_SET_PDEATHSIG kills only the command; its children, in its group
    // or not, come to rlock (a subreaper while it runs), which kills them
    // before it releases. Without that, `sleep 30` ran on with no lock.
    let r = Redis::shared();
    let [pidfile, gcfile, dfile] = paths("guard-killed", ["pid", "gc", "daemon"]);
    let script = format!(
        "echo $$ > {p}; sleep 30 & echo $! > {g}; setsid sleep 30 & echo $! > {d}; wait",
        p = pidfile.display(),
        g = gcfile.display(),
        d = dfile.display()
    );
    let child = exec_sh(&r, &[], "k", &script).spawn();
    let cmd = wait_pid(&pidfile);
    let grandchildren = [wait_pid(&gcfile), wait_pid(&dfile)];
    kill(ppid(cmd), libc::SIGKILL);
    let run = finish(child, "exec");
    run.fails(79, "guard process was killed; rlock killed every process");
    // Dead before rlock exited, and reaped (a zombie's /proc stat is gone
    // once reaped; `alive` says false for both).
    assert!(!alive(cmd));
    for gc in grandchildren {
        assert!(!alive(gc), "{gc} outlived the killed guard");
    }
    assert!(!r.held("k"));
}

#[test]
fn a_guard_killed_before_it_reports_the_start_is_a_killed_guard() {
    // rlock has asked the guard to spawn and waits for "started" when the
    // guard dies: the command may have started, so this is a killed guard
    // (79, the tree killed first), not a failed start that releases at once.
    let r = Redis::shared();
    let [ran] = paths("guard-killed-early", ["ran"]);
    let other = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let child = exec_sh(&r, &["-q"], "k", &format!("echo x > {}", ran.display())).spawn();
    let rlock_pid = child.id();
    r.await_waiters("k", 1);
    let guard: i32 = read(Path::new(&format!(
        "/proc/{rlock_pid}/task/{rlock_pid}/children"
    )))
    .trim()
    .parse()
    .expect("one child: the guard");
    kill(guard, libc::SIGSTOP);
    rlock(&r)
        .args(["release", "k", "--token", &other])
        .run()
        .ok();
    eventually(Duration::from_secs(10), "exec to hold the lock", || {
        r.status_json("k")["holders"][0]["pid"].as_u64() == Some(u64::from(rlock_pid))
    });
    // Time to send the spawn request to the stopped guard.
    std::thread::sleep(Duration::from_millis(300));
    kill(guard, libc::SIGKILL);
    finish(child, "exec").fails(79, "guard process was killed");
    assert!(!r.held("k"));
    assert!(read(&ran).is_empty());
}

#[test]
fn a_stopped_guard_that_reads_nothing_never_blocks_the_renewals() {
    // Someone stops the guard (SIGSTOP cannot be ignored): its socket fills
    // up with rlock's messages (a forwarded signal each, a deadline per
    // renewal). A blocking send then froze rlock and its renewer in send,
    // and the lease expired under a running command while a rival took the
    // lock. Renewals must go on, and rlock must stay able to kill. Under
    // load the stop can also land between the command's exec and the
    // guard's "started" report, which rlock then waited for in a blocking
    // read: no renewal, no kill, until the guard was continued.
    let r = Redis::shared();
    let [pidfile] = paths("guard-stopped-full", ["pid"]);
    let script = format!(
        "trap '' USR1; echo $$ > {}; while :; do sleep 0.05; done",
        pidfile.display()
    );
    // A 6 s TTL: renewals every 2 s, with 2 s of slack each, so that
    // parallel load alone (six copies of this test beside two busy loops)
    // does not make a renewal late.
    let child = exec_sh(&r, &["-q", "--ttl", "6s"], "k", &script).spawn();
    let rlock_pid = child.id();
    let cmd = wait_pid(&pidfile);
    let guard = ppid(cmd);
    kill(guard, libc::SIGSTOP);
    // Far more forwarded signals than the socket holds (a few hundred),
    // spaced so that rlock takes them one by one.
    for _ in 0..800 {
        kill(rlock_pid, libc::SIGUSR1);
        std::thread::sleep(Duration::from_millis(1));
    }
    // More than a TTL later the lease must still be renewed by that exec
    // (a blocked rlock renews nothing, and it would have expired).
    std::thread::sleep(Duration::from_secs(7));
    let holder = r.status_json("k")["holders"][0]["pid"].as_u64();
    // A second interrupt kills the tree: rlock does it itself, the guard
    // being stopped.
    kill(rlock_pid, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(200));
    kill(rlock_pid, libc::SIGTERM);
    let killed = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(25));
        !alive(cmd)
    });
    kill(guard, libc::SIGCONT);
    let run = finish(child, "exec");
    assert_eq!(
        holder,
        Some(u64::from(rlock_pid)),
        "the lease expired while the command ran; killed {killed}; rlock: {} {}",
        run.code,
        run.stderr
    );
    assert!(killed, "rlock did not kill the command");
    // The command died of SIGKILL (137), or the guard's timer, which had
    // long passed, fired first when it was continued (79).
    assert!(
        [79, 137].contains(&run.code),
        "{}: {}",
        run.code,
        run.stderr
    );
    assert!(!r.held("k"));
}

#[test]
fn a_guard_stopped_before_the_start_stops_neither_the_renewals_nor_starts_the_command_late() {
    // The guard is stopped before it reads rlock's request to start the
    // command (here for certain; under load, the stop of the test above
    // lands between the command's exec and the guard's report at times).
    // rlock waited for "started" in a blocking read: it renewed nothing,
    // and the lease ran out. It must renew on; and the guard, continued
    // past the kill deadline it was given, must not start the command,
    // whose lease may be over by then.
    let r = Redis::shared();
    let [ran] = paths("guard-stopped-before-start", ["ran"]);
    let other = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let child = exec_sh(
        &r,
        &["-q", "--ttl", "6s"],
        "k",
        &format!("echo x > {}", ran.display()),
    )
    .spawn();
    let rlock_pid = child.id();
    r.await_waiters("k", 1);
    let guard: i32 = read(Path::new(&format!(
        "/proc/{rlock_pid}/task/{rlock_pid}/children"
    )))
    .trim()
    .parse()
    .expect("one child: the guard");
    kill(guard, libc::SIGSTOP);
    rlock(&r)
        .args(["release", "k", "--token", &other])
        .run()
        .ok();
    eventually(Duration::from_secs(10), "exec to hold the lock", || {
        r.status_json("k")["holders"][0]["pid"].as_u64() == Some(u64::from(rlock_pid))
    });
    // More than a TTL: only renewals keep it held.
    std::thread::sleep(Duration::from_secs(7));
    let holder = r.status_json("k")["holders"][0]["pid"].as_u64();
    kill(guard, libc::SIGCONT);
    let run = finish(child, "exec");
    assert_eq!(
        holder,
        Some(u64::from(rlock_pid)),
        "the lease expired before the command started; rlock: {} {}",
        run.code,
        run.stderr
    );
    run.fails(79, "the command was not started");
    assert!(read(&ran).is_empty());
    assert!(!r.held("k"));
}

#[test]
fn a_leftover_that_gets_the_commands_pid_is_not_the_command() {
    // The command is reaped at once, and its pid is free again once its
    // group is empty: a leftover that left the group (setsid) can start
    // a process that gets it. Its exit was reported as the command's (and
    // its stops, which under a terminal stop rlock's job). The next pid is
    // set through ns_last_pid (root only), and retried if another process
    // of the machine took it first.
    if !can_set_next_pid() {
        eprintln!("skipped: {NS_LAST_PID} is not writable");
        return;
    }
    let r = Redis::shared();
    for attempt in 0.. {
        let [main, late] = paths(&format!("pid-reused-{attempt}"), ["main", "late"]);
        // The leftover waits until the command is reaped, then has the
        // next process take its pid; that one exits 7.
        let script = format!(
            "echo $$ > {m}; setsid sh -c 'while kill -0 $0 2>/dev/null; do sleep 0.01; done; \
             echo $(($0 - 1)) > {NS_LAST_PID}; sh -c \"echo \\$\\$ > {l}; sleep 0.3; exit 7\" &' $$ & \
             exit 0",
            m = main.display(),
            l = late.display()
        );
        let run = exec_sh(&r, &[], "k", &script).run();
        if read(&main).trim() != read(&late).trim() {
            assert!(attempt < 20, "the command's pid was never reused");
            continue;
        }
        run.ok();
        break;
    }
    assert!(!r.held("k"));
}

#[test]
fn an_oversized_rlock_held_is_refused_and_nothing_is_held() {
    // The guard reads one message of at most 64 KiB; before this check a
    // longer one made rlock wait forever for a start that never came.
    let r = Redis::shared();
    let junk: Vec<String> = (0..2000)
        .map(|i| format!("rlock:{{lock{i}}}\t00000000-0000-4000-8000-000000000000"))
        .collect();
    let junk = junk.join("\n");
    rlock(&r)
        .env("RLOCK_HELD", &junk)
        .args(["exec", "k", "--", "true"])
        .run()
        .fails(64, "RLOCK_HELD");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_process_whose_main_thread_exited_is_still_killed() {
    // A zombie thread-group leader whose other threads run on (Go, some
    // JVMs, C after pthread_exit): /proc says "Z", yet it runs.
    let r = Redis::shared();
    let [src, bin, ledger] = paths("zombie-leader", ["zl.c", "zl", "ledger"]);
    std::fs::write(
        &src,
        r#"#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *tick(void *p) { for (;;) { FILE *f = fopen(p, "a"); fputs("A\n", f); fclose(f); usleep(20000); } }
int main(int c, char **v) { pthread_t t; pthread_create(&t, 0, tick, v[1]); pthread_exit(0); }
"#,
    )
    .unwrap();
    let cc = std::process::Command::new("cc")
        .args(["-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(cc.success());
    let child = rlock(&r)
        .args([
            "exec",
            "--ttl",
            "1s",
            "k",
            "--",
            bin.to_str().unwrap(),
            ledger.to_str().unwrap(),
        ])
        .spawn();
    eventually(Duration::from_secs(5), "ticks", || lines(&ledger) >= 3);
    delete_lock(&r, "k");
    finish(child, "exec").code(79);
    assert_no_more_lines(&ledger, Duration::from_millis(300), "the threads ran on");
}

#[test]
fn the_command_gets_sigpipe_at_its_default() {
    // The Rust runtime ignores SIGPIPE in rlock; `yes | head -1` under
    // rlock must end as it does without.
    let r = Redis::shared();
    let run = rlock(&r)
        .args([
            "exec",
            "k",
            "--",
            "sh",
            "-c",
            "grep SigIgn /proc/self/status",
        ])
        .run()
        .ok();
    let mask = u64::from_str_radix(run.stdout.split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_eq!(mask & (1 << (libc::SIGPIPE - 1)), 0, "{}", run.stdout);
}

#[test]
fn a_command_reading_the_terminal_works_with_stdin_redirected() {
    let r = Redis::shared();
    let [out] = paths("tty-read", ["out"]);
    let inner = format!(
        "echo | $BIN exec k -- sh -c 'read x < /dev/tty; echo got $x > {o}'",
        o = out.display()
    );
    let mut child = under_pty(&r, &inner);
    eventually(Duration::from_secs(5), "the command to run", || r.held("k"));
    type_into(&mut child, b"hello\n");
    await_written(&out, Duration::from_secs(10), "the command to read");
    assert_eq!(read(&out).trim(), "got hello");
    child.wait().unwrap();
    r.assert_nothing_held(&[]);
}

#[test]
fn an_exit_code_of_130_is_not_a_ctrl_c() {
    let r = Redis::shared();
    let [after] = paths("tty-130", ["after"]);
    let inner = format!(
        "$BIN exec k -- sh -c 'exit 130'; echo after=$? > {a}",
        a = after.display()
    );
    under_pty(&r, &inner).wait().unwrap();
    assert_eq!(read(&after).trim(), "after=130");
}

#[test]
fn a_killed_interactive_rlock_gives_the_terminal_back() {
    let r = Redis::shared();
    let [pidfile, out] = paths("tty-back", ["pid", "out"]);
    let inner = format!(
        "$BIN exec k -- sh -c 'echo $$ > {p}; sleep 100'; sleep 0.5; read x; echo got=$x > {o}",
        p = pidfile.display(),
        o = out.display()
    );
    let (mut child, cmd) = under_pty_with_pid(&r, &inner, &pidfile);
    kill(rlock_of(cmd) as u32, libc::SIGKILL);
    eventually(Duration::from_secs(5), "the command to die", || !alive(cmd));
    // The terminal's hand-back to the script is not observable from here.
    std::thread::sleep(Duration::from_millis(200));
    type_into(&mut child, b"typed\n");
    await_written(&out, Duration::from_secs(10), "the script to read");
    assert_eq!(read(&out).trim(), "got=typed");
    child.wait().unwrap();
}

#[test]
fn on_lost_ignore_rides_out_a_stall_without_giving_the_lock_up() {
    let r = Redis::start();
    let child = rlock(&r)
        .args([
            "exec",
            "--ttl",
            "1500ms",
            "--on-lost",
            "ignore",
            "--connect-timeout",
            "300ms",
        ])
        .args(["k", "--", "sleep", "4"])
        .spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("k"));
    kill(r.child_pid(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1200));
    kill(r.child_pid(), libc::SIGCONT);
    std::thread::sleep(Duration::from_millis(1500));
    // Renewing went on after the stall: still ours.
    rlock(&r).args(["acquire", "-n", "k"]).run().code(75);
    let run = finish(child, "exec").ok();
    assert!(
        run.stderr.contains("no renewal confirmed"),
        "{}",
        run.stderr
    );
}

#[test]
fn renewals_reuse_one_connection() {
    // No reconnect (no TLS handshake on rediss://) per renewal: the
    // acquiring connection and the renewer's, and nothing more.
    let r = Redis::start();
    let connections = || -> u64 {
        let info: String = r.cmd(&["INFO", "stats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = connections();
    rlock(&r)
        .args(["exec", "--ttl", "900ms", "k", "--", "sleep", "2.5"])
        .run()
        .ok();
    // Our own INFO connection counts once.
    assert_eq!(connections() - before, 3, "connections opened by one exec");
}

/// A ledger line per tick: "A <ns>" while the first holder runs.
fn ticking(ledger: &Path, tag: &str) -> String {
    format!(
        "while :; do echo \"{tag} $(date +%s%N)\" >> {l}; sleep 0.02; done",
        l = ledger.display()
    )
}

/// The rival's critical section, bracketed in the ledger.
fn rival(ledger: &Path) -> String {
    format!(
        "echo \"B+ $(date +%s%N)\" >> {l}; sleep 0.3; echo \"B- $(date +%s%N)\" >> {l}",
        l = ledger.display()
    )
}

/// Every "A" tick came before the rival's section started.
#[track_caller]
fn assert_no_overlap(ledger: &Path) {
    let text = read(ledger);
    let stamp = |tag: &str| -> Vec<u128> {
        text.lines()
            .filter_map(|l| l.strip_prefix(tag))
            .filter_map(|t| t.trim().parse().ok())
            .collect()
    };
    let b = stamp("B+ ");
    assert_eq!(b.len(), 1, "the rival did not run: {text}");
    let late: Vec<u128> = stamp("A ").into_iter().filter(|&a| a >= b[0]).collect();
    assert!(
        late.is_empty(),
        "the first holder ticked {} times after the rival got the lock",
        late.len()
    );
}

#[test]
fn a_stopped_rlock_cannot_leave_its_command_running_past_the_lease() {
    // Item 2: renewals stop with rlock; the guard kills the command before
    // the lease can end on the server, so the rival never overlaps it.
    let r = Redis::start();
    let [ledger] = paths("stopped", ["ledger"]);
    let holder = exec_sh(&r, &["--ttl", "1s"], "k", &ticking(&ledger, "A")).spawn();
    eventually(Duration::from_secs(5), "ticks", || lines(&ledger) >= 3);
    kill(holder.id(), libc::SIGSTOP);
    exec_sh(&r, &["-w", "20s"], "k", &rival(&ledger)).run().ok();
    kill(holder.id(), libc::SIGCONT);
    let run = finish(holder, "holder").code(79);
    assert_no_overlap(&ledger);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[test]
fn leftovers_keep_the_lock_until_they_exit() {
    // Item 3, as flock(1): the lock is held while anything the command
    // started still runs, in its group or daemonized out of it.
    let r = Redis::shared();
    let [done] = paths("leftovers", ["done"]);
    let script = format!(
        "(sleep 1; touch {d}.1) & setsid sh -c 'sleep 1.5; touch {d}' &",
        d = done.display()
    );
    let child = exec_sh(&r, &[], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the lock to be held", || {
        r.held("k")
    });
    rlock(&r).args(["acquire", "-n", "k"]).run().code(75);
    finish(child, "exec").ok();
    assert!(done.exists(), "rlock exited before the daemonized leftover");
    assert!(!r.held("k"));
}

#[test]
fn kill_leftovers_ends_them_with_the_command() {
    let r = Redis::shared();
    let [done] = paths("kill-leftovers", ["done"]);
    let script = format!(
        "setsid sh -c 'sleep 2; touch {d}' & exit 3",
        d = done.display()
    );
    exec_sh(&r, &["--kill-leftovers"], "k", &script)
        .run()
        .code(3);
    assert!(!r.held("k"));
    std::thread::sleep(Duration::from_millis(2200));
    assert!(!done.exists(), "the leftover ran on");
}

/// `--kill-leftovers` sends SIGTERM to every process the command left,
/// also one that a leftover forks while the tree is being walked. The walk
/// was one /proc snapshot: a process forked after it got no SIGTERM, was
/// re-parented to the guard when its parent died of the TERM, and held the
/// lock for the whole `--grace`, after which rlock SIGKILLed it and said
/// "the command did not exit in time" (`sh -c './lt & exit 6'` did so in 2
/// of 12 runs). Here 16 leftovers each fork their long sleep a few ms
/// apart, around the moment the command exits, so some fork falls inside
/// the walk in most runs; any line on stderr is that SIGKILL.
#[test]
fn kill_leftovers_terms_what_a_leftover_forks_during_the_walk() {
    let r = Redis::shared();
    let delays: Vec<String> = (0..16).map(|i| format!("0.{:03}", 1 + 2 * i)).collect();
    let script = format!(
        "for d in {}; do (sleep $d; sleep 60; :) & done; exit 6",
        delays.join(" ")
    );
    for i in 0..10 {
        let run = exec_sh(&r, &["--kill-leftovers", "--grace", "10s"], "k", &script).run();
        assert!(
            run.code == 6 && run.stderr.is_empty(),
            "run {i}: exit {}, a leftover outlived its SIGTERM: {}",
            run.code,
            run.stderr
        );
    }
    assert!(!r.held("k"));
}

/// Every SIGKILL rlock sends says why, and about what: the command, or
/// what it left running. It always said "the command did not exit in
/// time", also after a second TERM (sent at once, no time involved) and
/// for a leftover of a command that had exited long before.
#[test]
fn each_sigkill_says_why() {
    let r = Redis::shared();
    let [ready, cmd] = paths("sigkill-why", ["ready", "cmd"]);
    let stubborn = format!(
        "trap '' TERM; touch {}; while :; do sleep 0.05; done",
        ready.display()
    );
    let started = |child: &std::process::Child| {
        eventually(Duration::from_secs(10), "the command to start", || {
            ready.exists()
        });
        child.id()
    };
    let one_line = |run: &Run, needle: &str| {
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(
            run.stderr.contains(needle),
            "{:?} lacks {needle:?}",
            run.stderr
        );
        assert!(!run.stderr.contains("in time"), "{}", run.stderr);
    };
    // The command outlived --grace after a TERM passed on.
    let child = exec_sh(&r, &["--grace", "300ms"], "k", &stubborn).spawn();
    kill(started(&child), libc::SIGTERM);
    let run = finish(child, "exec").code(137);
    one_line(&run, "the command did not exit within 300ms of SIGTERM");

    // A second TERM: SIGKILL at once.
    let _ = std::fs::remove_file(&ready);
    let child = exec_sh(&r, &["--grace", "1h"], "k", &stubborn).spawn();
    let pid = started(&child);
    kill(pid, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    kill(pid, libc::SIGTERM);
    let run = finish(child, "exec").code(137);
    one_line(&run, "a second SIGTERM");

    // --kill-leftovers: the command exited at once, its leftover ignores
    // the SIGTERM.
    let _ = std::fs::remove_file(&ready);
    let leftover = format!(
        "(trap '' TERM; touch {}; exec sleep 60) & exit 3",
        ready.display()
    );
    let run = exec_sh(
        &r,
        &["--kill-leftovers", "--grace", "300ms"],
        "k",
        &leftover,
    )
    .run()
    .code(3);
    one_line(
        &run,
        "what the command left running did not exit within 300ms",
    );

    // A TERM passed on after the command exited reaches what it left.
    let _ = std::fs::remove_file(&ready);
    let script = format!("echo $$ > {}; {leftover}", cmd.display());
    let child = exec_sh(&r, &["--grace", "300ms"], "k", &script).spawn();
    let pid = started(&child);
    let sh = wait_pid(&cmd);
    eventually(Duration::from_secs(10), "the command to be reaped", || {
        !Path::new(&format!("/proc/{sh}")).exists()
    });
    std::thread::sleep(Duration::from_millis(100));
    kill(pid, libc::SIGTERM);
    let run = finish(child, "exec").code(3);
    one_line(
        &run,
        "what the command left running did not exit within 300ms",
    );
    assert!(!r.held("k"));
}

#[test]
fn a_daemonized_leftover_dies_with_a_lost_lock() {
    let r = Redis::shared();
    let [ledger] = paths("daemon-loss", ["ledger"]);
    let script = format!(
        "setsid sh -c '{}' & wait",
        ticking(&ledger, "A").replace('"', "\\\"")
    );
    let child = exec_sh(&r, &["--ttl", "1s"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "ticks", || lines(&ledger) >= 3);
    delete_lock(&r, "k");
    finish(child, "exec").code(79);
    assert_no_more_lines(
        &ledger,
        Duration::from_millis(300),
        "the daemonized process ran on",
    );
}

#[test]
fn a_crashed_nested_exec_leaves_nothing_held() {
    // Item 4: the inner exec's re-entry was never undone, so the lock stayed
    // held for a TTL after the outer exec had ended.
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    // The inner command kills the inner rlock (its parent is the guard;
    // the guard's parent is rlock).
    let inner = format!("{bin} exec nest -- sh -c 'kill -9 $(cut -d\" \" -f4 /proc/$PPID/stat)'");
    rlock(&r)
        .args(["exec", "nest", "--ttl", "20s", "--", "sh", "-c", &inner])
        .run()
        .code(137);
    assert!(!r.held("nest"), "the lock outlived the outermost exec");
}

#[test]
fn a_full_stderr_pipe_does_not_delay_the_kill() {
    use std::os::fd::FromRawFd;
    let r = Redis::start();
    let [pidfile] = paths("stderr-full", ["pid"]);
    let script = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 0.05; done",
        pidfile.display()
    );
    let mut fds = [0; 2];
    // SAFETY: plain syscalls on our own pipe: fill it, then make it
    // blocking again so rlock's writes block.
    let (rd, wr) = unsafe {
        assert_eq!(
            libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC),
            0
        );
        let chunk = [b'x'; 4096];
        while libc::write(fds[1], chunk.as_ptr().cast(), chunk.len()) > 0 {}
        libc::fcntl(fds[1], libc::F_SETFL, 0);
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    let mut child = bare_rlock()
        .args([
            "--url",
            &r.url(),
            "exec",
            "--ttl",
            "1s",
            "--grace",
            "300ms",
            "k",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(wr)
        .spawn_plain();
    let cmd = wait_pid(&pidfile);
    delete_lock(&r, "k");
    // rlock blocks writing "lost" to the full pipe; the command, which
    // ignores SIGTERM, must be killed all the same.
    eventually(Duration::from_secs(10), "the command to be killed", || {
        !alive(cmd)
    });
    drop(rd); // unblock rlock (EPIPE)
    assert_eq!(child.wait().unwrap().code(), Some(79));
}

#[test]
fn status_shows_the_command_line_redacted() {
    let r = Redis::shared();
    let child = rlock(&r)
        .args([
            "exec",
            "k",
            "--",
            "env",
            "RLOCK_PASSWORD=hunter2",
            "sh",
            "-c",
            "sleep 2",
            "redis://user:s3cret@example:6379",
        ])
        .spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("k"));
    let st = rlock(&r).args(["status", "k"]).run().ok();
    let json = rlock(&r).args(["status", "k", "--json"]).run().ok();
    for out in [&st.stdout, &json.stdout] {
        assert!(out.contains("RLOCK_PASSWORD="), "{out}");
        assert!(!out.contains("hunter2") && !out.contains("s3cret"), "{out}");
    }
    let _ = finish(child, "exec");
}

/// Request bytes the server on loopback `port` has not read yet (IPv4
/// connections only, as the fixture binds 127.0.0.1).
fn unread_on(port: u16) -> u64 {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    tcp.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
            if local != port || *f.get(3)? != "01" {
                return None; // not an established connection to the server
            }
            u64::from_str_radix(f.get(4)?.split(':').nth(1)?, 16).ok()
        })
        .sum()
}

#[test]
fn a_grant_that_arrives_after_its_lease_expired_never_runs_the_command() {
    // Connecting needs no round trip (the kernel accepts for a stopped
    // server, and rlock sends no handshake), so the acquire itself sits in
    // the stopped server's socket; its grant comes back after the 200 ms
    // lease is over. exec must give it back and run on a fresh grant.
    let r = Redis::start();
    let f = r.fence_ahead("k");
    kill(r.child_pid(), libc::SIGSTOP);
    let child = bare_rlock()
        .args(["--url", &r.url(), "exec", "--ttl", "200ms", "k"])
        .args(["--", "sh", "-c", "echo $RLOCK_FENCE"])
        .spawn();
    eventually(
        Duration::from_secs(5),
        "the acquire to reach the stopped server",
        || unread_on(r.port) > 0,
    );
    std::thread::sleep(Duration::from_millis(700));
    kill(r.child_pid(), libc::SIGCONT);
    let run = finish(child, "exec").ok();
    let second = (f + 2).to_string();
    assert_eq!(run.stdout.trim(), second, "stderr: {}", run.stderr);
}

#[test]
fn min_hold_keeps_the_lock_taken_after_a_quick_success_only() {
    // The cron recipe: a 0.1 s job with --min-hold 3s keeps the lock taken
    // for 3 s after the grant, so a host that fires late skips.
    let r = Redis::shared();
    let started = Instant::now();
    rlock(&r)
        .args(["exec", "--min-hold", "3s", "k", "--", "sleep", "0.1"])
        .run()
        .ok();
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(started.elapsed()));
    rlock(&r).args(["exec", "-n", "k", "true"]).run().code(75);
    assert!(r.held("k"), "taken, by nobody running");
    std::thread::sleep(Duration::from_millis(3000).saturating_sub(started.elapsed()));
    eventually(Duration::from_secs(3), "the min-hold to end", || {
        rlock(&r).args(["exec", "-n", "k", "true"]).run().code == 0
    });
    // A min-hold shorter than the job changes nothing.
    rlock(&r)
        .args(["exec", "--min-hold", "100ms", "k2", "--", "sleep", "0.3"])
        .run()
        .ok();
    rlock(&r).args(["exec", "-n", "k2", "true"]).run().ok();
    // A failed job releases at once: the next host may retry.
    rlock(&r)
        .args(["exec", "--min-hold", "1h", "k3", "--", "false"])
        .run()
        .code(1);
    rlock(&r).args(["exec", "-n", "k3", "true"]).run().ok();
    // acquire --min-hold, and release --min-hold on a plain grant.
    let tok = rlock(&r)
        .args(["acquire", "--min-hold", "1h", "k4"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["release", "k4", "--token", &tok])
        .run()
        .ok();
    rlock(&r).args(["acquire", "-n", "k4"]).run().code(75);
    let tok = rlock(&r).args(["acquire", "k5"]).run().ok().token();
    rlock(&r)
        .args(["release", "k5", "--token", &tok, "--min-hold", "1h"])
        .run()
        .ok();
    rlock(&r).args(["acquire", "-n", "k5"]).run().code(75);
    // Releasing a parked lock again is harmless.
    rlock(&r)
        .args(["release", "k5", "--token", &tok])
        .run()
        .ok();
    rlock(&r).args(["acquire", "-n", "k5"]).run().code(75);
    // A parked token holds nothing for its holder: check says so (79, not
    // "another owner"), and a late re-entry with it does not take the
    // lock back (it acquires afresh, and the lock is taken).
    rlock(&r)
        .args(["check", "k5", "--token", &tok])
        .run()
        .code(79);
    rlock(&r)
        .args(["acquire", "-n", "k5"])
        .env("RLOCK_TOKEN", &tok)
        .run()
        .code(75);
    rlock(&r)
        .args(["exec", "--ttl", "30", "--min-hold", "5", "k6", "true"])
        .run()
        .fails(64, "no unit");
}

#[test]
fn three_hosts_run_the_cron_recipe_once_per_firing() {
    // Three "hosts" whose cron fires 0-200 ms apart (clock skew, slow
    // starts), 20 firings 1.5 s apart, each running
    // `rlock exec -n -E 0 --min-hold 800ms cron -- job`: exactly one run per
    // firing. (The issue's 0-2 s skew, scaled down to keep the suite fast:
    // what matters is min-hold > skew and the period > skew + min-hold,
    // each with room for a loaded machine's slow process starts.)
    let r = Redis::start();
    let [ledger] = paths("cron", ["ledger"]);
    let bin = env!("CARGO_BIN_EXE_rlock");
    let started = Instant::now();
    let mut hosts = Vec::new();
    for firing in 0..20u64 {
        let at = Duration::from_millis(1500 * firing);
        std::thread::sleep(at.saturating_sub(started.elapsed()));
        for (host, skew) in [(0, 0), (1, 100), (2, 200)] {
            let script = format!(
                "sleep {}; {bin} exec -n -E 0 --min-hold 800ms cron -- sh -c 'echo {firing} {host} >> {l}; sleep 0.05'",
                f64::from(skew) / 1000.0,
                l = ledger.display()
            );
            hosts.push(
                std::process::Command::new("sh")
                    .args(["-c", &script])
                    .env("RLOCK_URL", r.url())
                    .spawn()
                    .unwrap(),
            );
        }
    }
    for mut h in hosts {
        assert!(h.wait().unwrap().success());
    }
    let text = read(&ledger);
    for firing in 0..20 {
        let runs = text
            .lines()
            .filter(|l| l.split(' ').next() == Some(&firing.to_string()))
            .count();
        assert_eq!(runs, 1, "firing {firing} ran {runs} times:\n{text}");
    }
}

#[test]
fn an_acquire_that_cannot_print_its_token_frees_the_lock_despite_min_hold() {
    // Nobody can learn the token, so the grant is given back at once, as a
    // failed exec's is: honouring --min-hold there parked the lock for the
    // whole minimum ("lock released", yet busy for an hour).
    let r = Redis::shared();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = rlock(&r)
        .args(["acquire", "--min-hold", "1h", "k"])
        .stdout(full)
        .stderr(std::process::Stdio::piped())
        .spawn_plain()
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{err}");
    assert!(err.contains("lock released"), "{err}");
    let tok = rlock(&r).args(["acquire", "-n", "k"]).run().ok().token();
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn after_the_command_exits_ctrl_c_and_ctrl_z_reach_rlock_not_its_leftovers() {
    // The command exits, leaving `sleep 30 &` behind: rlock holds the lock
    // for it. The terminal must come back to rlock's job then, as a shell
    // takes it back once its job's processes exit. Left with the leftover's
    // group, Ctrl-Z stopped the leftover, which nobody ever continued (the
    // lock was held for ever), and Ctrl-C reached only the leftover, which
    // ignores it (a script's `&`): rlock could not be interrupted.
    let r = Redis::shared();
    let [left, code] = paths("tty-leftover", ["left", "code"]);
    let mut bash = under_pty(&r, "bash --norc --noprofile -i");
    let mut say = |s: &str| type_into(&mut bash, s.as_bytes());
    say(&format!(
        "$BIN exec --grace 1s k -- bash -c 'sleep 30 & echo $! > {l}; exit 3'\n",
        l = left.display(),
    ));
    let lo = wait_pid(&left);
    // Once the command is reaped, the leftover's parent is the guard.
    let guard_of = || {
        let g = ppid(lo);
        (stat(g).first().map(String::as_str) != Some("Z")
            && std::fs::read_to_string(format!("/proc/{g}/comm"))
                .is_ok_and(|c| c.trim() == "rlock-guard"))
        .then_some(g)
    };
    eventually(Duration::from_secs(10), "the command to exit", || {
        guard_of().is_some()
    });
    let rl = ppid(guard_of().unwrap());
    let rlock_group = stat(rl)[2].clone();
    eventually(
        Duration::from_secs(10),
        "rlock to take the terminal back",
        || stat(lo).get(5) == Some(&rlock_group),
    );
    say("\x1a"); // Ctrl-Z: stops rlock's job, not the leftover
    eventually(Duration::from_secs(20), "rlock to stop", || stopped(rl));
    assert!(!stopped(lo));
    say("fg\n");
    eventually(Duration::from_secs(20), "rlock to run again", || {
        !stopped(rl)
    });
    eventually(
        Duration::from_secs(10),
        "the terminal back with rlock",
        || stat(lo).get(5) == Some(&rlock_group),
    );
    assert!(r.held("k"));
    say("\x03"); // Ctrl-C: rlock passes it on; SIGKILL after the grace
    eventually(Duration::from_secs(20), "rlock to exit", || !alive(rl));
    // `fg` returns the job's exit status.
    say(&format!("echo $? > {c}\n", c = code.display()));
    await_written(&code, Duration::from_secs(10), "the exit code");
    assert_eq!(read(&code).trim(), "3");
    assert!(!alive(lo), "the leftover runs on");
    assert!(!r.held("k"));
    say("exit\n");
    bash.wait().unwrap();
}

#[test]
fn after_bg_and_fg_the_command_gets_the_terminal_when_it_reads() {
    // Ctrl-Z, `bg`, `fg`: bash gives the terminal to rlock's job and sends
    // no SIGCONT (the job runs), so rlock cannot tell; the command, still
    // in the background, gets SIGTTIN when it reads. rlock then owns the
    // terminal and must hand it over, not stop the job that was just
    // brought to the foreground (the user had to type `fg` twice).
    let r = Redis::shared();
    let [pidfile, go, out] = paths("tty-bg-fg", ["pid", "go", "out"]);
    let mut bash = under_pty(&r, "bash --norc --noprofile -i");
    let mut say = |s: &str| type_into(&mut bash, s.as_bytes());
    say(&format!(
        "$BIN exec k -- bash -c 'echo $$ > {p}; while [ ! -e {g} ]; do sleep 0.05; done; \
         read x; echo got=$x > {o}'\n",
        p = pidfile.display(),
        g = go.display(),
        o = out.display(),
    ));
    let cmd = wait_pid(&pidfile);
    let rl = rlock_of(cmd);
    let rlock_group = stat(rl)[2].clone();
    say("\x1a"); // Ctrl-Z
    eventually(Duration::from_secs(20), "rlock to stop its job", || {
        stopped(rl)
    });
    say("bg\n");
    eventually(Duration::from_secs(20), "the job to run again", || {
        !stopped(rl) && !stopped(cmd)
    });
    say("fg\n");
    eventually(
        Duration::from_secs(20),
        "bash to give rlock the terminal",
        || stat(rl).get(5) == Some(&rlock_group),
    );
    std::fs::write(&go, "").unwrap();
    eventually(
        Duration::from_secs(20),
        "the command to own the terminal",
        || stat(cmd).get(5) == stat(cmd).get(2),
    );
    say("typed\n");
    await_written(&out, Duration::from_secs(20), "the command to read");
    assert_eq!(read(&out).trim(), "got=typed");
    say("exit\n");
    bash.wait().unwrap();
    r.assert_nothing_held(&[]);
}

#[test]
fn exec_in_the_background_of_a_script_leaves_the_script_the_terminal() {
    // `rlock exec ... &` in a script: the shell has no job control, so
    // rlock stays in the script's group, which owns the terminal. The
    // command must not take the terminal from it: the script stopped
    // (SIGTTIN) at its next read, and the user's shell showed it stopped.
    let r = Redis::shared();
    let [pidfile, out] = paths("tty-script-bg", ["pid", "out"]);
    let mut bash = under_pty(&r, "bash --norc --noprofile -i");
    let mut say = |s: &str| type_into(&mut bash, s.as_bytes());
    say(&format!(
        "bash -c '$BIN exec k -- sh -c \"echo \\$\\$ > {p}; sleep 5\" & read x; echo got=$x > {o}; wait'\n",
        p = pidfile.display(),
        o = out.display()
    ));
    let cmd = wait_pid(&pidfile);
    let script = ppid(rlock_of(cmd));
    let script_group = stat(script)[2].clone();
    assert_eq!(stat(cmd).get(5), Some(&script_group), "{:?}", stat(cmd));
    say("typed\n");
    await_written(&out, Duration::from_secs(20), "the script to read");
    assert_eq!(read(&out).trim(), "got=typed");
    say("exit\n");
    bash.wait().unwrap();
}

#[test]
fn a_nested_exec_stops_and_continues_with_its_job() {
    // `rlock exec k -- rlock exec k -- CMD` on a terminal, Ctrl-Z then
    // `fg`: the outer exec continues its whole tree, the inner command
    // with it, before the inner exec has given it the terminal back; the
    // command must end up reading the terminal, in one `fg`.
    let r = Redis::shared();
    let [pidfile, out, code] = paths("tty-nested", ["pid", "out", "code"]);
    let mut bash = under_pty(&r, "bash --norc --noprofile -i");
    let mut say = |s: &str| type_into(&mut bash, s.as_bytes());
    say(&format!(
        "$BIN exec k -- $BIN exec k -- bash -c 'echo $$ > {p}; read x; echo got=$x > {o}'\n",
        p = pidfile.display(),
        o = out.display(),
    ));
    let cmd = wait_pid(&pidfile);
    let inner = rlock_of(cmd);
    let outer = rlock_of(inner);
    eventually(
        Duration::from_secs(10),
        "the command to own the terminal",
        || stat(cmd).get(5) == stat(cmd).get(2),
    );
    say("\x1a"); // Ctrl-Z
    eventually(Duration::from_secs(20), "the outer rlock to stop", || {
        stopped(outer)
    });
    say("fg\n");
    eventually(
        Duration::from_secs(20),
        "the command to own the terminal",
        || stat(cmd).get(5) == stat(cmd).get(2) && [outer, inner, cmd].iter().all(|&p| !stopped(p)),
    );
    say("typed\n");
    await_written(&out, Duration::from_secs(20), "the command to read");
    assert_eq!(read(&out).trim(), "got=typed");
    eventually(Duration::from_secs(20), "rlock to exit", || !alive(outer));
    say(&format!("echo $? > {c}\n", c = code.display()));
    await_written(&code, Duration::from_secs(10), "the exit code");
    assert_eq!(read(&code).trim(), "0");
    assert!(!r.held("k"));
    say("exit\n");
    bash.wait().unwrap();
}

#[test]
fn a_lost_lock_gives_the_terminal_back_from_a_killed_sub_job() {
    // The command is an interactive shell that gave the terminal to a job
    // of its own (`sleep 100`, then `fg`). The lock is lost, the tree
    // killed: the terminal's foreground group is then an empty one that
    // is not the command's, and it stayed there. The script that ran
    // `rlock exec` could not read the terminal after it (SIGTTIN, or EIO
    // in an orphaned group as here).
    let r = Redis::shared();
    let [pidfile, code, out] = paths("tty-dead-fg", ["pid", "code", "out"]);
    let inner = format!(
        "$BIN exec --ttl 3s --on-lost kill k -- bash --norc --noprofile -i; echo $? > {c}; \
         read x; echo got=$x > {o}",
        c = code.display(),
        o = out.display()
    );
    let mut child = under_pty(&r, &inner);
    eventually(Duration::from_secs(10), "the lock", || r.held("k"));
    type_into(
        &mut child,
        format!("sleep 100 & echo $! > {p}; fg\n", p = pidfile.display()).as_bytes(),
    );
    let sl = wait_pid(&pidfile);
    eventually(
        Duration::from_secs(10),
        "the sub-job to own the terminal",
        || {
            let st = stat(sl);
            st.len() > 5 && st[5] == st[2]
        },
    );
    delete_lock(&r, "k");
    await_written(&code, Duration::from_secs(20), "rlock to exit");
    assert_eq!(read(&code).trim(), "79");
    type_into(&mut child, b"typed\n");
    await_written(&out, Duration::from_secs(10), "the script to read");
    assert_eq!(read(&out).trim(), "got=typed");
    child.wait().unwrap();
}

#[test]
fn on_lost_ignore_a_job_stopped_past_its_lease_still_resumes() {
    // `--on-lost ignore`: the guard has no kill deadline, so a job stopped
    // (Ctrl-Z) past its lease is not killed; `fg` must continue it, not
    // leave it stopped for ever under a running rlock.
    let r = Redis::shared();
    let [pidfile, go, out, code] = paths("tty-ignore-stop", ["pid", "go", "out", "code"]);
    let mut bash = under_pty(&r, "bash --norc --noprofile -i");
    let mut say = |s: &str| type_into(&mut bash, s.as_bytes());
    say(&format!(
        "$BIN exec --ttl 1s --on-lost ignore k -- bash -c 'echo $$ > {p}; \
         while [ ! -e {g} ]; do sleep 0.05; done; echo done > {o}'\n",
        p = pidfile.display(),
        g = go.display(),
        o = out.display(),
    ));
    let cmd = wait_pid(&pidfile);
    let rl = rlock_of(cmd);
    say("\x1a"); // Ctrl-Z
    eventually(Duration::from_secs(20), "rlock to stop its job", || {
        stopped(rl)
    });
    // Well past the 1 s lease.
    eventually(Duration::from_secs(20), "the lease to run out", || {
        !r.held("k")
    });
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&go, "").unwrap();
    say("fg\n");
    await_written(&out, Duration::from_secs(20), "the command to finish");
    eventually(Duration::from_secs(20), "rlock to exit", || !alive(rl));
    say(&format!("echo $? > {c}\n", c = code.display()));
    await_written(&code, Duration::from_secs(10), "the exit code");
    assert_eq!(read(&code).trim(), "79");
    say("exit\n");
    bash.wait().unwrap();
}

/// A FIFO at `path`, and a command line that exits when someone opens it
/// for writing and closes it again (see [`end_fifo`]).
fn fifo_waiter(path: &Path) -> String {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a plain syscall on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    format!("exec cat {} >/dev/null", path.display())
}

/// Let the command of [`fifo_waiter`] exit: open the FIFO for writing
/// (which waits for the command to have it open) and close it.
fn end_fifo(path: &Path) {
    drop(std::fs::OpenOptions::new().write(true).open(path).unwrap());
}

/// `( sleep 0.15; redis-cli debug sleep 1.5 ) & rlock exec --ttl 1s k --
/// sleep 0.3` exited 79: the command ended well inside its lease, but
/// the release reached Redis only after the lease had run out there, and
/// "not held" was taken for a loss. Here Redis is frozen before the
/// command ends and thawed only after the lease is over on the server:
/// the command's exit code stands, and one line says the release came
/// late.
#[test]
fn a_release_that_comes_after_the_lease_ended_is_no_loss_if_the_command_ended_inside_it() {
    let r = Redis::start();
    let [started, go] = paths("late-release", ["started", "go"]);
    let script = format!(": > {}; {}", started.display(), fifo_waiter(&go));
    // A long --connect-timeout: the release waits for the thawed Redis
    // instead of being sent again.
    let child = exec_sh(
        &r,
        &["--ttl", "3s", "--connect-timeout", "20s"],
        "k",
        &script,
    )
    .spawn();
    eventually(Duration::from_secs(10), "the command to start", || {
        started.exists()
    });
    kill(r.child_pid(), libc::SIGSTOP);
    end_fifo(&go);
    // Frozen for longer than any lease granted or renewed before the
    // freeze can last (3 s).
    std::thread::sleep(Duration::from_millis(3500));
    kill(r.child_pid(), libc::SIGCONT);
    let run = finish(child, "exec").ok();
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.starts_with("rlock: ") && run.stderr.contains("after the lease"),
        "{}",
        run.stderr
    );
    r.assert_nothing_held(&[]);
}

/// The other side of the test above: a command that ended after its lease
/// was no longer valid (`--on-lost ignore` lets it run on while Redis is
/// frozen) is a loss, 79, however late the release was answered.
#[test]
fn a_command_that_ended_after_its_lease_ran_out_is_a_loss_even_with_a_late_release() {
    let r = Redis::start();
    let [started, go] = paths("late-release-lost", ["started", "go"]);
    let script = format!(": > {}; {}", started.display(), fifo_waiter(&go));
    let opts = [
        "--ttl",
        "1s",
        "--connect-timeout",
        "20s",
        "--on-lost",
        "ignore",
    ];
    let child = exec_sh(&r, &opts, "k", &script).spawn();
    eventually(Duration::from_secs(10), "the command to start", || {
        started.exists()
    });
    kill(r.child_pid(), libc::SIGSTOP);
    // Past the lease (1 s from the grant, before `started`) on any clock.
    std::thread::sleep(Duration::from_millis(1500));
    end_fifo(&go);
    std::thread::sleep(Duration::from_millis(200));
    kill(r.child_pid(), libc::SIGCONT);
    finish(child, "exec").fails_with_lines(79, "lost");
}
