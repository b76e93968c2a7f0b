//! `rlock history`: every event of a lock, written by the script call that
//! changes the lock, read back through the real binary (`--json` parsed
//! with serde_json), and the history's bounds (cap, retention) and
//! counters (P{K}:n).

use std::time::Duration;

use serde_json::Value;

use crate::util::*;

/// `rlock history KEY --json [more]`: one object per line.
fn history(r: &Redis, key: &str, more: &[&str]) -> Vec<Value> {
    let run = rlock(r)
        .args(["history", key, "--json"])
        .args(more)
        .run()
        .ok();
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn events(h: &[Value]) -> Vec<&str> {
    h.iter().map(|e| e["event"].as_str().unwrap()).collect()
}

/// The counter `field` in P{K}:n (0 if absent).
fn counter(r: &Redis, key: &str, field: &str) -> i64 {
    let v: Option<i64> = r.cmd(&["HGET", &format!("{}:n", r.key(key)), field]);
    v.unwrap_or(0)
}

/// Grants with no end event yet, as the scripts count them (open_grants
/// in lua/part/log.lua): every grant ended once, none twice.
fn open_grants(r: &Redis, key: &str) -> i64 {
    counter(r, key, "grants")
        - ["released", "overruns", "expired", "closed"]
            .iter()
            .map(|c| counter(r, key, c))
            .sum::<i64>()
}

/// Delete the lock's state, as an admin's DEL would, but not its history.
fn delete_state(r: &Redis, key: &str) {
    for k in r.keys() {
        if k.starts_with(&r.key(key)) && !k.ends_with(":log") && !k.ends_with(":n") {
            let _: () = r.cmd(&["DEL", &k]);
        }
    }
}

/// `at` is RFC 3339 in UTC with milliseconds: 2026-11-25T20:31:02.123Z.
fn assert_rfc3339_ms(at: &str) {
    let b = at.as_bytes();
    assert_eq!(b.len(), 24, "{at}");
    assert!(at.ends_with('Z') && b[10] == b'T' && b[19] == b'.', "{at}");
    assert!(humantime::parse_rfc3339(at).is_ok(), "{at}");
}

/// Two runs of exec: granted and released each, oldest first, with the
/// command's exit code, held and waited times, the holder (host, pid,
/// user, cmd) and the fence; counters match.
#[test]
fn exec_records_granted_and_released_with_its_exit_code_oldest_first() {
    let r = Redis::shared();
    rlock(&r)
        .args(["exec", "job", "--", "sh", "-c", "exit 3"])
        .run()
        .code(3);
    rlock(&r).args(["exec", "job", "--", "true"]).run().ok();
    let h = history(&r, "job", &[]);
    assert_eq!(events(&h), ["granted", "released", "granted", "released"]);
    for e in &h {
        assert_rfc3339_ms(e["at"].as_str().unwrap());
        for k in ["host", "pid", "user", "cmd", "fence"] {
            assert!(!e[k].is_null(), "{k} missing in {e}");
        }
        assert!(!e.to_string().contains("token"), "{e}");
    }
    assert_eq!(h[0]["cmd"], "sh -c exit 3");
    assert_eq!(h[1]["exit_code"], 3);
    assert_eq!(h[3]["exit_code"], 0);
    assert!(h[0]["waited_ms"].is_u64() && h[0].get("held_ms").is_none());
    assert!(h[1]["held_ms"].is_u64() && h[1].get("waited_ms").is_none());
    assert_eq!(h[0]["fence"], h[1]["fence"]);
    assert!(h[2]["fence"].as_u64() > h[0]["fence"].as_u64());
    assert_eq!(h[0]["pid"], h[1]["pid"]);
    assert_ne!(h[0]["pid"], h[2]["pid"]);
    let ats: Vec<&str> = h.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] <= w[1]), "{ats:?}");
    assert_eq!(counter(&r, "job", "grants"), 2);
    assert_eq!(counter(&r, "job", "released"), 2);
    assert_eq!(open_grants(&r, "job"), 0);
    // The text form: a header and one aligned row per event.
    let text = rlock(&r).args(["history", "job"]).run().ok().stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].starts_with("TIME (UTC)") && lines[0].contains("EVENT"));
    let col = lines[0].find("EVENT").unwrap();
    for l in &lines[1..] {
        assert!(
            l[col..].starts_with("granted") || l[col..].starts_with("released"),
            "{text}"
        );
    }
    assert!(lines[2].contains("exit 3"), "{text}");
}

