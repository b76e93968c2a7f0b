//! A busy lock: exit codes without waiting, timeouts, waiters served in
//! order, limits, interrupted waits, many contenders.

use std::io::Read;
use std::time::Duration;

use crate::util::*;

#[test]
fn busy_no_wait_exits_75_or_the_conflict_code() {
    let r = Redis::shared();
    rlock(&r).args(["acquire", "k"]).run().ok();
    rlock(&r)
        .args(["acquire", "-n", "k"])
        .run()
        .fails(75, "busy");
    rlock(&r)
        .args(["acquire", "-n", "-E", "0", "k"])
        .run()
        .code(0);
    rlock(&r)
        .args(["acquire", "--no-wait", "--conflict-exit-code", "3", "k"])
        .run()
        .code(3);
    // -w 0s means "try once" too.
    rlock(&r).args(["acquire", "-w", "0s", "k"]).run().code(75);
}

#[test]
fn wait_times_out_with_75_and_leaves_the_queue() {
    let r = Redis::shared();
    rlock(&r)
        .args(["acquire", "k"])
        .by_another_process()
        .run()
        .ok();
    let run = rlock(&r)
        .args(["acquire", "-w", "300ms", "k"])
        .run()
        .code(75);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    assert!(
        lines[0].contains("waiting for lock \"k\" held by host"),
        "{}",
        run.stderr
    );
    assert!(lines[1].contains("timed out"), "{}", run.stderr);
    assert!(run.elapsed >= Duration::from_millis(300));
    assert_eq!(r.status_json("k")["waiting"], 0);
    // -q silences the waiting line, not the error.
    rlock(&r)
        .args(["-q", "acquire", "-w", "100ms", "k"])
        .run()
        .fails(75, "timed out");
}

#[test]
fn waiter_gets_the_lock_when_it_is_released() {
    let r = Redis::shared();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    let waiter = rlock(&r).args(["acquire", "k"]).spawn();
    r.await_waiters("k", 1);
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    let got = finish(waiter, "waiter").ok();
    assert_ne!(got.token(), tok);
    assert_eq!(r.status_json("k")["held"], true);
}

#[test]
fn waiter_gets_the_lock_when_the_holder_expires_without_release() {
    let r = Redis::shared();
    rlock(&r)
        .args(["acquire", "k", "--ttl", "700ms"])
        .run()
        .ok();
    let run = rlock(&r).args(["acquire", "k", "-w", "10s"]).run().ok();
    run.token();
    // Woken when the holder's lease ends (0.7 s), not at the waiter's next
    // heartbeat (5 s) nor at the end of its 10 s wait: 3 s leaves a loaded
    // machine 2.3 s of slack.
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
}

#[test]
fn limit_admits_n_holders_and_refuses_another_n() {
    let r = Redis::shared();
    for _ in 0..2 {
        rlock(&r)
            .args(["acquire", "--limit", "2", "-n", "pool"])
            .run()
            .ok();
    }
    rlock(&r)
        .args(["acquire", "--limit", "2", "-n", "pool"])
        .run()
        .fails(75, "busy");
    let st = r.status_json("pool");
    assert_eq!(
        (
            st["limit"].as_u64(),
            st["holders"].as_array().unwrap().len()
        ),
        (Some(2), 2)
    );
    rlock(&r)
        .args(["acquire", "--limit", "3", "-n", "pool"])
        .run()
        .fails(64, "--limit 2, not 3");
    rlock(&r)
        .args(["acquire", "-n", "pool"])
        .run()
        .fails(64, "--limit 2, not 1");
    let text = rlock(&r).args(["status", "pool"]).run().ok();
    assert!(
        text.stdout.starts_with("pool: 2 of 2 slots held\n"),
        "{}",
        text.stdout
    );
}

#[test]
fn sigint_while_waiting_exits_130_and_leaves_nothing() {
    let r = Redis::shared();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    let waiter = rlock(&r).args(["acquire", "k"]).spawn();
    r.await_waiters("k", 1);
    kill(waiter.id(), libc::SIGINT);
    let run = finish(waiter, "waiter").code(130);
    assert!(
        run.stderr
            .ends_with("interrupted by signal 2 while waiting; nothing is held\n"),
        "{}",
        run.stderr
    );
    // From the signal to the exit: the wait ends at once, not at the
    // waiter's next heartbeat (5 s); 3 s leaves a loaded machine room.
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
    assert_eq!(r.status_json("k")["waiting"], 0);
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn waiters_are_served_in_arrival_order() {
    let r = Redis::shared();
    let f = r.fence_ahead("q");
    let tok = rlock(&r).args(["acquire", "q"]).run().ok().token();
    let mut waiters = Vec::new();
    for i in 1..=5 {
        let child = rlock(&r).args(["acquire", "q"]).spawn();
        r.await_waiters("q", i);
        waiters.push(child);
    }
    let mut order = Vec::new();
    let mut held = tok;
    for mut w in waiters.into_iter() {
        rlock(&r)
            .args(["release", "q", "--token", &held])
            .run()
            .ok();
        let mut out = String::new();
        let _ = w.wait().unwrap();
        w.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        held = out.trim().to_string();
        order.push(r.status_json("q")["holders"][0]["fence"].as_u64().unwrap());
    }
    // Each waiter in turn got the next grant: a later one never overtook.
    assert_eq!(order, [f + 2, f + 3, f + 4, f + 5, f + 6]);
}

#[test]
fn contention_many_processes_never_overlap() {
    // 8 shell loops, each taking the lock through the CLI and checking that
    // nobody else is inside: a counter that must read 1 while held.
    let r = Redis::start();
    let script = r#"
        for i in 1 2 3 4 5; do
          tok=$("$BIN" acquire c -w 60s) || exit 10
          n=$(redis-cli -p "$PORT" INCR inside)
          [ "$n" = 1 ] || { echo "overlap: $n holders" >&2; exit 11; }
          redis-cli -p "$PORT" DECR inside >/dev/null
          "$BIN" release c --token "$tok" || exit 12
        done"#;
    let f = r.fence_ahead("c");
    contenders(8, script, &r.url(), &r);
    assert_eq!(r.status_json("c")["fence"], f + 40);
    r.assert_nothing_held(&["inside"]);
}
