//! The monitor role (docs/deployments.md, "Roles"): a user Redis lets write
//! nothing runs every read command, and every write command fails as that
//! user with one line and changes nothing. The user is made from the very
//! line the doc gives (Redis 7 and Valkey: read-only keys and script
//! calls; Redis 6.2: the doc's line for it).

use std::time::{Duration, Instant};

use crate::exporter::Exporter;
use crate::util::*;

/// The doc's monitor ACL line for the server under test, word for word:
/// the Redis 7 one (`%R~`, EVALSHA_RO), or on Redis 6.2 the one with
/// `+evalsha`.
fn monitor_acl() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deployments.md"))
        .unwrap();
    let lines: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("ACL SETUSER rlock-monitor "))
        .collect();
    assert_eq!(lines.len(), 2, "docs/deployments.md: {lines:?}");
    let six = redis_version() < (7, 0);
    let line = lines
        .iter()
        .find(|l| l.contains(" +evalsha ") == six)
        .expect("a line for Redis 7 and one for 6.2");
    line.split_whitespace().map(str::to_string).collect()
}

/// `r`'s monitor user, created from the doc's line: its URL.
fn monitor(r: &Redis) -> String {
    let acl = monitor_acl();
    let args: Vec<&str> = acl.iter().map(String::as_str).collect();
    let _: () = r.cmd(&args);
    let password = acl
        .iter()
        .find_map(|w| w.strip_prefix('>'))
        .expect("a password");
    format!("redis://rlock-monitor:{password}@127.0.0.1:{}", r.port)
}

/// Every key with its type, value (DUMP) and PTTL, sorted by key.
pub(crate) fn dump(r: &Redis) -> Vec<(String, String, Vec<u8>, i64)> {
    r.keys()
        .into_iter()
        .map(|k| {
            let t: String = r.cmd(&["TYPE", &k]);
            let v: Vec<u8> = r.cmd(&["DUMP", &k]);
            let ttl: i64 = r.cmd(&["PTTL", &k]);
            (k, t, v, ttl)
        })
        .collect()
}

/// Nothing written between `before` and `after`, taken `elapsed` apart:
/// the same keys, types and values, and each TTL only run down (by at
/// most `elapsed`, plus a second for a loaded machine), none set anew.
#[track_caller]
pub(crate) fn unchanged(
    before: &[(String, String, Vec<u8>, i64)],
    after: &[(String, String, Vec<u8>, i64)],
    elapsed: Duration,
) {
    let names = |d: &[(String, String, Vec<u8>, i64)]| -> Vec<String> {
        d.iter().map(|k| k.0.clone()).collect()
    };
    assert_eq!(names(before), names(after), "keys changed");
    let slack = i64::try_from(elapsed.as_millis()).unwrap() + 1_000;
    for (b, a) in before.iter().zip(after) {
        assert_eq!((&b.1, &b.2), (&a.1, &a.2), "{} changed", b.0);
        if b.3 < 0 {
            assert_eq!(b.3, a.3, "{}: PTTL {} then {}", b.0, b.3, a.3);
        } else {
            assert!(
                a.3 <= b.3 && b.3 - a.3 <= slack,
                "{}: PTTL {} then {} ({elapsed:?} apart)",
                b.0,
                b.3,
                a.3
            );
        }
    }
}