/// A command that cannot start: rlock exits 127 (not found) or 126 (not
/// executable: a directory), and the `released` of its short hold says so.
#[test]
fn a_command_that_cannot_start_is_released_with_127_or_126() {
    let r = Redis::shared();
    rlock(&r)
        .args(["exec", "nostart", "--", "/nonexistent/cmd"])
        .run()
        .code(127);
    rlock(&r)
        .args(["exec", "nostart", "--", "/"])
        .run()
        .code(126);
    let h = history(&r, "nostart", &[]);
    assert_eq!(events(&h), ["granted", "released", "granted", "released"]);
    assert_eq!(h[1]["exit_code"], 127, "{h:?}");
    assert_eq!(h[3]["exit_code"], 126, "{h:?}");
}

/// `acquire` prints a token; no form of the history shows it.
#[test]
fn no_token_shows_in_the_history() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "t", "--ttl", "10s"])
        .run()
        .ok()
        .token();
    rlock(&r).args(["release", "t", "--token", &tok]).run().ok();
    for json in [false, true] {
        let mut args = vec!["history", "t"];
        if json {
            args.push("--json");
        }
        let out = rlock(&r).args(args).run().ok().stdout;
        assert!(out.contains("released"), "{out}");
        assert!(!out.contains(&tok), "{out}");
    }
    let raw: redis::Value = r.cmd(&["LRANGE", &format!("{}:log", r.key("t")), "0", "-1"]);
    assert!(!format!("{raw:?}").contains(&tok));
}

/// A lease that runs out with nobody releasing it shows `expired`: found
/// by the history read itself when the whole state ran out unnoticed, and
/// by the next acquire's prune when a waiter kept the state alive.
#[test]
fn a_lease_nobody_released_shows_expired() {
    let r = Redis::shared();
    // The acquire's process exits at once; its lease (200 ms) runs out.
    rlock(&r)
        .args(["acquire", "gone", "--ttl", "200ms"])
        .run()
        .ok();
    std::thread::sleep(Duration::from_millis(400));
    let h = history(&r, "gone", &[]);
    assert_eq!(events(&h), ["granted", "expired"]);
    assert_eq!(h[1]["fence"], h[0]["fence"]);
    assert_eq!(h[1]["pid"], h[0]["pid"]);
    // Read again: settled once, not twice.
    assert_eq!(events(&history(&r, "gone", &[])), ["granted", "expired"]);
    assert_eq!(counter(&r, "gone", "expired"), 1);
    assert_eq!(open_grants(&r, "gone"), 0);

    // Unnoticed too, then a fresh acquire settles it before its grant.
    rlock(&r)
        .args(["acquire", "gone", "--ttl", "200ms"])
        .run()
        .ok();
    std::thread::sleep(Duration::from_millis(400));
    rlock(&r).args(["exec", "gone", "--", "true"]).run().ok();
    let h = history(&r, "gone", &[]);
    assert_eq!(
        events(&h),
        [
            "granted", "expired", "granted", "expired", "granted", "released"
        ]
    );

    // Pruned by a waiter's acquire: the holder's lease ends while it waits.
    rlock(&r)
        .args(["acquire", "pruned", "--ttl", "700ms"])
        .run()
        .ok();
    rlock(&r)
        .args(["exec", "pruned", "-w", "10s", "--", "true"])
        .run()
        .ok();
    let h = history(&r, "pruned", &[]);
    assert_eq!(events(&h), ["granted", "expired", "granted", "released"]);
    assert!(h[1]["held_ms"].as_u64().unwrap() >= 600, "{}", h[1]);
    assert!(h[2]["waited_ms"].as_u64().unwrap() > 0, "{}", h[2]);
}

