//! The index of locks in use (docs/internals.md, "The index of locks in
//! use"): `list` reads it instead of scanning the keyspace, on one Redis,
//! Sentinel, Cluster and RedLock.

use std::time::Duration;

use crate::util::*;

/// `count` keys that are not rlock's, as a shared production Redis has.
fn unrelated_keys(r: &Redis, count: usize) {
    let _: i64 = r.cmd(&[
        "EVAL",
        "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'app:' .. i, 'x') end return 1",
        "0",
        &count.to_string(),
    ]);
}

/// The names `list --json` shows, sorted.
fn listed(run: Run) -> Vec<String> {
    let all: serde_json::Value = serde_json::from_str(&run.ok().stdout).unwrap();
    let mut names: Vec<String> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// The index shards on a server, with the PTTL of each.
fn index_keys(r: &Redis) -> Vec<(String, i64)> {
    r.keys()
        .into_iter()
        .filter(|k| is_index_key(k))
        .map(|k| {
            let ttl: i64 = r.cmd(&["PTTL", &k]);
            (k, ttl)
        })
        .collect()
}

/// Every entry of every shard on a server: (name, score).
fn entries(r: &Redis) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for (k, _) in index_keys(r) {
        let flat: Vec<String> = r.cmd(&["ZRANGE", &k, "0", "-1", "WITHSCORES"]);
        for pair in flat.chunks(2) {
            out.push((pair[0].clone(), pair[1].parse().unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn list_finds_held_and_waited_for_locks_and_not_released_or_expired_ones() {
    let r = Redis::start();
    unrelated_keys(&r, 20_000);
    let held = rlock(&r)
        .args(["acquire", "--ttl", "60s", "held"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["acquire", "--ttl", "60s", "busy"])
        .run()
        .ok();
    let mut waiter = rlock(&r).args(["acquire", "-w", "30s", "busy"]).spawn();
    r.await_waiters("busy", 1);
    let gone = rlock(&r).args(["acquire", "gone"]).run().ok().token();
    rlock(&r)
        .args(["release", "gone", "--token", &gone])
        .run()
        .ok();
    rlock(&r)
        .args(["acquire", "--ttl", "300ms", "short"])
        .run()
        .ok();
    rlock(&r).args(["exec", "ran", "--", "true"]).run().ok();
    // Every lock that was used is in the index, and every shard expires.
    let names: Vec<String> = entries(&r).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["busy", "gone", "held", "ran", "short"]);
    for (k, ttl) in index_keys(&r) {
        assert!(ttl > 0, "{k} has PTTL {ttl}");
    }
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        listed(rlock(&r).args(["list", "--json"]).run()),
        ["busy", "held"]
    );
    let text = rlock(&r).args(["list"]).run().ok().stdout;
    assert!(
        text.contains("busy: held") && text.contains("held: held"),
        "{text}"
    );
    // The pattern is a Redis glob over lock names.
    assert_eq!(
        listed(rlock(&r).args(["list", "--json", "h*"]).run()),
        ["held"]
    );
    assert_eq!(
        listed(rlock(&r).args(["list", "--json", "?us[xy]"]).run()),
        ["busy"]
    );
    // `list` removed the entries of the locks nobody uses.
    let names: Vec<String> = entries(&r).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["busy", "held"]);
    // The same as the scan rlock did before the index.
    assert_eq!(
        listed(
            rlock(&r)
                .env("RLOCK_LIST_SCAN", "1")
                .args(["list", "--json"])
                .run()
        ),
        ["busy", "held"]
    );
    rlock(&r)
        .args(["release", "held", "--token", &held])
        .run()
        .ok();
    let _ = waiter.kill();
    let _ = waiter.wait();
}

#[test]
fn a_lock_held_past_its_first_index_deadline_stays_listed() {
    // Deadlines of 1 s past the lease (RLOCK_INDEX_KEEP, in ms), so the
    // holder's renewals must touch its entry again for it to stay.
    let r = Redis::start();
    let job = rlock(&r)
        .env("RLOCK_INDEX_KEEP", "1000")
        .args(["exec", "--ttl", "1s", "long", "--", "sleep", "6"])
        .spawn();
    eventually(Duration::from_secs(5), "the job to hold the lock", || {
        r.held("long")
    });
    let first = entries(&r);
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(listed(rlock(&r).args(["list", "--json"]).run()), ["long"]);
        for (k, ttl) in index_keys(&r) {
            // Lease 1 s + keep 1 s, never the default hour.
            assert!(ttl > 0 && ttl <= 2_500, "{k} has PTTL {ttl}");
        }
    }
    let later = entries(&r);
    assert!(later[0].1 > first[0].1 + 3_000, "{first:?} then {later:?}");
    finish(job, "job").ok();
    // With nobody touching it, the entry and its shard expire by
    // themselves.
    eventually(Duration::from_secs(5), "the index to expire", || {
        index_keys(&r).is_empty()
    });
}

/// The server's clock (ms).
fn server_ms(r: &Redis) -> i64 {
    let t: Vec<String> = r.cmd(&["TIME"]);
    t[0].parse::<i64>().unwrap() * 1000 + t[1].parse::<i64>().unwrap() / 1000
}

#[test]
fn a_lock_parked_by_a_long_min_hold_keeps_its_entry_for_the_whole_hold() {
    // A 5 h min-hold outlasts the hour an entry outlives its lease: the
    // entry's deadline must cover the parked lease itself. One lock gets
    // its min-hold at release, the other at the grant.
    let r = Redis::start();
    let late = rlock(&r)
        .args(["acquire", "--ttl", "10s", "late"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["release", "late", "--token", &late, "--min-hold", "5h"])
        .run()
        .ok();
    let early = rlock(&r)
        .args(["acquire", "--ttl", "10s", "--min-hold", "5h", "early"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["release", "early", "--token", &early])
        .run()
        .ok();
    let now = server_ms(&r);
    let scores = entries(&r);
    for name in ["early", "late"] {
        let lease: i64 = r.cmd(&["PTTL", &format!("{}:h", r.key(name))]);
        assert!(lease > 4 * 3600 * 1000, "{name}'s lease has PTTL {lease}");
        let score = scores.iter().find(|(n, _)| n == name).unwrap().1;
        assert!(
            score - now >= lease,
            "{name}'s entry keeps until {} ms from now, its lease {lease} ms",
            score - now
        );
    }
    for (k, ttl) in index_keys(&r) {
        let last = scores.iter().map(|(_, s)| s).max().unwrap();
        assert!(
            ttl >= last - now,
            "{k} has PTTL {ttl}, an entry {}",
            last - now
        );
    }
    assert_eq!(
        listed(rlock(&r).args(["list", "--json"]).run()),
        ["early", "late"]
    );
    // The same with keep = 1 s: past the deadline a 1 s lease's touch set
    // (and its shard's expiry), `list` still finds the parked lock.
    let short = |args: &[&str]| rlock(&r).env("RLOCK_INDEX_KEEP", "1000").args(args).run();
    let tok = short(&["acquire", "--ttl", "1s", "brief"]).ok().token();
    short(&["release", "brief", "--token", &tok, "--min-hold", "8s"]).ok();
    std::thread::sleep(Duration::from_millis(3500));
    assert!(r.held("brief"));
    assert_eq!(
        listed(rlock(&r).args(["list", "--json", "brief"]).run()),
        ["brief"]
    );
}

#[test]
fn a_long_wait_refreshes_its_entry() {
    let r = Redis::start();
    rlock(&r).args(["acquire", "--ttl", "30s", "k"]).run().ok();
    let mut waiter = rlock(&r)
        .env("RLOCK_INDEX_KEEP", "400")
        .args(["acquire", "--ttl", "1s", "-w", "20s", "k"])
        .spawn();
    r.await_waiters("k", 1);
    let first = entries(&r)[0].1;
    std::thread::sleep(Duration::from_millis(1500));
    let later = entries(&r)[0].1;
    assert!(
        later > first,
        "the waiter's heartbeats never touched: {first} {later}"
    );
    let _ = waiter.kill();
    let _ = waiter.wait();
}

#[test]
fn a_refused_acquire_leaves_no_index_entry() {
    // Bad input writes nothing: the touch pipelined behind a refused
    // acquire is taken back.
    let r = Redis::start();
    let _: () = r.cmd(&["SET", &r.key("foreign"), "x"]);
    rlock(&r)
        .args(["acquire", "foreign"])
        .run()
        .fails(64, "not an rlock lock");
    assert!(index_keys(&r).is_empty(), "{:?}", r.keys());
}

/// On one server the acquire script touches the lock's index entry
/// itself: one script call per acquire and per release, and the entry and
/// the known list's are there, with an expiry; a refused acquire (data
/// rlock did not write) touches nothing.
#[test]
fn one_server_touches_the_index_inside_the_acquire_call() {
    let r = Redis::start();
    rlock(&r).args(["exec", "warm", "--", "true"]).run().ok(); // scripts cached
    let _: () = r.cmd(&["CONFIG", "RESETSTAT"]);
    rlock(&r).args(["exec", "one", "--", "true"]).run().ok();
    let info: String = r.cmd(&["INFO", "commandstats"]);
    let calls = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(calls("evalsha") + calls("eval"), 2, "{info}");
    let names: Vec<String> = entries(&r).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["one", "warm"]);
    assert!(index_keys(&r).iter().all(|(_, ttl)| *ttl > 0));
    let known: Vec<String> = r
        .keys()
        .into_iter()
        .filter(|k| k.ends_with(":known"))
        .collect();
    assert!(!known.is_empty());
    for k in &known {
        assert!(r.cmd::<i64>(&["PTTL", k]) > 0, "{k}");
    }
    let _: () = r.cmd(&["SET", &r.key("foreign"), "x"]);
    rlock(&r)
        .args(["acquire", "foreign"])
        .run()
        .fails(64, "not an rlock lock");
    let names: Vec<String> = entries(&r).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["one", "warm"]);
}

#[test]
fn list_never_removes_an_entry_touched_after_it_read_it() {
    // The compare-and-remove, by hand: a touch moves the score strictly
    // up, and a removal with the score read before it removes nothing.
    let r = Redis::shared();
    let touch = lua_script("index.lua");
    let drop = include_str!("../../lua/index_drop.lua");
    let shard = format!("{}{{i0}}:index", r.prefix);
    let touch_it = || -> i64 { r.cmd(&["EVAL", &touch, "1", &shard, "k", "60000"]) };
    let first = touch_it();
    let second = touch_it();
    assert!(second > first, "{first} then {second}");
    let removed: i64 = r.cmd(&["EVAL", drop, "1", &shard, "k", &first.to_string()]);
    assert_eq!(removed, 0);
    let removed: i64 = r.cmd(&["EVAL", drop, "1", &shard, "k", &second.to_string()]);
    assert_eq!(removed, 1);
    assert_eq!(r.cmd::<i64>(&["EXISTS", &shard]), 0);
    // Touches faster than the clock (most of these within a millisecond
    // of the one before: ZADD INCR, lua/part/touch.lua) move it up too.
    let mut last = touch_it();
    for _ in 0..50 {
        let next = touch_it();
        assert!(next > last, "{last} then {next}");
        last = next;
    }
    let _: i64 = r.cmd(&["DEL", &shard]);

    // And through rlock: `list` runs while the lock is taken and given
    // back over and over; once it is held, every later list shows it.
    let churn = {
        let (url, prefix) = (r.url(), r.prefix.clone());
        std::thread::spawn(move || {
            let mut l = locker_with(&url, &prefix);
            for _ in 0..150 {
                let lease = l
                    .acquire(
                        "k",
                        &rlock::Request::new(Duration::from_secs(10)).unwrap(),
                        None,
                        &mut |_| {},
                    )
                    .unwrap();
                l.release("k", &lease.token).unwrap();
            }
            l.acquire(
                "k",
                &rlock::Request::new(Duration::from_secs(30)).unwrap(),
                None,
                &mut |_| {},
            )
            .unwrap()
        })
    };
    let mut l = r.locker();
    while !churn.is_finished() {
        l.list("*").unwrap();
    }
    let lease = churn.join().unwrap();
    for _ in 0..3 {
        let names: Vec<String> = l.list("*").unwrap().into_iter().map(|s| s.key).collect();
        assert_eq!(names, ["k"]);
    }
    l.release("k", &lease.token).unwrap();
}

#[test]
fn cluster_index_writes_spread_over_the_masters() {
    let c = Cluster::start(3);
    let rc = || {
        bare_rlock()
            .env("RLOCK_URL", &c.urls())
            .env("RLOCK_CLUSTER", "1")
    };
    let keys: Vec<String> = (0..30).map(|i| format!("job-{i}")).collect();
    for k in &keys {
        rc().args(["acquire", "--ttl", "60s", k]).run().ok();
    }
    // Shards per master, and locks per master: the index goes where the
    // locks go.
    let shards: Vec<usize> = c.nodes.iter().map(|r| index_keys(r).len()).collect();
    assert!(
        shards.iter().all(|&n| n > 0),
        "index shards per master: {shards:?}"
    );
    let mut total = 0;
    for r in &c.nodes {
        for (k, ttl) in index_keys(r) {
            assert!(ttl > 0, "{k} has PTTL {ttl}");
        }
        total += entries(r).len();
    }
    assert_eq!(total, keys.len());
    let mut want = keys.clone();
    want.sort();
    assert_eq!(listed(rc().args(["list", "--json"]).run()), want);
    assert_eq!(
        listed(rc().args(["list", "--json", "job-1?"]).run()).len(),
        10
    );
}

#[test]
fn redlock_list_reads_each_masters_index() {
    let ms: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let urls = ms.iter().map(Redis::url).collect::<Vec<_>>().join(",");
    let rl = || bare_rlock().env("RLOCK_URL", &urls);
    let mut toks = Vec::new();
    for k in ["a", "b", "c"] {
        toks.push((
            k,
            rl().args(["acquire", "--ttl", "60s", k]).run().ok().token(),
        ));
    }
    // `list` shows the locks of the first master that answers: a master
    // whose acquire came after the majority's answer (or never: the
    // process may exit first) holds fewer. A request already sent when the
    // process exited still lands, with its index touch (they go in one
    // write): let those land before looking.
    std::thread::sleep(Duration::from_millis(300));
    let shown = listed(rl().args(["list", "--json"]).run());
    let held_on = |m: &Redis| -> Vec<String> {
        ["a", "b", "c"]
            .iter()
            .filter(|k| m.held(k))
            .map(|k| k.to_string())
            .collect()
    };
    assert!(
        ms.iter().any(|m| held_on(m) == shown),
        "list showed {shown:?}, held: {:?}",
        ms.iter().map(&held_on).collect::<Vec<_>>()
    );
    // Each master's index was written with that master's acquire: every
    // lock a master holds is in its index (a master whose request came
    // after the majority's answer, or never, may hold less).
    for m in &ms {
        let names: Vec<String> = entries(m).into_iter().map(|(n, _)| n).collect();
        for k in ["a", "b", "c"] {
            assert!(!m.held(k) || names.iter().any(|n| n == k), "{k}: {names:?}");
        }
    }
    let full = ms.iter().filter(|m| entries(m).len() == 3).count();
    assert!(full >= 2, "{full} masters index all three locks");
    for m in &ms {
        for (k, ttl) in index_keys(m) {
            assert!(ttl > 0, "{k} has PTTL {ttl}");
        }
    }
    for (k, t) in &toks {
        rl().args(["release", k, "--token", t]).run().ok();
    }
    assert!(listed(rl().args(["list", "--json"]).run()).is_empty());
}

#[test]
fn sentinel_list_goes_through_a_failover() {
    let s = Sentinels::start();
    let rs = || {
        bare_rlock()
            .env("RLOCK_URL", &s.urls())
            .env("RLOCK_SENTINEL", "mymaster")
    };
    for k in ["a", "b"] {
        rs().args(["--min-replicas", "1", "acquire", "--ttl", "60s", k])
            .run()
            .ok();
    }
    assert_eq!(listed(rs().args(["list", "--json"]).run()), ["a", "b"]);
    s.failover();
    // The index was replicated with the locks.
    assert_eq!(listed(rs().args(["list", "--json"]).run()), ["a", "b"]);
}

#[test]
fn a_bad_rlock_list_scan_is_refused() {
    let r = Redis::shared();
    for bad in ["yes", "2", " 1"] {
        rlock(&r)
            .env("RLOCK_LIST_SCAN", bad)
            .args(["list"])
            .run()
            .fails(64, "RLOCK_LIST_SCAN");
    }
    rlock(&r)
        .env("RLOCK_LIST_SCAN", "0")
        .args(["list"])
        .run()
        .ok();
    assert!(r.keys().is_empty(), "{:?}", r.keys());
}

/// A command line is stored as given (redacted), control characters and
/// all; `list` and `status` show it escaped (`\x1b`), never letting an
/// escape sequence in it reach the operator's terminal.
#[test]
fn list_and_status_show_no_escape_sequence_a_holder_stored() {
    let r = Redis::shared();
    let job = rlock(&r)
        .args([
            "exec",
            "--ttl",
            "30s",
            "escaped-cmd",
            "--",
            "sh",
            "-c",
            "sleep 30",
            "\x1b]0;pwned\x07\x1b[2J",
        ])
        .spawn();
    eventually(Duration::from_secs(5), "the job to hold the lock", || {
        r.held("escaped-cmd")
    });
    let list = rlock(&r).args(["list", "escaped-cmd"]).run().ok().stdout;
    let status = rlock(&r).args(["status", "escaped-cmd"]).run().ok().stdout;
    kill(job.id(), libc::SIGKILL);
    let _ = finish(job, "exec");
    for out in [list, status] {
        assert!(
            out.contains(r"cmd sh -c sleep 30 \x1b]0;pwned\x07\x1b[2J"),
            "{out:?}"
        );
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    }
}