#[test]
fn the_monitor_user_reads_everything_and_writes_nothing() {
    let r = Redis::start();
    let url = monitor(&r);
    let mon = |a: &[&str]| bare_rlock().env("RLOCK_URL", &url).args(a).run();
    // Held, with a waiter; idle with history; a lease that ran out with
    // nobody noticing (its `expired` not recorded yet); a stale index
    // entry (taken and given back: the entry stays, the lock is free).
    let tok = rlock(&r)
        .args(["acquire", "held", "--ttl", "1h"])
        .run()
        .ok()
        .token();
    let mut waiter = rlock(&r).args(["acquire", "held", "-w", "1h"]).spawn();
    r.await_waiters("held", 1);
    rlock(&r).args(["exec", "idle", "--", "true"]).run().ok();
    rlock(&r)
        .args(["acquire", "gone", "--ttl", "200ms"])
        .run()
        .ok();
    let stale = rlock(&r).args(["acquire", "stale"]).run().ok().token();
    rlock(&r)
        .args(["release", "stale", "--token", &stale])
        .run()
        .ok();
    let index: Vec<String> = r.keys().into_iter().filter(|k| is_index_key(k)).collect();
    let in_index = |name: &str| {
        index.iter().any(|k| {
            let s: Option<String> = r.cmd(&["ZSCORE", k, name]);
            s.is_some()
        })
    };
    assert!(in_index("stale"));
    std::thread::sleep(Duration::from_millis(400));

    // The waiter, seen while it calls in; then stopped, so that nothing
    // but the commands below could write.
    let s = mon(&["status", "held", "--json"]).ok();
    assert!(s.stdout.contains("\"waiting\":1"), "{}", s.stdout);
    kill(waiter.id(), libc::SIGSTOP);
    let before = dump(&r);
    let t0 = Instant::now();

    let out = mon(&["status", "held"]).ok().stdout;
    assert!(out.contains("held: held"), "{out}");
    mon(&["status", "idle"]).ok();
    let list = mon(&["list"]).ok().stdout;
    assert!(list.contains("held: held"), "{list}");
    assert!(!list.contains("stale"), "{list}");
    mon(&["list", "--json"]).ok();
    assert!(mon(&["top", "--once"]).ok().stdout.contains("\nheld "));
    assert!(
        mon(&["top", "--once", "--json"])
            .ok()
            .stdout
            .contains("\"held\"")
    );
    let m = mon(&["metrics"]).ok().stdout;
    for want in [
        "rlock_lock_holders{lock=\"held\"} 1",
        "rlock_lock_waiters{lock=\"held\"} 1",
        "rlock_lock_grants_total{lock=\"idle\"} 1",
        "rlock_lock_released_total{lock=\"idle\"} 1",
        // Not recorded yet: counted from the open grants.
        "rlock_lock_expired_total{lock=\"gone\"} 1",
    ] {
        assert!(m.contains(want), "{want} not in:\n{m}");
    }
    let dir = tmp_dir("monitor", "textfile");
    let file = dir.join("rlock.prom");
    mon(&["metrics", "--textfile", file.to_str().unwrap()]).ok();
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("{lock=\"held\"} 1")
    );
    let events = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["event"].as_str().unwrap().to_string()
            })
            .collect()
    };
    assert_eq!(
        events(&mon(&["history", "held", "--json"]).ok().stdout),
        ["granted"]
    );
    assert_eq!(
        events(&mon(&["history", "idle", "--json"]).ok().stdout),
        ["granted", "released"]
    );
    // The expiry shown, not recorded: as a read by a user that may write
    // shows it (and would record it).
    let gone = mon(&["history", "gone", "--json"]).ok().stdout;
    assert_eq!(events(&gone), ["granted", "expired"]);
    let lines: Vec<serde_json::Value> = gone
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[1]["fence"], lines[0]["fence"]);
    let all = mon(&["history", "--all", "--json"]).ok().stdout;
    for lock in ["held", "idle", "gone", "stale"] {
        assert!(
            all.contains(&format!("\"lock\":\"{lock}\"")),
            "{lock}: {all}"
        );
    }
    mon(&["history", "--all", "--since", "1h"]).ok();
    // doctor runs every check; its permissions check is a locking user's:
    // this one cannot lock (exit 78), and that is its only finding.
    let doc = mon(&["doctor"]).code(78);
    assert!(doc.stdout.contains("permissions"), "{}", doc.stdout);
    assert!(doc.stdout.contains("clock"), "{}", doc.stdout);
    assert!(!doc.stderr.contains("panicked"), "{}", doc.stderr);

    let after_reads = dump(&r);
    unchanged(&before, &after_reads, t0.elapsed());
    assert!(in_index("stale"), "a monitor's list removed an index entry");

    // Every write: one line naming the refused permission, nothing
    // changed, nothing held.
    let t1 = Instant::now();
    for a in [
        &["acquire", "new"][..],
        &["acquire", "held", "--no-wait"],
        &["exec", "new", "--", "true"],
        &["release", "held", "--token", &tok],
        // (Longer than the lease: a renewal never shortens one, and one
        // with nothing to write would pass the command list on 6.2.)
        &["renew", "held", "--token", &tok, "--ttl", "2h"],
        &["break", "held", "--yes", "--reason", "monitor"],
    ] {
        let run = mon(a);
        assert_eq!(run.code, 77, "{a:?} as the monitor user: {}", run.stderr);
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{a:?}: {}", run.stderr);
        assert!(lines[0].starts_with("rlock: "), "{a:?}: {}", run.stderr);
        // (Redis 6.2 gives a refusal inside a script no code of its own.)
        let e = run.stderr.to_lowercase();
        assert!(
            e.contains("noperm") || e.contains("can't run this command"),
            "{a:?}: {}",
            run.stderr
        );
    }
    unchanged(&after_reads, &dump(&r), t1.elapsed());

    // The writers still tidy what the monitor left: a reader that may
    // write records the expiry, and its list drops the stale entry.
    rlock(&r).args(["history", "gone"]).run().ok();
    let n: Option<i64> = r.cmd(&["HGET", &format!("{}:n", r.key("gone")), "expired"]);
    assert_eq!(n, Some(1));
    rlock(&r).args(["list"]).run().ok();
    assert!(!in_index("stale"));
    kill(waiter.id(), libc::SIGKILL);
    let _ = waiter.wait();
    rlock(&r)
        .args(["release", "held", "--token", &tok])
        .run()
        .ok();
}

/// The exporter (`metrics --listen`), a long-running process with
/// credentials, runs as the monitor user.
#[test]
fn the_exporter_runs_as_the_monitor_user() {
    let r = Redis::start();
    let url = monitor(&r);
    rlock(&r)
        .args(["acquire", "exported", "--ttl", "1h"])
        .run()
        .ok();
    let e = Exporter::start(&r, &url);
    let body = e.scrape();
    assert!(body.contains("\nrlock_up 1\n"), "{body}");
    assert!(
        body.contains("rlock_lock_holders{lock=\"exported\"} 1"),
        "{body}"
    );
}