/// Several grants whose state runs out unnoticed (three semaphore slots,
/// nobody releasing) are settled once each, with each grant's own fence
/// and holder, by whichever call comes first; a released one between
/// them is not. The uncontended path keeps no record per grant: the
/// counters hash has the counters only.
#[test]
fn unnoticed_expiries_settle_once_each_with_their_grants_fences() {
    let r = Redis::shared();
    rlock(&r)
        .args(["exec", "sem", "--limit", "3", "--", "true"])
        .run()
        .ok();
    for _ in 0..3 {
        rlock(&r)
            .args(["acquire", "sem", "--limit", "3", "--ttl", "300ms"])
            .run()
            .ok();
    }
    let fields: Vec<String> = r.cmd(&["HKEYS", &format!("{}:n", r.key("sem"))]);
    let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["grants", "released"]);
    assert_eq!(open_grants(&r, "sem"), 3);
    std::thread::sleep(Duration::from_millis(600));
    let h = history(&r, "sem", &[]);
    assert_eq!(
        events(&h),
        [
            "granted", "released", "granted", "granted", "granted", "expired", "expired", "expired"
        ]
    );
    let fences = |es: &[Value]| {
        let mut f: Vec<String> = es.iter().map(|e| e["fence"].to_string()).collect();
        f.sort_unstable();
        f
    };
    assert_eq!(fences(&h[2..5]), fences(&h[5..]));
    assert!(h[5..].iter().all(|e| e["pid"].is_u64()), "{h:?}");
    assert_eq!(counter(&r, "sem", "expired"), 3);
    assert_eq!(open_grants(&r, "sem"), 0);
    // Read again, and a fresh grant: nothing more to settle.
    rlock(&r)
        .args(["exec", "sem", "--limit", "3", "--", "true"])
        .run()
        .ok();
    assert_eq!(events(&history(&r, "sem", &[])).len(), 10);
    assert_eq!(counter(&r, "sem", "expired"), 3);
    assert_eq!(open_grants(&r, "sem"), 0);
}

/// An `rlock exec` killed with SIGKILL (its command dies with it): its
/// guard kills the command and gives the lock back (the history says
/// `released`); with the guard gone too, the lease would run out
/// (`expired`). Here the guard's release comes first.
#[test]
fn a_killed_exec_shows_released_by_its_guard() {
    let r = Redis::shared();
    let started = tmp_dir("history", "crash").join("started");
    let _ = std::fs::remove_file(&started);
    let child = rlock(&r)
        .args([
            "exec",
            "crash",
            "--ttl",
            "20s",
            "--",
            "sh",
            "-c",
            &format!("touch {}; exec sleep 30", started.display()),
        ])
        .spawn();
    // The command runs: its guard has what a release needs (sent before
    // the go; a kill between the grant and the go leaves it to the lease).
    eventually(Duration::from_secs(10), "the command to start", || {
        started.exists()
    });
    kill(child.id(), libc::SIGKILL);
    let _ = finish(child, "rlock exec crash");
    // Far sooner than the 20 s lease.
    eventually(Duration::from_secs(10), "the guard's release", || {
        !r.held("crash")
    });
    let h = history(&r, "crash", &[]);
    assert_eq!(events(&h), ["granted", "released"], "{h:?}");
    assert!(
        h[0]["cmd"].as_str().unwrap().ends_with("exec sleep 30"),
        "{h:?}"
    );
}

/// A waiter that gives up (-w) shows `timeout`, with how long it waited.
#[test]
fn a_waiter_that_gives_up_shows_timeout() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "busy", "--ttl", "30s"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["exec", "busy", "-w", "300ms", "--", "true"])
        .run()
        .code(75);
    rlock(&r)
        .args(["release", "busy", "--token", &tok])
        .run()
        .ok();
    let h = history(&r, "busy", &[]);
    assert_eq!(events(&h), ["granted", "timeout", "released"]);
    assert!(h[1]["waited_ms"].as_u64().unwrap() >= 300, "{}", h[1]);
    assert_eq!(h[1]["cmd"], "true");
    assert!(h[1].get("fence").unwrap().is_null());
    assert_eq!(counter(&r, "busy", "timeouts"), 1);
    // -n never queues: nothing to record.
    rlock(&r)
        .args(["acquire", "busy", "--ttl", "30s"])
        .run()
        .ok();
    rlock(&r)
        .args(["exec", "busy", "-n", "--", "true"])
        .run()
        .code(75);
    assert_eq!(counter(&r, "busy", "timeouts"), 1);
}

/// A --supersede waiter replaced by a newer one shows `superseded`, by
/// whom.
#[test]
fn a_replaced_supersede_waiter_shows_superseded() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "ci", "--ttl", "30s"])
        .run()
        .ok()
        .token();
    let old = rlock(&r)
        .args(["exec", "--supersede", "ci", "--", "echo", "old"])
        .spawn();
    r.await_waiters("ci", 1);
    let new = rlock(&r)
        .args(["exec", "--supersede", "ci", "--", "echo", "new"])
        .spawn();
    finish(old, "old waiter").code(75);
    rlock(&r)
        .args(["release", "ci", "--token", &tok])
        .run()
        .ok();
    finish(new, "new waiter").ok();
    let h = history(&r, "ci", &[]);
    assert_eq!(
        events(&h),
        ["granted", "superseded", "released", "granted", "released"]
    );
    assert_eq!(h[1]["cmd"], "echo old");
    assert!(h[1]["by"].as_str().unwrap().contains('@'), "{}", h[1]);
    assert_eq!(h[3]["cmd"], "echo new");
    assert_eq!(counter(&r, "ci", "superseded"), 1);
}

