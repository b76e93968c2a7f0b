//! What the command leaves running, and rlock killed: the tree is held
//! for, or killed with, the command.

use super::*;

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
