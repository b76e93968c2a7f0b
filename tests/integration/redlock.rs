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
    let dir = std::env::temp_dir().join(format!("rlock-redlock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
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
    let mut req = rlock::Request::new(Duration::from_secs(30));
    req.wait = rlock::Wait::No;
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
    let mut req = rlock::Request::new(Duration::from_secs(30));
    req.wait = rlock::Wait::No;
    req
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

#[test]
fn two_urls_of_one_server_are_refused() {
    let ms = masters(2);
    let alias = format!("redis://localhost:{}", ms[0].port);
    let urls = format!("{},{alias},{}", ms[0].url(), ms[1].url());
    let run = bare_rlock()
        .env("RLOCK_URL", &urls)
        .args(["acquire", "-n", "k"])
        .run()
        .fails(64, "same Redis server");
    assert!(
        run.stderr.contains(&ms[0].url()) && run.stderr.contains(&alias),
        "{}",
        run.stderr
    );
    for m in &ms {
        m.assert_nothing_held(&[]);
    }
    // A unix socket of the same server; and a master that is down does
    // not keep the others from being checked.
    let sock = format!("unix://{}", ms[1].socket().display());
    let dead = format!("redis://127.0.0.1:{}", free_port());
    let urls = format!("{},{dead},{sock}", ms[1].url());
    bare_rlock()
        .env("RLOCK_URL", &urls)
        .args(["status", "k"])
        .run()
        .fails(64, "same Redis server");
}

#[test]
fn the_same_server_is_named_in_no_message_with_its_password() {
    let m = Redis::start_with(&["--requirepass", "hunter2"]);
    let other = Redis::start_with(&["--requirepass", "hunter2"]);
    let a = format!("redis://:hunter2@127.0.0.1:{}", m.port);
    let b = format!("redis://:hunter2@localhost:{}", m.port);
    let c = format!("redis://:hunter2@127.0.0.1:{}", other.port);
    let run = bare_rlock()
        .env("RLOCK_URL", &format!("{a},{b},{c}"))
        .args(["acquire", "-n", "k"])
        .run()
        .fails(64, "same Redis server");
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("redis://***@localhost:{}", m.port)),
        "{}",
        run.stderr
    );
}

