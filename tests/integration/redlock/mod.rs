//! RedLock over several independent redis-server processes.

use std::time::{Duration, Instant};

use crate::util::*;

fn masters(n: usize) -> Vec<Redis> {
    (0..n).map(|_| Redis::start()).collect()
}

fn urls(ms: &[Redis]) -> String {
    ms.iter().map(Redis::url).collect::<Vec<_>>().join(",")
}

fn rl(ms: &[Redis]) -> Rlock {
    bare_rlock().env("RLOCK_URL", &urls(ms))
}

fn held_on(m: &Redis, key: &str) -> bool {
    m.held(key)
}

fn freeze(m: &Redis) {
    kill(m.child_pid(), libc::SIGSTOP);
}

fn thaw(m: &Redis) {
    kill(m.child_pid(), libc::SIGCONT);
}

#[test]
fn acquire_and_release_on_every_master() {
    let ms = masters(3);
    let tok = rl(&ms)
        .args(["acquire", "--ttl", "2s", "k"])
        .run()
        .ok()
        .token();
    // acquire returns once a majority granted; the last master may get
    // its request a moment later, or not before the process exits.
    assert!(ms.iter().filter(|m| held_on(m, "k")).count() >= 2);
    rl(&ms).args(["acquire", "-n", "k"]).run().fails(75, "busy");
    rl(&ms).args(["release", "k", "--token", &tok]).run().ok();
    // A master whose grant arrived after the majority's (the process had
    // exited) may keep it until its TTL; never longer.
    eventually(Duration::from_secs(5), "every master to be free", || {
        ms.iter().all(|m| !held_on(m, "k"))
    });
    for m in &ms {
        m.assert_nothing_held(&[]);
    }
}

#[test]
fn a_minority_holding_the_key_cannot_block_or_be_kept() {
    // One master already holds the key for someone else: a majority is
    // still reachable, so the lock is granted; the failed attempts of a
    // second client leave nothing behind on the others.
    let ms = masters(3);
    rlock(&ms[0]).args(["acquire", "k"]).run().ok();
    let tok = rl(&ms).args(["acquire", "-n", "k"]).run().ok().token();
    rl(&ms).args(["acquire", "-n", "k"]).run().fails(75, "busy");
    rl(&ms).args(["release", "k", "--token", &tok]).run().ok();
    assert!(!held_on(&ms[1], "k") && !held_on(&ms[2], "k"));
}

/// The fastest of three `rlock acquire` runs over `ms`, one per key, each
/// released again.
fn fastest_acquire(ms: &[Redis], keys: [&str; 3]) -> Duration {
    let mut fastest = Duration::MAX;
    for key in keys {
        let started = Instant::now();
        let run = rl(ms).args(["acquire", key]).run();
        fastest = fastest.min(started.elapsed());
        let release = rl(ms)
            .args(["release", key, "--token", run.stdout.trim()])
            .run();
        run.ok().token();
        release.ok();
    }
    fastest
}

#[test]
fn one_frozen_master_does_not_slow_acquire() {
    // A frozen master costs at most its timeout, 500 ms: never the
    // fan-out's deadline (connect and reply, 1 s) nor a wait until it
    // thaws. (On a busy machine runs often do pay the 500 ms, all three
    // at ~540 ms against ~10 ms with every master up; see the CHANGELOG.) The
    // fastest of three runs, against the fastest of three with every
    // master up: a moment of load slows one run, not all three.
    let ms = masters(3);
    let base = fastest_acquire(&ms, ["b1", "b2", "b3"]);
    freeze(&ms[2]);
    let took = fastest_acquire(&ms, ["k1", "k2", "k3"]);
    thaw(&ms[2]);
    eprintln!("acquire: {base:?} with 3 masters up, {took:?} with 1 of 3 frozen (fastest of 3)");
    assert!(
        took < base + Duration::from_millis(800),
        "{took:?} with one master frozen, {base:?} without"
    );
}

#[test]
fn a_frozen_majority_fails_cleanly_with_69() {
    let ms = masters(3);
    freeze(&ms[1]);
    freeze(&ms[2]);
    let run = rl(&ms).args(["acquire", "-n", "k"]).run();
    thaw(&ms[1]);
    thaw(&ms[2]);
    run.fails(69, "RedLock needs 2");
    // The one master that answered was released again.
    assert!(!held_on(&ms[0], "k"));
}

