//! The history's bounds and reading: --limit, the cap and retention,
//! what is hidden, bad input, old records, RedLock, the keeper, foreign
//! data, the cost of a lock name.

use super::*;

/// --limit N shows the last N, oldest first.
#[test]
fn limit_shows_the_last_events() {
    let r = Redis::shared();
    for _ in 0..4 {
        rlock(&r).args(["exec", "lim", "--", "true"]).run().ok();
    }
    let all = history(&r, "lim", &[]);
    assert_eq!(all.len(), 8);
    let last = history(&r, "lim", &["--limit", "3"]);
    assert_eq!(last, all[5..].to_vec());
    // The default is 20.
    for _ in 0..8 {
        rlock(&r).args(["exec", "lim", "--", "true"]).run().ok();
    }
    assert_eq!(history(&r, "lim", &[]).len(), 20);
    assert_eq!(history(&r, "lim", &["--limit", "100"]).len(), 24);
}

/// How much longer than the retention `keep` (ms) the history may stay:
/// log_event's slack (lua/part/log.lua), a 64th of it, at most 10 minutes.
fn slack(keep: i64) -> i64 {
    (keep / 64).min(600_000)
}

/// The cap trims the list (once it is an eighth over the cap: with cap 5,
/// at every event past it), and both keys live for the retention after
/// the last event, never for ever.
#[test]
fn cap_and_retention_bound_the_history() {
    let r = Redis::shared();
    let mut l = r.locker();
    l.set_history(rlock::HistoryLimits::new(5, Duration::from_secs(3600)).unwrap());
    let req = rlock::Request::new(Duration::from_secs(10)).unwrap();
    for _ in 0..150 {
        let lease = l.acquire("cap", &req, None, &mut |_| {}).unwrap();
        l.release("cap", &lease.token).unwrap();
    }
    let log = format!("{}:log", r.key("cap"));
    let n = format!("{}:n", r.key("cap"));
    let len: i64 = r.cmd(&["LLEN", &log]);
    assert_eq!(len, 5, "LLEN {len} of 300 events, cap 5");
    for k in [&log, &n] {
        let ttl: i64 = r.cmd(&["PTTL", k]);
        assert!(
            ttl > 0 && ttl <= 3_600_000 + slack(3_600_000),
            "{k}: PTTL {ttl}"
        );
    }
    assert_eq!(counter(&r, "cap", "grants"), 150);
    // The binary: RLOCK_HISTORY_EVENTS=0 keeps counters only, and the
    // retention from RLOCK_HISTORY_RETENTION.
    rlock(&r)
        .env("RLOCK_HISTORY_EVENTS", "0")
        .env("RLOCK_HISTORY_RETENTION", "90s")
        .args(["exec", "none", "--", "true"])
        .run()
        .ok();
    let none = format!("{}:log", r.key("none"));
    let exists: i64 = r.cmd(&["EXISTS", &none]);
    assert_eq!(exists, 0);
    assert_eq!(counter(&r, "none", "grants"), 1);
    let ttl: i64 = r.cmd(&["PTTL", &format!("{}:n", r.key("none"))]);
    assert!(ttl > 0 && ttl <= 90_000 + slack(90_000), "PTTL {ttl}");
    // The default retention is 7 days.
    rlock(&r).args(["exec", "dflt", "--", "true"]).run().ok();
    for k in [":log", ":n"] {
        let ttl: i64 = r.cmd(&["PTTL", &format!("{}{k}", r.key("dflt"))]);
        assert!(
            ttl > 7 * 86_400_000 - 60_000 && ttl <= 7 * 86_400_000 + slack(7 * 86_400_000),
            "PTTL {ttl}"
        );
    }
}

