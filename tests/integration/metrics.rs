//! `rlock metrics`: the Prometheus text format, read back by a real parser
//! (the official Python client's, `prometheus_client.parser`, pip-installed
//! into target/ once), with values checked against known lock states.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use crate::util::*;

/// The pinned parser, installed once per target dir (pip needs the
/// network the first time; a missing pip fails the test, never skips it).
pub(crate) fn parser_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/prom-client");
        if !dir.join("prometheus_client/parser.py").exists() {
            let ok = Command::new("python3")
                .args(["-m", "pip", "install", "-q", "--target"])
                .arg(&dir)
                .arg("prometheus_client==0.21.1")
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "pip install prometheus_client failed (python3 -m pip)");
        }
        dir
    })
    .clone()
}

/// One sample as the parser read it.
#[derive(Debug)]
struct Sample {
    family: String,
    kind: String,
    value: f64,
}

/// `text` parsed by prometheus_client: per (sample name, lock label), the
/// sample; the parser rejects anything malformed (the test then fails).
fn parse(text: &str) -> BTreeMap<(String, String), Sample> {
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        out.append([f.name, f.type, f.documentation, s.name, s.labels, s.value])
print(json.dumps(out))
"#;
    let out = fed(
        Command::new("python3")
            .args(["-c", script])
            .env("PYTHONPATH", parser_dir()),
        text,
    );
    assert!(
        out.status.success(),
        "the parser refused:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut samples = BTreeMap::new();
    for r in rows {
        assert_ne!(r[2], "", "a family without HELP: {r}");
        let labels = r[4].as_object().unwrap();
        assert_eq!(labels.len(), 1, "{r}");
        let key = (
            r[3].as_str().unwrap().to_string(),
            labels["lock"].as_str().unwrap().to_string(),
        );
        let s = Sample {
            family: r[0].as_str().unwrap().to_string(),
            kind: r[1].as_str().unwrap().to_string(),
            value: r[5].as_f64().unwrap(),
        };
        assert!(samples.insert(key, s).is_none(), "a sample twice: {r}");
    }
    samples
}

fn waiter(r: &Redis, key: &str, n: u64) -> Child {
    let c = rlock(r)
        .args(["exec", key, "-w", "60s", "--", "true"])
        .spawn();
    r.await_waiters(key, n);
    c
}

#[test]
fn a_real_parser_reads_the_values_of_known_locks() {
    let r = Redis::shared();
    let odd = r#"we"ird\name"#;
    rlock(&r).args(["acquire", odd, "--ttl", "60s"]).run().ok();
    for _ in 0..2 {
        rlock(&r)
            .args(["acquire", "sem", "--limit", "3", "--ttl", "60s"])
            .run()
            .ok();
    }
    rlock(&r)
        .args(["acquire", "idle", "--ttl", "60s"])
        .run()
        .ok();
    let mut w = vec![waiter(&r, odd, 1), waiter(&r, odd, 2)];
    std::thread::sleep(Duration::from_millis(1200));
    let text = rlock(&r).args(["metrics"]).run().ok().stdout;
    for mut c in w.drain(..) {
        let _ = c.kill();
        let _ = c.wait();
    }
    // Each family once, HELP then TYPE.
    for family in [
        "rlock_lock_holders",
        "rlock_lock_waiters",
        "rlock_lock_oldest_wait_seconds",
        "rlock_lock_held_seconds",
        "rlock_lock_grants_total",
        "rlock_lock_losses_total",
        "rlock_lock_timeouts_total",
        "rlock_lock_breaks_total",
        "rlock_lock_overruns_total",
        "rlock_lock_released_total",
        "rlock_lock_expired_total",
        "rlock_lock_superseded_total",
        "rlock_lock_lease_left_seconds",
        "rlock_lock_renewed_seconds_ago",
        "rlock_lock_limit",
    ] {
        assert_eq!(
            text.matches(&format!("# TYPE {family} ")).count(),
            1,
            "{text}"
        );
        assert_eq!(
            text.matches(&format!("# HELP {family} ")).count(),
            1,
            "{text}"
        );
    }
    let s = parse(&text);
    let get = |name: &str, lock: &str| {
        s.get(&(name.to_string(), lock.to_string()))
            .unwrap_or_else(|| panic!("no {name} for {lock:?} in\n{text}"))
    };
    assert_eq!(get("rlock_lock_holders", odd).value, 1.0);
    assert_eq!(get("rlock_lock_waiters", odd).value, 2.0);
    assert_eq!(get("rlock_lock_holders", "sem").value, 2.0);
    assert_eq!(get("rlock_lock_waiters", "sem").value, 0.0);
    assert_eq!(get("rlock_lock_waiters", "idle").value, 0.0);
    let oldest = get("rlock_lock_oldest_wait_seconds", odd).value;
    assert!((1.0..60.0).contains(&oldest), "{oldest}");
    assert_eq!(get("rlock_lock_oldest_wait_seconds", "sem").value, 0.0);
    let held = get("rlock_lock_held_seconds", odd).value;
    assert!(held >= oldest && held < 60.0, "{held} {oldest}");
    let g = get("rlock_lock_holders", "sem");
    assert_eq!(
        (g.family.as_str(), g.kind.as_str()),
        ("rlock_lock_holders", "gauge")
    );
    let c = get("rlock_lock_grants_total", "sem");
    assert_eq!(
        (c.family.as_str(), c.kind.as_str()),
        ("rlock_lock_grants", "counter")
    );
    assert_eq!(get("rlock_lock_limit", "sem").value, 3.0);
    let left = get("rlock_lock_lease_left_seconds", "sem").value;
    assert!(left > 0.0 && left <= 60.0, "{left}");
    // Three held locks, fifteen families: nothing else.
    assert_eq!(s.len(), 45, "{s:?}");
}

#[test]
fn no_lock_in_use_is_help_and_type_lines_only() {
    let r = Redis::shared();
    let text = rlock(&r).args(["metrics"]).run().ok().stdout;
    assert!(text.lines().all(|l| l.starts_with("# ")), "{text}");
    assert!(parse(&text).is_empty());
}

#[test]
fn the_pattern_selects_locks() {
    let r = Redis::shared();
    for k in ["app-a", "other"] {
        rlock(&r).args(["acquire", k, "--ttl", "60s"]).run().ok();
    }
    let s = parse(&rlock(&r).args(["metrics", "app-*"]).run().ok().stdout);
    let locks: std::collections::BTreeSet<&str> = s.keys().map(|(_, l)| l.as_str()).collect();
    assert_eq!(locks.into_iter().collect::<Vec<_>>(), ["app-a"]);
}

#[test]
fn bad_input_is_refused_with_64_and_nothing_written() {
    let r = Redis::shared();
    for (args, needle) in [
        (&["metrics", "a\u{7}"][..], "control characters"),
        (&["metrics", "x\ny"], "control characters"),
        (&["metrics", "a", "b"], "unexpected argument"),
        (&["metrics", "--json"], "--json"),
    ] {
        rlock(&r).args(args).run().fails(64, needle);
    }
    assert!(r.keys().is_empty(), "{:?}", r.keys());
}

#[test]
fn the_counters_follow_the_lock_history() {
    let r = Redis::shared();
    for _ in 0..3 {
        rlock(&r).args(["exec", "c", "--", "true"]).run().ok();
    }
    rlock(&r).args(["acquire", "c", "--ttl", "60s"]).run().ok();
    // A waiter that gives up: a timeout.
    rlock(&r)
        .args(["exec", "c", "-w", "0.3s", "--", "true"])
        .run()
        .code(75);
    let s = parse(&rlock(&r).args(["metrics"]).run().ok().stdout);
    let get = |name: &str| s[&(name.to_string(), "c".to_string())].value;
    assert_eq!(get("rlock_lock_grants_total"), 4.0);
    assert_eq!(get("rlock_lock_timeouts_total"), 1.0);
    assert_eq!(get("rlock_lock_losses_total"), 0.0);
    assert_eq!(get("rlock_lock_breaks_total"), 0.0);
    assert_eq!(get("rlock_lock_overruns_total"), 0.0);
    // top shows the same history: 4 grants in the last minute, and the
    // timeout as the last event.
    let out = rlock(&r).args(["top", "--once"]).run().ok().stdout;
    let row = out.lines().find(|l| l.starts_with("c ")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!((cells[7], cells[8]), ("4", "timeout"), "{out}");
}

#[test]
fn idle_locks_keep_their_counters_and_expiries_count_once() {
    let r = Redis::shared();
    for _ in 0..3 {
        rlock(&r).args(["exec", "c", "--", "true"]).run().ok();
    }
    // A holder that went away without releasing: its lease runs out
    // unnoticed (nobody calls the lock), and is counted when read.
    rlock(&r)
        .args(["acquire", "gone", "--ttl", "1s"])
        .run()
        .ok();
    std::thread::sleep(Duration::from_millis(1500));
    let text = rlock(&r).args(["metrics"]).run().ok().stdout;
    let s = parse(&text);
    let get = |name: &str, lock: &str| {
        s.get(&(name.to_string(), lock.to_string()))
            .unwrap_or_else(|| panic!("no {name} for {lock:?} in\n{text}"))
            .value
    };
    assert_eq!(get("rlock_lock_grants_total", "c"), 3.0);
    assert_eq!(get("rlock_lock_released_total", "c"), 3.0);
    assert_eq!(get("rlock_lock_holders", "c"), 0.0);
    assert_eq!(get("rlock_lock_lease_left_seconds", "c"), 0.0);
    assert_eq!(get("rlock_lock_expired_total", "gone"), 1.0);
    assert_eq!(get("rlock_lock_released_total", "gone"), 0.0);
    // Idle: no renewal age, no limit (the state that says it is gone).
    for name in ["rlock_lock_renewed_seconds_ago", "rlock_lock_limit"] {
        assert!(
            !s.contains_key(&(name.to_string(), "c".to_string())),
            "{text}"
        );
    }
    // The history read records the expiry; the counter stays at 1.
    rlock(&r).args(["history", "gone"]).run().ok();
    let s = parse(&rlock(&r).args(["metrics"]).run().ok().stdout);
    assert_eq!(
        s[&("rlock_lock_expired_total".to_string(), "gone".to_string())].value,
        1.0
    );
    for k in r.keys() {
        let ttl: i64 = r.cmd(&["PTTL", &k]);
        assert!(ttl > 0, "{k} {ttl}");
    }
}

#[test]
fn renewals_show_in_the_renewal_age() {
    let r = Redis::shared();
    let mut c = rlock(&r)
        .args(["exec", "slow", "--ttl", "3s", "--", "sleep", "7"])
        .spawn();
    // Held past its first TTL: renewed at least once since the grant.
    let mut held = 0.0;
    for _ in 0..200 {
        let s = parse(&rlock(&r).args(["metrics"]).run().ok().stdout);
        let key = |n: &str| (n.to_string(), "slow".to_string());
        if let Some(h) = s.get(&key("rlock_lock_held_seconds")) {
            held = h.value;
            if held >= 4.0 {
                let renewed = s[&key("rlock_lock_renewed_seconds_ago")].value;
                assert!(renewed < held - 0.5, "renewed {renewed}s ago, held {held}s");
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // (The command ends by itself: no process left behind.)
    assert!(c.wait().unwrap().success());
    assert!(held >= 4.0, "{held}");
}

#[test]
fn groups_fold_the_locks_a_glob_matches() {
    let r = Redis::shared();
    for k in ["job:1", "job:2", "job:2", "deploy"] {
        rlock(&r).args(["exec", k, "--", "true"]).run().ok();
    }
    rlock(&r)
        .args(["acquire", "job:3", "--ttl", "60s"])
        .run()
        .ok();
    let text = rlock(&r)
        .args(["metrics", "--group", "job:*", "--group", "none:*"])
        .run()
        .ok()
        .stdout;
    let s = parse(&text);
    let get = |name: &str, lock: &str| s[&(name.to_string(), lock.to_string())].value;
    assert_eq!(get("rlock_lock_grants_total", "job:*"), 4.0);
    assert_eq!(get("rlock_lock_released_total", "job:*"), 3.0);
    assert_eq!(get("rlock_lock_holders", "job:*"), 1.0);
    assert_eq!(get("rlock_lock_grants_total", "deploy"), 1.0);
    let locks: std::collections::BTreeSet<&str> = s.keys().map(|(_, l)| l.as_str()).collect();
    assert_eq!(locks.into_iter().collect::<Vec<_>>(), ["deploy", "job:*"]);
    rlock(&r)
        .args(["metrics", "--group", "a\u{1}"])
        .run()
        .fails(64, "control characters");
}

#[test]
fn idle_locks_on_every_cluster_master_are_exported() {
    let c = Cluster::start(3);
    let keys: Vec<String> = (0..12).map(|i| format!("job-{i}")).collect();
    for k in &keys {
        bare_rlock()
            .env("RLOCK_URL", &c.urls())
            .env("RLOCK_CLUSTER", "1")
            .args(["exec", k, "--", "true"])
            .run()
            .ok();
    }
    let text = bare_rlock()
        .env("RLOCK_URL", &c.urls())
        .env("RLOCK_CLUSTER", "1")
        .args(["metrics"])
        .run()
        .ok()
        .stdout;
    let s = parse(&text);
    for k in &keys {
        assert_eq!(
            s[&("rlock_lock_released_total".to_string(), k.clone())].value,
            1.0,
            "{text}"
        );
    }
}