#[test]
fn a_master_met_later_is_checked_when_it_first_answers() {
    let ms = masters(2);
    let alias = Redis::url(&ms[0]).replace("127.0.0.1", "localhost");
    let opts = rlock::ConnectOptions {
        urls: vec![ms[0].url(), alias, ms[1].url()],
        connect_timeout: Duration::from_millis(200),
        ..Default::default()
    };
    let mut l = rlock::Locker::connect(&opts, "rlock:").unwrap();
    // The server behind the first two URLs is frozen: too few answer.
    freeze(&ms[0]);
    let first = l.acquire("k", &try_once(), None, &mut |_| {});
    thaw(&ms[0]);
    assert!(
        matches!(first, Err(rlock::Error::Unavailable { .. })),
        "{first:?}"
    );
    // Once both answer, the duplicate is refused. (Their threads may still
    // be busy with the first call for a moment: until then a call fails,
    // or succeeds on the first URL and the other master, two servers.)
    let started = Instant::now();
    let again = loop {
        let again = l.acquire("k", &try_once(), None, &mut |_| {});
        match &again {
            Ok(lease) => {
                if let Err(e) = l.release("k", &lease.token) {
                    break Err(e);
                }
            }
            Err(rlock::Error::Unavailable { .. }) => {}
            Err(_) => break again,
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{again:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        matches!(&again, Err(rlock::Error::Invalid(m)) if m.to_string().contains("same Redis server")),
        "{again:?}"
    );
    // And from then on, every call is refused.
    let status = l.status("k");
    assert!(
        matches!(status, Err(rlock::Error::Invalid(_))),
        "{status:?}"
    );
    eventually(Duration::from_secs(5), "nothing held", || {
        ms.iter().all(|m| !held_on(m, "k"))
    });
}

#[test]
fn a_reentry_granted_by_a_minority_is_undone_and_fails() {
    let mut ms = masters(3);
    let mut l = quorum(&ms.iter().collect::<Vec<_>>());
    let lease = l.acquire("k", &try_once(), None, &mut |_| {}).unwrap();
    eventually(Duration::from_secs(5), "the grant on every master", || {
        ms.iter().all(|m| held_on(m, "k"))
    });
    // Two masters die: a re-entry can only reach the third.
    drop(ms.drain(1..).collect::<Vec<_>>());
    let mut req = try_once();
    req.reenter = Some(lease.token.clone());
    let err = l.acquire("k", &req, None, &mut |_| {}).unwrap_err();
    assert!(matches!(err, rlock::Error::Unavailable { .. }), "{err:?}");
    let st: serde_json::Value = serde_json::from_str(
        &rlock(&ms[0])
            .args(["status", "k", "--json"])
            .run()
            .ok()
            .stdout,
    )
    .unwrap();
    assert_eq!(st["holders"][0]["count"], 1, "{st}");
}

#[test]
fn a_frozen_master_does_not_hold_up_a_release() {
    // The frozen master is still busy with the attempt when the release
    // comes: the release waits for it no longer than the per-master
    // timeout (500 ms here). It returns while the master is still frozen
    // (not when it thaws), and well before the fan-out's deadline for a
    // queued call (four timeouts, 2 s): 1.5 s leaves a loaded machine 1 s.
    let ms = masters(3);
    let mut l = quorum(&ms.iter().collect::<Vec<_>>());
    freeze(&ms[2]);
    let lease = l.acquire("k", &try_once(), None, &mut |_| {});
    let started = Instant::now();
    let released = lease.as_ref().map(|lease| l.release("k", &lease.token));
    let took = started.elapsed();
    thaw(&ms[2]);
    assert!(
        matches!(released, Ok(Ok(rlock::Released::Released))),
        "{released:?}"
    );
    eprintln!("release with 1 of 3 masters frozen took {took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert!(!held_on(&ms[0], "k") && !held_on(&ms[1], "k"));
}

#[test]
fn redlock_works_as_the_least_privileged_acl_user() {
    // The README's ACL covers what RedLock adds: INFO (who a master is).
    let ms = masters(3);
    let acl = crate::tls_acl::readme_acl();
    let args: Vec<&str> = acl.iter().map(String::as_str).collect();
    for m in &ms {
        let _: () = m.cmd(&args);
    }
    // Three counters apart: no two masters agree until the floor lifts
    // them all past the highest.
    // (With an expiry, as every fence rlock writes has: a key without one
    // is data rlock did not write, refused.)
    let _: () = ms[0].cmd(&["SET", "rlock:{k}:fence", "9", "PX", "3600000"]);
    let _: () = ms[1].cmd(&["SET", "rlock:{k}:fence", "3", "PX", "3600000"]);
    let url = |host: &str, m: &Redis| format!("redis://rlock:rlock-secret@{host}:{}", m.port);
    let urls: Vec<String> = ms.iter().map(|m| url("127.0.0.1", m)).collect();
    let as_user = |urls: &str, args: &[&str]| bare_rlock().env("RLOCK_URL", urls).args(args).run();
    let fence = |urls: &str| {
        let run = as_user(urls, &["exec", "k", "--", "sh", "-c", "echo $RLOCK_FENCE"]).ok();
        run.stdout.trim().parse::<u64>().unwrap()
    };
    let first = fence(&urls.join(","));
    let second = fence(&urls.join(","));
    assert!(first > 9 && first < second, "{first} then {second}");
    assert!(ms.iter().all(|m| counter(m, "k") == second));
    for m in &ms {
        m.assert_nothing_held(&[]);
    }
    let twins = format!("{},{},{}", urls[0], url("localhost", &ms[0]), urls[1]);
    as_user(&twins, &["acquire", "-n", "k"]).fails(64, "same Redis server");
    // An older ACL without +info: the masters cannot say who they are, so
    // nothing is checked, and everything else works.
    for m in &ms {
        let _: () = m.cmd(&["ACL", "SETUSER", "rlock", "-info"]);
    }
    as_user(&urls.join(","), &["exec", "k", "--", "true"]).ok();
}

#[test]
fn a_call_a_stalled_master_runs_late_counts_once() {
    // RedLock sends each call to each master once (its retries are its
    // own, with new tokens): a re-entry that a stalled master runs only
    // after the client gave up on it counts once there, so the holds still
    // add up and the releases leave nothing behind on any master.
    let ms = masters(3);
    let all: Vec<&Redis> = ms.iter().collect();
    let mut l = quorum(&all);
    let outer = l
        .acquire(
            "late",
            &rlock::Request::new(Duration::from_secs(30)),
            None,
            &mut |_| {},
        )
        .unwrap();
    let mut nested = rlock::Request::new(Duration::from_secs(30));
    nested.reenter = Some(outer.token.clone());
    freeze(&ms[0]);
    let inner = l.acquire("late", &nested, None, &mut |_| {});
    std::thread::sleep(Duration::from_millis(700));
    thaw(&ms[0]);
    assert_eq!(inner.unwrap().count, 2);
    // Let the late master run what it got (and rlock give back what it
    // gave up on).
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        l.release("late", &outer.token).unwrap(),
        rlock::Released::StillHeld(1)
    );
    assert_eq!(
        l.release("late", &outer.token).unwrap(),
        rlock::Released::Released
    );
    for m in &ms {
        eventually(Duration::from_secs(5), "every master to be free", || {
            !held_on(m, "late")
        });
        m.assert_nothing_held(&[]);
    }
}

#[test]
fn check_needs_a_majority() {
    let ms = masters(3);
    let tok = rl(&ms).args(["acquire", "k"]).run().ok().token();
    rl(&ms).args(["check", "k", "--token", &tok]).run().ok();
    // Gone from two of three masters: gone.
    for m in &ms[..2] {
        let _: () = m.cmd(&["DEL", "rlock:{k}:h"]);
    }
    rl(&ms)
        .args(["check", "k", "--token", &tok])
        .run()
        .fails(79, "no longer hold");
}

#[test]
fn too_few_replicas_on_every_master_is_named_not_called_silence() {
    // The masters answered, each with "too few replicas": the error says
    // so, instead of claiming that no majority answered.
    let ms = masters(3);
    let run = rl(&ms)
        .args(["--min-replicas", "1", "acquire", "-n", "k"])
        .run()
        .fails(69, "RedLock needs 2");
    assert!(run.stderr.contains("too few replicas"), "{}", run.stderr);
    for m in &ms {
        m.assert_nothing_held(&[]);
    }
}

/// Issue 30, 2.6: master 0 was frozen while the lock was taken on the two
/// others, then thawed: it answers again, as fast as they do, and says the
/// lock is free. Every read must give the majority's answer every time,
/// whichever master answers first, and `break` must end the hold.
#[test]
fn reads_and_break_decide_by_majority_after_a_frozen_master_thaws() {
    let ms = masters(3);
    freeze(&ms[0]);
    // The issue's `sleep 8`, made 60: the break ends it, and 25 reads on a
    // loaded 2-core machine may take longer than 8 s.
    let holder = rl(&ms)
        .args(["exec", "--ttl", "20s", "k", "--", "sleep", "60"])
        .spawn();
    eventually(Duration::from_secs(15), "k held on masters 1 and 2", || {
        held_on(&ms[1], "k") && held_on(&ms[2], "k")
    });
    thaw(&ms[0]);
    // On thawing, master 0 runs the grant it was sent while frozen, with
    // the holder's token (the masters then agree). In the issue it had
    // missed the grant and said free: take its copy away to get there.
    // (Waited for a while, then taken away whether it came or not.)
    let until = Instant::now() + Duration::from_secs(5);
    while !held_on(&ms[0], "k") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    // (A resend of the grant may land after a first DEL: again until the
    // copy stays gone. That failed once on Redis 6.2.)
    eventually(Duration::from_secs(10), "master 0's copy gone", || {
        let _: () = ms[0].cmd(&["DEL", "rlock:{k}:h"]);
        std::thread::sleep(Duration::from_millis(300));
        !held_on(&ms[0], "k")
    });
    for i in 0..5 {
        let st: serde_json::Value =
            serde_json::from_str(&rl(&ms).args(["status", "k", "--json"]).run().ok().stdout)
                .unwrap();
        assert_eq!(st["held"], true, "status, call {i}: {st}");
        assert_eq!(st["holders"].as_array().unwrap().len(), 1, "{st}");
        let list = rl(&ms).args(["list"]).run().ok().stdout;
        assert!(list.contains("k"), "list, call {i}: {list}");
        let top = rl(&ms).args(["top", "--once"]).run().ok().stdout;
        assert!(
            top.lines()
                .any(|l| l.split_whitespace().next() == Some("k")),
            "top, call {i}: {top}"
        );
        let metrics = rl(&ms).args(["metrics"]).run().ok().stdout;
        assert!(
            metrics.contains("rlock_lock_holders{lock=\"k\"} 1\n"),
            "metrics, call {i}: {metrics}"
        );
        let history = rl(&ms).args(["history", "k"]).run().ok().stdout;
        assert!(history.contains("granted"), "history, call {i}: {history}");
    }
    let out = rl(&ms)
        .args(["break", "k", "--yes", "--reason", "x"])
        .run()
        .ok();
    assert!(out.stderr.contains("breaking lock"), "{}", out.stderr);
    let broken = finish(holder, "the broken exec").code(79);
    assert!(
        broken.stderr.contains("it was broken by"),
        "{}",
        broken.stderr
    );
    for m in &ms {
        assert!(!held_on(m, "k"), "still held on {}", m.url());
    }
}

/// Script calls a server has run (EVAL and EVALSHA, from INFO
/// commandstats).
fn script_calls(m: &Redis) -> u64 {
    let info: String = m.cmd(&["INFO", "commandstats"]);
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Hold "k" under RedLock for 30 s (from a shell that exits at once), start
/// `acquire -w WAIT k` and, once it is queued on every master, send `sig`
/// to two of the three masters. The holder's token, the waiter and when it was spawned.
fn wait_then_signal_two(
    ms: &[Redis],
    wait: &str,
    sig: i32,
) -> (String, Instant, std::process::Child) {
    let holder = rl(ms)
        .args(["acquire", "--ttl", "30s", "k"])
        .by_another_process()
        .run()
        .ok()
        .token();
    let before: Vec<u64> = ms.iter().map(script_calls).collect();
    let spawned = Instant::now();
    let child = rl(ms).args(["acquire", "-w", wait, "k"]).spawn();
    // Every master has run the waiter's attempts (it retries a busy lock
    // every 50-250 ms): two more script calls than before, one of which
    // may be the holder's grant arriving late.
    for (m, before) in ms.iter().zip(before) {
        eventually(Duration::from_secs(10), "the waiter's attempts", || {
            script_calls(m) >= before + 2
        });
    }
    kill(ms[1].child_pid(), sig);
    kill(ms[2].child_pid(), sig);
    (holder, spawned, child)
}

/// The waiter kept trying until its deadline (`wait` after it was spawned,
/// at the earliest), then gave up with exit 69 naming the two silent
/// masters, ms[1] and ms[2], and since when.
#[track_caller]
fn gave_up_at_the_deadline(ms: &[Redis], spawned: Instant, run: Run, wait: Duration) {
    let took = spawned.elapsed();
    eprintln!("-w {wait:?} with 2 of 3 masters silent 0.5 s in: exit 69 after {took:?}");
    assert!(took >= wait, "gave up after {took:?}, before -w");
    // Generous: a loaded machine; the deadline, not a count of tries, ends it.
    assert!(
        took < wait + Duration::from_secs(10),
        "took {took:?} for -w {wait:?}"
    );
    let last = run.stderr.lines().last().unwrap_or("");
    assert!(last.contains("RedLock needs 2"), "{:?}", run.stderr);
    for m in &ms[1..] {
        let silent = format!("Redis at 127.0.0.1:{} has not answered since 20", m.port);
        assert!(last.contains(&silent), "{:?}", run.stderr);
    }
    // The master that answered is not named as silent.
    assert!(
        !last.contains(&format!("127.0.0.1:{} has not", ms[0].port)),
        "{:?}",
        run.stderr
    );
    // They ran there: no "is Redis running there?".
    assert!(!last.contains("--url"), "{:?}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{:?}", run.stderr);
}

#[test]
fn a_waiter_rides_out_a_lost_majority_until_its_deadline() {
    let ms = masters(3);
    let (_, spawned, child) = wait_then_signal_two(&ms, "5s", libc::SIGKILL);
    let run = finish(child, "a waiter whose majority died").code(69);
    gave_up_at_the_deadline(&ms, spawned, run, Duration::from_secs(5));
}

#[test]
fn a_waiter_rides_out_a_frozen_majority_until_its_deadline() {
    // Frozen masters time out together: the first timeout decides an
    // attempt without the other, which still counts as silent (the one
    // master left saying busy is no timeout, exit 75).
    let ms = masters(3);
    let (_, spawned, child) = wait_then_signal_two(&ms, "3s", libc::SIGSTOP);
    let run = finish(child, "a waiter whose majority froze");
    thaw(&ms[1]);
    thaw(&ms[2]);
    let run = run.code(69);
    gave_up_at_the_deadline(&ms, spawned, run, Duration::from_secs(3));
}

#[test]
fn a_waiter_whose_masters_come_back_in_time_gets_the_lock() {
    let ms = masters(3);
    let (holder, spawned, child) = wait_then_signal_two(&ms, "30s", libc::SIGKILL);
    std::thread::sleep(Duration::from_millis(1500));
    // The holder lets go on the master left (its grant may not have
    // reached that one: then there is nothing to let go of).
    rlock(&ms[0])
        .args(["release", "k", "--token", &holder])
        .run();
    assert!(!held_on(&ms[0], "k"));
    // Back empty (no persistence), on the same ports.
    let _again: Vec<_> = ms[1..]
        .iter()
        .map(|m| crate::wait_outage::Again::start(m.port))
        .collect();
    let run = finish(child, "a waiter whose masters came back").ok();
    let took = spawned.elapsed();
    eprintln!("-w 30s, 2 of 3 masters killed 0.5 s in and back 2 s in: lock after {took:?}");
    let tok = run.token();
    assert!(!run.stderr.contains("has not answered"), "{:?}", run.stderr);
    assert!(took < Duration::from_secs(30), "{took:?}");
    // Held on a majority: released there.
    rl(&ms).args(["release", "k", "--token", &tok]).run().ok();
}

/// A grant that waited says so in the history (`waited_ms` of the
/// `granted` event), as on one Redis: every attempt of a RedLock wait
/// carries how long the wait has lasted so far.
#[test]
fn a_grant_that_waited_records_its_wait() {
    let ms = masters(3);
    let tok = rl(&ms)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let waiter = rl(&ms)
        .args(["exec", "-w", "30s", "k", "--", "true"])
        .spawn();
    std::thread::sleep(Duration::from_millis(1200));
    rl(&ms).args(["release", "k", "--token", &tok]).run().ok();
    finish(waiter, "the waiter").ok();
    let out = rl(&ms).args(["history", "k", "--json"]).run().ok().stdout;
    let h: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let granted: Vec<&serde_json::Value> = h.iter().filter(|e| e["event"] == "granted").collect();
    assert_eq!(granted.len(), 2, "{out}");
    let waited = granted[1]["waited_ms"].as_u64().unwrap_or(0);
    // The release came 1.2 s after the waiter started; its first attempt
    // was at most that long after its spawn (generous for a loaded box).
    assert!(waited >= 500, "the second grant waited {waited} ms: {out}");
}