/// Each event leaves both history keys at least the retention to live,
/// though their expiry is moved only once per slack (a 64th of the
/// retention: 1 s of 64 s here), not by every event: events 0.7 s apart
/// for 4 s, each checked at once. Were an event to skip the move while
/// the deadline covers only now (not now + the retention), the TTL would
/// fall 3 s short by the end.
#[test]
fn every_event_is_kept_for_the_retention_though_the_expiry_moves_seldom() {
    let r = Redis::shared();
    let mut l = r.locker();
    let keep: i64 = 64_000;
    l.set_history(rlock::HistoryLimits::new(50, Duration::from_secs(64)).unwrap());
    let req = rlock::Request::new(Duration::from_secs(10)).unwrap();
    let keys = [
        format!("{}:log", r.key("seldom")),
        format!("{}:n", r.key("seldom")),
    ];
    let check = |what: &str| {
        for k in &keys {
            let ttl: i64 = r.cmd(&["PTTL", k]);
            // (1 s for the time between the event and the PTTL)
            assert!(
                ttl > keep - 1_000 && ttl <= keep + slack(keep),
                "{k} after {what}: PTTL {ttl}"
            );
        }
    };
    for i in 0..6 {
        let lease = l.acquire("seldom", &req, None, &mut |_| {}).unwrap();
        check(&format!("grant {i}"));
        std::thread::sleep(Duration::from_millis(350));
        l.release("seldom", &lease.token).unwrap();
        check(&format!("release {i}"));
        std::thread::sleep(Duration::from_millis(350));
    }
    // Deleted by hand: the next event's keys are new, and get a TTL.
    r.cmd::<i64>(&["DEL", &keys[0], &keys[1]]);
    let lease = l.acquire("seldom", &req, None, &mut |_| {}).unwrap();
    l.release("seldom", &lease.token).unwrap();
    check("a grant and release after the DEL");
    // Only the log deleted: P{K}:n's deadline stands, the new list gets it.
    r.cmd::<i64>(&["DEL", &keys[0]]);
    let lease = l.acquire("seldom", &req, None, &mut |_| {}).unwrap();
    l.release("seldom", &lease.token).unwrap();
    check("a grant and release after the log's DEL");
    // Only the counters deleted: no deadline, so the next event sets one.
    r.cmd::<i64>(&["DEL", &keys[1]]);
    let lease = l.acquire("seldom", &req, None, &mut |_| {}).unwrap();
    l.release("seldom", &lease.token).unwrap();
    check("a grant and release after the counters' DEL");
}

/// Command lines are stored redacted, as status shows them.
#[test]
fn the_history_shows_no_password() {
    let r = Redis::shared();
    rlock(&r)
        .args([
            "exec",
            "pw",
            "--",
            "sh",
            "-c",
            "true",
            "--password=hunter2",
            "redis://u:hunter2@h:6379/",
        ])
        .run()
        .ok();
    for args in [vec!["history", "pw"], vec!["history", "pw", "--json"]] {
        let out = rlock(&r).args(args).run().ok().stdout;
        assert!(out.contains("released"), "{out}");
        assert!(!out.contains("hunter2"), "{out}");
    }
}

/// A password glued to mysql's `-p` (the most common way to give one to
/// a cron'd mysqldump) is hidden too, in the history as in status.
#[test]
fn the_history_shows_no_mysql_password() {
    let r = Redis::shared();
    rlock(&r)
        .args([
            "exec",
            "mysqlpw",
            "--",
            "sh",
            "-c",
            "true",
            "mysql",
            "-phunter2",
        ])
        .run()
        .ok();
    for args in [
        vec!["history", "mysqlpw"],
        vec!["history", "mysqlpw", "--json"],
    ] {
        let out = rlock(&r).args(args).run().ok().stdout;
        assert!(out.contains("released") && out.contains("-p***"), "{out}");
        assert!(!out.contains("hunter2"), "{out}");
    }
}

/// Bad input: one line, exit 64, nothing written.
#[test]
fn bad_history_input_is_refused_with_64_and_writes_nothing() {
    let r = Redis::shared();
    /// Arguments, environment, what the one line names.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (&["history", "k", "--limit", "0"], &[], "--limit"),
        (&["history", "k", "--limit", "x"], &[], "--limit"),
        (&["history", "k", "--limit", "-1"], &[], "-1"),
        (&["history", "k", "--limit", "100001"], &[], "--limit"),
        (&["history", ""], &[], "empty"),
        (
            &["history", "k", "--history-events", "x"],
            &[],
            "--history-events",
        ),
        (
            &["exec", "k", "--", "true"],
            &[("RLOCK_HISTORY_EVENTS", "-1")],
            "--history-events",
        ),
        (
            &["exec", "k", "--", "true"],
            &[("RLOCK_HISTORY_EVENTS", "100001")],
            "--history-events",
        ),
        (
            &["exec", "k", "--", "true"],
            &[("RLOCK_HISTORY_RETENTION", "5")],
            "no unit",
        ),
        (
            &["exec", "k", "--", "true"],
            &[("RLOCK_HISTORY_RETENTION", "0s")],
            "--history-retention",
        ),
        (
            &["history", "k", "--history-retention", "400d"],
            &[],
            "--history-retention",
        ),
    ];
    for (args, env, needle) in cases {
        let mut run = rlock(&r).args(*args);
        for (k, v) in *env {
            run = run.env(k, v);
        }
        run.run().fails(64, needle);
    }
    let left: Vec<String> = r.keys();
    assert!(left.is_empty(), "written: {left:?}");
}