/// exec finds its lock gone at a renewal: `lost`, with the reason.
#[test]
fn an_exec_that_finds_its_lock_gone_shows_lost() {
    let r = Redis::shared();
    let child = rlock(&r)
        .args(["exec", "del", "--ttl", "600ms", "--", "sleep", "30"])
        .spawn();
    eventually(Duration::from_secs(10), "exec holds the lock", || {
        r.held("del")
    });
    delete_state(&r, "del");
    finish(child, "rlock exec del").code(79);
    let h = history(&r, "del", &[]);
    assert_eq!(events(&h), ["granted", "lost"], "{h:?}");
    assert_eq!(h[1]["reason"], "it expired or was deleted");
    assert_eq!(h[1]["fence"], h[0]["fence"]);
    assert_eq!(h[1]["cmd"], "sleep 30");
    assert_eq!(counter(&r, "del", "losses"), 1);
    assert_eq!(open_grants(&r, "del"), 0);
}

/// The library's release note: `overran` instead of `released` (counted
/// in overruns), and an exit code on a plain release.
#[test]
fn a_release_noted_as_overran_shows_overran() {
    let r = Redis::shared();
    let mut l = r.locker();
    let req = rlock::Request::new(Duration::from_secs(10));
    let lease = l.acquire("over", &req, None, &mut |_| {}).unwrap();
    let how = rlock::Release {
        all: true,
        min_hold: None,
        note: rlock::ReleaseNote {
            exit_code: Some(143),
            overran: true,
        },
        within: None,
    };
    l.release_with("over", &lease.token, &how).unwrap();
    let lease = l.acquire("over", &req, None, &mut |_| {}).unwrap();
    l.release("over", &lease.token).unwrap();
    let h = l.history("over", 10).unwrap();
    let names: Vec<&str> = h.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, ["granted", "overran", "granted", "released"]);
    assert_eq!(h[1].exit_code, Some(143));
    assert_eq!(h[3].exit_code, None);
    assert_eq!(counter(&r, "over", "overruns"), 1);
    assert_eq!(counter(&r, "over", "released"), 1);
    assert_eq!(counter(&r, "over", "grants"), 2);
}

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