#[test]
fn exec_loses_the_lock_when_a_majority_stops_answering() {
    let ms = masters(3);
    let dir = rlock_test_support::scratch_dir("redlock");
    let ready = dir.join("ready");
    let term = dir.join("term");
    let script = format!(
        "trap 'touch {t}; exit 0' TERM; touch {r}; while :; do sleep 0.01; done",
        t = term.display(),
        r = ready.display()
    );
    let child = rl(&ms)
        .args(["exec", "--ttl", "1500ms", "k", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the command to start", || {
        ready.exists()
    });
    freeze(&ms[0]);
    freeze(&ms[1]);
    let run = finish(child, "exec");
    thaw(&ms[0]);
    thaw(&ms[1]);
    run.fails_with_lines(79, "lost");
    assert!(term.exists(), "the command was not sent SIGTERM");
}

#[test]
fn exclusion_holds_across_five_masters() {
    let ms = masters(5);
    let bin = env!("CARGO_BIN_EXE_rlock");
    let body = format!(
        "n=$(redis-cli -p {p} INCR inside); [ \"$n\" = 1 ] || exit 99; redis-cli -p {p} DECR inside >/dev/null",
        p = ms[0].port
    );
    let script =
        format!("for i in 1 2 3 4 5; do {bin} exec -w 60s c -- sh -c '{body}' || exit $?; done");
    contenders(6, &script, &urls(&ms), &ms[0]);
    // Fencing under RedLock: the maximum of the granting majority.
    let st: serde_json::Value = serde_json::from_str(
        &rlock(&ms[0])
            .args(["status", "c", "--json"])
            .run()
            .ok()
            .stdout,
    )
    .unwrap();
    assert!(st["fence"].as_u64().unwrap() >= 1);
}

#[test]
fn rw_and_limit_are_refused_under_redlock() {
    let ms = masters(3);
    rl(&ms).args(["rw", "read", "k"]).run().fails(64, "RedLock");
    rl(&ms)
        .args(["acquire", "--limit", "2", "k"])
        .run()
        .fails(64, "RedLock");
    rl(&ms)
        .args(["acquire", "k"])
        .env("RLOCK_URL", &format!("{},{}", ms[0].url(), ms[0].url()))
        .run()
        .fails(64, "named twice");
}

#[test]
fn nested_exec_reenters_under_redlock() {
    let ms = masters(3);
    let bin = env!("CARGO_BIN_EXE_rlock");
    let inner = format!("{bin} exec -n k -- true");
    rl(&ms)
        .args(["exec", "k", "--", "sh", "-c", &inner])
        .run()
        .ok();
    for m in &ms {
        m.assert_nothing_held(&[]);
    }
}

#[test]
fn a_dead_master_and_a_busy_lock_mean_busy_not_unreachable() {
    let mut ms = masters(3);
    let holder = rl(&ms).args(["acquire", "k"]).run().ok().token();
    // acquire returns once a majority granted; the third master's request
    // may not have been sent before the process exited (rlock promises a
    // majority, not every master). Stop a master the lock is not on, if
    // any, so that both left hold it.
    let free = ms.iter().position(|m| !held_on(m, "k")).unwrap_or(2);
    let dead = ms.remove(free).url();
    assert!(ms.iter().all(|m| held_on(m, "k")));
    let urls = format!("{},{},{dead}", ms[0].url(), ms[1].url());
    let with = |args: &[&str]| bare_rlock().env("RLOCK_URL", &urls).args(args).run();
    with(&["acquire", "-n", "k"]).fails(75, "busy");
    with(&["acquire", "-w", "500ms", "k"]).fails_with_lines(75, "timed out");
    with(&["release", "k", "--token", &holder]).ok();
    with(&["acquire", "-n", "k"]).ok().token();
}