/// Holder info stored before `user` and `ci` existed still reads.
#[test]
fn events_with_old_holder_info_still_read() {
    let r = Redis::shared();
    let log = format!("{}:log", r.key("old"));
    let _: i64 = r.cmd(&[
        "RPUSH",
        &log,
        r#"[1700000000000,"granted","7","{\"host\":\"h\",\"pid\":1}","w",0]"#,
    ]);
    let _: i64 = r.cmd(&["PEXPIRE", &log, "60000"]);
    let h = history(&r, "old", &[]);
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["host"], "h");
    assert_eq!(h[0]["fence"], 7);
    assert!(
        h[0]["user"].is_null() && h[0].get("ci").is_none(),
        "{}",
        h[0]
    );
}

/// The CI job shows where the environment names one.
#[test]
fn the_ci_job_shows_when_the_environment_names_one() {
    let r = Redis::shared();
    rlock(&r)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_REPOSITORY", "acme/site")
        .env("GITHUB_RUN_ID", "42")
        .env("GITHUB_JOB", "deploy")
        .args(["exec", "gh", "--", "true"])
        .run()
        .ok();
    let h = history(&r, "gh", &[]);
    assert_eq!(h[0]["ci"], "github acme/site run 42 job deploy");
}

/// RedLock: each master writes its own history; `history` shows the
/// events a majority of them has.
#[test]
fn redlock_masters_each_keep_the_history() {
    let masters: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let urls = masters.iter().map(Redis::url).collect::<Vec<_>>().join(",");
    let run = |args: &[&str]| bare_rlock().env("RLOCK_URL", &urls).args(args).run();
    run(&["exec", "rl", "--", "sh", "-c", "exit 2"]).code(2);
    let out = run(&["history", "rl", "--json"]).ok().stdout;
    let h: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // A first attempt whose fences disagree is given back (see
    // src/lock/quorum/): granted and released where it was granted (shown if a
    // majority granted it at one fence), then the real one.
    let names = events(&h);
    assert!(names.ends_with(&["granted", "released"]), "{names:?}");
    assert_eq!(names.len() % 2, 0, "{names:?}");
    let last = &h[h.len() - 1];
    assert_eq!(last["exit_code"], 2);
    assert_eq!(last["cmd"], "sh -c exit 2");
    for m in &masters {
        let len: i64 = m.cmd(&["LLEN", "rlock:{rl}:log"]);
        assert!(len >= 2 && len % 2 == 0, "LLEN {len}");
        let n: Vec<Option<i64>> = m.cmd(&[
            "HMGET",
            "rlock:{rl}:n",
            "grants",
            "released",
            "overruns",
            "expired",
            "closed",
        ]);
        let n: Vec<i64> = n.into_iter().map(Option::unwrap_or_default).collect();
        assert!(n[0] > 0, "{n:?}");
        assert_eq!(n[0], n[1..].iter().sum::<i64>(), "{n:?}");
    }
}

/// The keeper of `acquire --keep` writes its events with the limits the
/// acquire was given: its release when the script ends.
#[test]
fn a_keeper_writes_with_the_callers_history_limits() {
    let r = Redis::shared();
    let script = format!(
        "'{}' acquire kept --keep --ttl 2s >/dev/null && sleep 0.1",
        env!("CARGO_BIN_EXE_rlock")
    );
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", &script])
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .env("RLOCK_HISTORY_RETENTION", "90s");
    let out = in_pid_namespace(&sh).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    eventually(Duration::from_secs(10), "the keeper releases", || {
        events(&history(&r, "kept", &[])) == ["granted", "released"]
    });
    for k in [":log", ":n"] {
        let ttl: i64 = r.cmd(&["PTTL", &format!("{}{k}", r.key("kept"))]);
        assert!(ttl > 0 && ttl <= 90_000 + slack(90_000), "{k}: PTTL {ttl}");
    }
}

