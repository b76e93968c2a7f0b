//! `history --all` and `--follow`: every lock's events in time order,
//! on one Redis, a Cluster and RedLock.

use super::*;

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
    // Each grant a majority counted was released: one, or more when a slow
    // round's grant was given back before the grant that held (a loaded
    // machine's RedLock retries count on the masters too).
    let m = rl().args(["metrics"]).run().ok().stdout;
    let value = |family: &str| -> Option<u64> {
        let sample = format!("{family}{{lock=\"y\"}} ");
        m.lines()
            .find_map(|l| l.strip_prefix(sample.as_str())?.trim().parse().ok())
    };
    let released = value("rlock_lock_released_total");
    assert!(
        released.is_some_and(|n| n >= 1) && released == value("rlock_lock_grants_total"),
        "{m}"
    );
}