#[test]
fn a_release_right_after_acquire_leaves_nothing_on_any_master() {
    // acquire returns at a majority; the last master's grant may still be
    // on its way, and the release must come after it, not be skipped.
    let ms = masters(3);
    let opts = rlock::ConnectOptions {
        urls: ms.iter().map(Redis::url).collect(),
        ..Default::default()
    };
    let mut l = rlock::Locker::connect(&opts, "rlock:").unwrap();
    let req = try_once();
    for i in 0..50 {
        let key = format!("k{i}");
        let lease = l.acquire(&key, &req, None, &mut |_| {}).unwrap();
        l.release(&key, &lease.token).unwrap();
    }
    for m in &ms {
        m.assert_nothing_held(&[]);
    }
}

/// A library handle over `ms`, with no memory of earlier runs (like a new
/// rlock process).
fn quorum(ms: &[&Redis]) -> rlock::Locker {
    let opts = rlock::ConnectOptions {
        urls: ms.iter().map(|m| m.url()).collect(),
        ..Default::default()
    };
    rlock::Locker::connect(&opts, "rlock:").unwrap()
}

fn try_once() -> rlock::Request {
    rlock::Request::builder(Duration::from_secs(30))
        .wait(rlock::Wait::No)
        .build()
        .unwrap()
}

fn counter(m: &Redis, key: &str) -> u64 {
    let v: Option<u64> = m.cmd(&["GET", &format!("rlock:{{{key}}}:fence")]);
    v.unwrap_or(0)
}

/// One grant of `key` by a fresh handle over `ms` while `blocked` holds it
/// for someone else, so exactly the other masters can grant it; released
/// again. Returns the fence.
fn grant_around(ms: &[Redis], blocked: &Redis, key: &str) -> u64 {
    let other = rlock(blocked).args(["acquire", key]).run().ok().token();
    let mut l = quorum(&ms.iter().collect::<Vec<_>>());
    let lease = l.acquire(key, &try_once(), None, &mut |_| {}).unwrap();
    l.release(key, &lease.token).unwrap();
    rlock(blocked)
        .args(["release", key, "--token", &other])
        .run()
        .ok();
    lease.fence
}

#[test]
fn fences_never_go_backwards_when_one_master_runs_ahead() {
    // Failed attempts that a minority granted push one master's counter
    // ahead of the others: B and C hold the key for someone else, and each
    // `acquire -n` takes A's grant and gives it back.
    let ms = masters(3);
    let (a, b, c) = (&ms[0], &ms[1], &ms[2]);
    // The same last fence on every master, kept for the whole test.
    let x = a.fence_ahead("k");
    for m in [b, c] {
        let _: () = m.cmd(&["SET", "rlock:{k}:fence", &x.to_string(), "PX", "3600000"]);
    }
    let tb = rlock(b).args(["acquire", "k"]).run().ok().token();
    let tc = rlock(c).args(["acquire", "k"]).run().ok().token();
    for _ in 0..3 {
        rl(&ms).args(["acquire", "-n", "k"]).run().fails(75, "busy");
    }
    // (as many more failed attempts would)
    let _: i64 = a.cmd(&["INCRBY", "rlock:{k}:fence", "8"]);
    assert!(counter(a, "k") >= x + 10 && counter(b, "k") == x + 1);
    rlock(b).args(["release", "k", "--token", &tb]).run().ok();
    rlock(c).args(["release", "k", "--token", &tc]).run().ok();
    // Now A and B grant (C is held), then B and C (A is held), then all:
    // taking the maximum of whoever granted gave x+11, then x+2 (or x+3),
    // then x+12.
    let fences = [
        grant_around(&ms, c, "k"),
        grant_around(&ms, a, "k"),
        grant_around(&ms, b, "k"),
    ];
    let mut l = quorum(&ms.iter().collect::<Vec<_>>());
    let last = l.acquire("k", &try_once(), None, &mut |_| {}).unwrap();
    l.release("k", &last.token).unwrap();
    let all = [fences[0], fences[1], fences[2], last.fence];
    eprintln!("fences {all:?}");
    assert!(all.windows(2).all(|w| w[0] < w[1]), "fences {all:?}");
    // A majority of the counters stand at the last fence: they agreed on it.
    let at_last = ms.iter().filter(|m| counter(m, "k") == last.fence).count();
    assert!(at_last >= 2, "fences {all:?}");
}

mod masters;
mod outages;
mod waiters;