/// A keeper that finds its lock gone records `lost` too (and stops the
/// script it keeps the lock for, as for any loss).
#[test]
fn a_keeper_that_finds_its_lock_gone_shows_lost() {
    let r = Redis::shared();
    let script = format!(
        "'{}' acquire kl --keep --ttl 600ms >/dev/null && sleep 30",
        env!("CARGO_BIN_EXE_rlock")
    );
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", &script])
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix);
    let child = in_pid_namespace(&sh).spawn().unwrap();
    eventually(Duration::from_secs(10), "the keeper holds the lock", || {
        r.held("kl")
    });
    delete_state(&r, "kl");
    eventually(Duration::from_secs(10), "the loss is recorded", || {
        events(&history(&r, "kl", &[])).contains(&"lost")
    });
    // The reads above look like any call: one that came before the
    // keeper's renewal found the grant without its state and recorded it
    // as expired (a deletion looks like an expiry), the loss then follows.
    let h = history(&r, "kl", &[]);
    let names = events(&h);
    assert!(
        names == ["granted", "lost"] || names == ["granted", "expired", "lost"],
        "{names:?}"
    );
    let lost = h.last().unwrap();
    assert_eq!(lost["reason"], "it expired or was deleted");
    assert_eq!(lost["pid"], h[0]["pid"]);
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the script was stopped: {out:?}");
}

/// Data rlock did not write at the history's keys is refused (64), and
/// nothing is written: before a grant, a history read, or a release.
#[test]
fn foreign_data_at_the_history_keys_is_refused_and_nothing_written() {
    let r = Redis::shared();
    for (key, suffix, cmd) in [
        ("f1", ":log", vec!["SET", "", "x"]),
        ("f2", ":n", vec!["SET", "", "x"]),
        ("f3", ":log", vec!["RPUSH", "", "x"]),
        ("f4", ":log", vec!["XADD", "", "*", "e", "granted"]),
    ] {
        let k = format!("{}{suffix}", r.key(key));
        let mut cmd = cmd;
        cmd[1] = &k;
        let _: redis::Value = r.cmd(&cmd);
        // (A list without a TTL passes the acquire's fast path, which
        // looks at the history's types only, through its first write.)
        if key != "f3" {
            rlock(&r)
                .args(["exec", key, "--", "true"])
                .run()
                .fails(64, "not an rlock lock");
        }
        rlock(&r)
            .args(["history", key])
            .run()
            .fails(64, "not an rlock lock");
        let left: Vec<String> = r.keys();
        assert_eq!(left, std::slice::from_ref(&k), "{key}");
        let _: i64 = r.cmd(&["DEL", &k]);
    }
    // A release that finds one there leaves the lock as it was.
    let mut l = r.locker();
    let req = rlock::Request::new(Duration::from_secs(10)).unwrap();
    let lease = l.acquire("f5", &req, None, &mut |_| {}).unwrap();
    let log = format!("{}:log", r.key("f5"));
    let _: i64 = r.cmd(&["DEL", &log]);
    let _: () = r.cmd(&["SET", &log, "x"]);
    assert!(l.release("f5", &lease.token).is_err());
    let holders: i64 = r.cmd(&["ZCARD", &format!("{}:h", r.key("f5"))]);
    assert_eq!(holders, 1, "the release changed the lock");
}

/// A lock name used once costs at most 2 KB of Redis memory, history
/// included (MEMORY USAGE summed over every key of the lock after one
/// `rlock exec NAME -- true`): CI jobs lock `deploy-$BUILD_ID` by the
/// thousand, and each name's history stays for the retention (docs/
/// guide.md, "History", has the sizing rule).
#[test]
fn a_lock_name_used_once_costs_at_most_2_kb() {
    let r = Redis::shared();
    let name = "deploy-1234567";
    rlock(&r).args(["exec", name, "--", "true"]).run().ok();
    let base = r.key(name);
    let keys: Vec<String> = r
        .keys()
        .into_iter()
        .filter(|k| k.starts_with(&base))
        .collect();
    let sizes: Vec<(String, i64)> = keys
        .iter()
        .map(|k| (k.clone(), r.cmd(&["MEMORY", "USAGE", k, "SAMPLES", "0"])))
        .collect();
    let total: i64 = sizes.iter().map(|(_, b)| b).sum();
    // The history and its counters are there, and count.
    for suffix in [":log", ":n"] {
        assert!(keys.contains(&format!("{base}{suffix}")), "{keys:?}");
    }
    assert!(total <= 2048, "{total} bytes: {sizes:?}");
}