/// The cap trims the list (once it is an eighth over the cap: with cap 5,
/// at every event past it), and both keys live for the retention after
/// the last event, never for ever.
#[test]
fn cap_and_retention_bound_the_history() {
    let r = Redis::shared();
    let mut l = r.locker();
    l.set_history(rlock::HistoryLimits {
        events: 5,
        retention: Duration::from_secs(3600),
    })
    .unwrap();
    let req = rlock::Request::new(Duration::from_secs(10));
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
        assert!(ttl > 0 && ttl <= 3_600_000, "{k}: PTTL {ttl}");
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
    assert!(ttl > 0 && ttl <= 90_000, "PTTL {ttl}");
    // The default retention is 7 days.
    rlock(&r).args(["exec", "dflt", "--", "true"]).run().ok();
    for k in [":log", ":n"] {
        let ttl: i64 = r.cmd(&["PTTL", &format!("{}{k}", r.key("dflt"))]);
        assert!(
            ttl > 7 * 86_400_000 - 60_000 && ttl <= 7 * 86_400_000,
            "PTTL {ttl}"
        );
    }
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
        assert!(ttl > 0 && ttl <= 90_000, "{k}: PTTL {ttl}");
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
    let req = rlock::Request::new(Duration::from_secs(10));
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

/// JSON lines of `rlock history --all --json [more]`, parsed.
fn all_lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// (lock, event) of each row.
fn rows(h: &[Value]) -> Vec<(String, String)> {
    h.iter()
        .map(|e| {
            (
                e["lock"].as_str().unwrap().into(),
                e["event"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// Each row's time is not before the one above.
fn in_time_order(h: &[Value]) -> bool {
    let at: Vec<&str> = h.iter().map(|e| e["at"].as_str().unwrap()).collect();
    at.windows(2).all(|w| w[0] <= w[1])
}

#[test]
fn all_merges_every_locks_events_in_time_order() {
    let r = Redis::shared();
    rlock(&r).args(["exec", "a", "--", "true"]).run().ok();
    rlock(&r).args(["exec", "b", "--", "true"]).run().ok();
    rlock(&r).args(["acquire", "a", "--ttl", "60s"]).run().ok();
    let h = all_lines(
        &rlock(&r)
            .args(["history", "--all", "--json"])
            .run()
            .ok()
            .stdout,
    );
    let want = [
        ("a", "granted"),
        ("a", "released"),
        ("b", "granted"),
        ("b", "released"),
        ("a", "granted"),
    ];
    let got = rows(&h);
    assert_eq!(
        got,
        want.map(|(l, e)| (l.to_string(), e.to_string())),
        "{h:?}"
    );
    assert!(in_time_order(&h));
    // --limit: the last N of all; --since: nothing older.
    let h = all_lines(
        &rlock(&r)
            .args(["history", "--all", "--json", "--limit", "2"])
            .run()
            .ok()
            .stdout,
    );
    assert_eq!(
        rows(&h),
        [
            ("b".to_string(), "released".to_string()),
            ("a".into(), "granted".into())
        ]
    );
    std::thread::sleep(Duration::from_millis(1100));
    rlock(&r).args(["exec", "c", "--", "true"]).run().ok();
    let h = all_lines(
        &rlock(&r)
            .args(["history", "--all", "--json", "--since", "1s"])
            .run()
            .ok()
            .stdout,
    );
    assert_eq!(
        rows(&h),
        [
            ("c".to_string(), "granted".to_string()),
            ("c".into(), "released".into())
        ]
    );
    // Text: the lock's name in each row.
    let text = rlock(&r).args(["history", "--all"]).run().ok().stdout;
    assert!(text.lines().any(|l| l.contains("  c  released")), "{text}");
    // A name and --all together, or neither: a usage error.
    rlock(&r)
        .args(["history", "a", "--all"])
        .run()
        .fails(64, "cannot be used");
    rlock(&r).args(["history"]).run().fails(64, "required");
}

#[test]
fn follow_prints_new_events_as_they_come() {
    let r = Redis::shared();
    rlock(&r).args(["exec", "f", "--", "true"]).run().ok();
    let mut follow = rlock(&r)
        .args(["history", "--all", "--follow", "--json"])
        .spawn();
    let out = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let next = || {
        let l = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a line within 30s");
        let v: Value = serde_json::from_str(&l).unwrap();
        (
            v["lock"].as_str().unwrap().to_string(),
            v["event"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(next(), ("f".to_string(), "granted".to_string()));
    assert_eq!(next(), ("f".to_string(), "released".to_string()));
    rlock(&r).args(["exec", "g", "--", "true"]).run().ok();
    assert_eq!(next(), ("g".to_string(), "granted".to_string()));
    assert_eq!(next(), ("g".to_string(), "released".to_string()));
    // Nothing printed twice.
    assert!(rx.recv_timeout(Duration::from_millis(2500)).is_err());
    let _ = follow.kill();
    let _ = follow.wait();
}

#[test]
fn all_reads_every_cluster_master() {
    let c = Cluster::start(3);
    let rc = || {
        bare_rlock()
            .env("RLOCK_URL", &c.urls())
            .env("RLOCK_CLUSTER", "1")
    };
    let keys: Vec<String> = (0..12).map(|i| format!("job-{i}")).collect();
    for k in &keys {
        rc().args(["exec", k, "--", "true"]).run().ok();
    }
    let h = all_lines(
        &rc()
            .args(["history", "--all", "--json", "--limit", "100"])
            .run()
            .ok()
            .stdout,
    );
    assert_eq!(h.len(), 24, "{h:?}");
    assert!(in_time_order(&h));
    for k in &keys {
        assert_eq!(
            h.iter().filter(|e| e["lock"] == k.as_str()).count(),
            2,
            "{k}"
        );
    }
}

#[test]
fn all_under_redlock_shows_what_a_majority_has() {
    let ms: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let urls = ms.iter().map(Redis::url).collect::<Vec<_>>().join(",");
    let rl = || bare_rlock().env("RLOCK_URL", &urls);
    for k in ["x", "y"] {
        rl().args(["exec", k, "--", "true"]).run().ok();
    }
    let h = all_lines(&rl().args(["history", "--all", "--json"]).run().ok().stdout);
    let locks: Vec<&str> = h.iter().map(|e| e["lock"].as_str().unwrap()).collect();
    assert_eq!(locks, ["x", "x", "y", "y"], "{h:?}");
    let m = rl().args(["metrics"]).run().ok().stdout;
    assert!(
        m.contains("rlock_lock_released_total{lock=\"y\"} 1\n"),
        "{m}"
    );
}
