//! Redis Cluster: three masters started by the harness, keys in every slot
//! range, every command.

use std::time::Duration;

use crate::util::*;

fn rc(c: &Cluster) -> Rlock {
    bare_rlock()
        .env("RLOCK_URL", &c.urls())
        .env("RLOCK_CLUSTER", "1")
}

#[test]
fn every_command_works_for_keys_on_every_master() {
    let c = Cluster::start(3);
    // 12 names land on all three masters (16384 slots split in three).
    let keys: Vec<String> = (0..12).map(|i| format!("job-{i}")).collect();
    for k in &keys {
        let tok = rc(&c).args(["acquire", k]).run().ok().token();
        rc(&c).args(["acquire", "-n", k]).run().fails(75, "busy");
        rc(&c).args(["renew", k, "--token", &tok]).run().ok();
        rc(&c).args(["status", k]).run().ok();
        rc(&c).args(["release", k, "--token", &tok]).run().ok();
        rc(&c).args(["exec", k, "--", "true"]).run().ok();
        rc(&c).args(["rw", "read", k, "--", "true"]).run().ok();
        rc(&c)
            .args(["exec", "--limit", "2", &format!("{k}-sem"), "--", "true"])
            .run()
            .ok();
        // The history lives on the lock's master with its other keys.
        let h = rc(&c).args(["history", k, "--json"]).run().ok().stdout;
        assert_eq!(h.lines().count(), 6, "{h}");
    }
    let per_node: Vec<usize> = c.nodes.iter().map(|r| r.keys().len()).collect();
    assert!(
        per_node.iter().all(|&n| n > 0),
        "fence keys per node: {per_node:?}"
    );
    for r in &c.nodes {
        r.assert_nothing_held(&[]);
    }
}

#[test]
fn waiting_and_wakeups_work_across_the_cluster() {
    let c = Cluster::start(3);
    let mut held = Vec::new();
    for k in ["a", "b", "c", "d", "e", "f"] {
        held.push((k, rc(&c).args(["acquire", k]).run().ok().token()));
    }
    let waiters: Vec<_> = held
        .iter()
        .map(|(k, _)| rc(&c).args(["acquire", "-w", "20s", k]).spawn())
        .collect();
    for (k, _) in &held {
        eventually(Duration::from_secs(5), "a waiter to queue", || {
            rc(&c)
                .args(["status", k, "--json"])
                .run()
                .ok()
                .stdout
                .contains("\"waiting\":1")
        });
    }
    let started = std::time::Instant::now();
    for (k, t) in &held {
        rc(&c).args(["release", k, "--token", t]).run().ok();
    }
    for w in waiters {
        finish(w, "waiter").ok().token();
    }
    // Woken by the releases, not by the 5 s heartbeat (3 s leaves a loaded
    // machine room for twelve rlock runs).
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn list_sees_locks_on_every_master() {
    let c = Cluster::start(3);
    let keys: Vec<String> = (0..9).map(|i| format!("l{i}")).collect();
    for k in &keys {
        rc(&c).args(["acquire", k]).run().ok();
    }
    let all: serde_json::Value =
        serde_json::from_str(&rc(&c).args(["list", "--json"]).run().ok().stdout).unwrap();
    let mut names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, keys.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn one_seed_is_enough_and_moved_is_followed() {
    let c = Cluster::start(3);
    let seed = c.nodes[0].url();
    let keys = ["x1", "x2", "x3", "x4", "x5", "x6"];
    for k in keys {
        bare_rlock()
            .args(["--cluster", "--url", &seed, "exec", k, "--", "true"])
            .run()
            .ok();
    }
    // Without --cluster, a key served by another master gets MOVED: a
    // one-line error that says to use --cluster, never a panic.
    let moved: Vec<Run> = keys
        .iter()
        .map(|k| {
            bare_rlock()
                .args(["--url", &seed, "acquire", "-n", k])
                .run()
        })
        .filter(|r| r.code != 0)
        .collect();
    assert!(!moved.is_empty(), "all six keys on the seed node?");
    for r in moved {
        r.fails(64, "--cluster");
    }
}

#[test]
fn min_replicas_is_refused_with_cluster() {
    bare_rlock()
        .args([
            "--cluster",
            "--min-replicas",
            "1",
            "--url",
            "redis://127.0.0.1:1",
            "status",
            "k",
        ])
        .run()
        .fails(64, "--min-replicas");
}

#[test]
fn a_silent_seed_is_waited_for_once_not_on_every_reconnect() {
    let c = Cluster::start(3);
    // Ports that accept TCP connections (the kernel does, into the
    // backlog) and never answer: a frozen node, or a proxy to a dead host.
    let silent: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut urls: Vec<String> = silent
        .iter()
        .map(|l| format!("redis://{}", l.local_addr().unwrap()))
        .collect();
    urls.extend(c.nodes.iter().map(Redis::url));
    let opts = rlock::ConnectOptions {
        urls,
        cluster: true,
        // (1 s: a reconnect that waited for a silent seed again takes a
        // second more, far beyond what a loaded machine adds.)
        connect_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let mut l = rlock::Locker::connect(&opts, "rlock:").unwrap();
    let first = started.elapsed();
    assert!(first >= Duration::from_secs(2), "{first:?}");
    // Idle long enough that the next command connects anew: it starts
    // with the seed that answered.
    std::thread::sleep(Duration::from_millis(1200));
    let started = std::time::Instant::now();
    l.status("k").unwrap();
    let again = started.elapsed();
    eprintln!("silent seeds: first connect {first:?}, reconnect {again:?}");
    assert!(
        again < Duration::from_secs(1),
        "first {first:?}, then {again:?}"
    );
}

#[test]
fn when_no_seed_answers_each_is_named() {
    let (a, b) = (free_port(), free_port());
    bare_rlock()
        .args(["--cluster", "--url", &format!("redis://127.0.0.1:{a}")])
        .args(["--url", &format!("redis://127.0.0.1:{b}"), "status", "k"])
        .run()
        .fails(69, &format!("127.0.0.1:{a}: Connection refused"))
        .fails(69, &format!("127.0.0.1:{b}: Connection refused"));
    // Seeds still have to agree on their credentials.
    bare_rlock()
        .args(["--cluster", "--url", &format!("redis://:pw@127.0.0.1:{a}")])
        .args(["--url", &format!("redis://127.0.0.1:{b}"), "status", "k"])
        .run()
        .fails(64, "different password");
}

/// --supersede on a Cluster: the scripts keep every key of a lock on one
/// node, and the superseded waiter is woken through that node.
#[test]
fn supersede_works_on_a_cluster() {
    let c = Cluster::start(3);
    let waiting = |k: &str, n: u32| {
        rc(&c)
            .args(["status", k, "--json"])
            .run()
            .ok()
            .stdout
            .contains(&format!("\"waiting\":{n}"))
    };
    for k in ["a", "b", "c", "d"] {
        let tok = rc(&c).args(["acquire", k]).run().ok().token();
        let old = rc(&c).args(["acquire", "--supersede", k]).spawn();
        eventually(Duration::from_secs(5), "the old waiter to queue", || {
            waiting(k, 1)
        });
        let new = rc(&c).args(["acquire", "--supersede", k]).spawn();
        finish(old, "old").fails_with_lines(75, "superseded by host");
        rc(&c).args(["release", k, "--token", &tok]).run().ok();
        let tok = finish(new, "new").ok().token();
        rc(&c).args(["release", k, "--token", &tok]).run().ok();
    }
    for r in &c.nodes {
        r.assert_nothing_held(&[]);
    }
}

/// A seed that answers but knows no slots -- a cluster node not (or no
/// longer) in the cluster, a plain Redis named by mistake -- is passed
/// over like a dead one: the next seed's map is used. Alone, it is a
/// one-line "unavailable" (69), not "No connections found" (70).
#[test]
fn a_seed_that_knows_no_slots_is_passed_over() {
    let c = Cluster::start(3);
    let stray = Redis::start_with(&CLUSTER_NODE);
    let plain = Redis::start();
    for seed in [&stray, &plain] {
        let urls = format!("{},{}", seed.url(), c.urls());
        let tok = bare_rlock()
            .env("RLOCK_URL", &urls)
            .env("RLOCK_CLUSTER", "1")
            .args(["acquire", "-n", "job"])
            .run()
            .ok()
            .token();
        // status runs a script, list walks the masters (CLUSTER SLOTS): both
        // pass over the seed too.
        for args in [["status", "job"], ["list", "job"]] {
            let out = bare_rlock()
                .env("RLOCK_URL", &urls)
                .env("RLOCK_CLUSTER", "1")
                .args(args)
                .run()
                .ok()
                .stdout;
            assert!(out.contains("job: held"), "{args:?}: {out}");
        }
        rc(&c).args(["release", "job", "--token", &tok]).run().ok();
        bare_rlock()
            .env("RLOCK_URL", &seed.url())
            .env("RLOCK_CLUSTER", "1")
            .args(["acquire", "-n", "job"])
            .run()
            .fails(69, "knows no cluster node");
        assert!(seed.keys().is_empty(), "{:?}", seed.keys());
    }
    for r in &c.nodes {
        r.assert_nothing_held(&[]);
    }
}

/// `list`, `metrics`, `top --once --json` and `history --all` on a
/// cluster read the masters in pipelines: the same locks as on one Redis,
/// also when every master lost its scripts (SCRIPT FLUSH: the pipelined
/// calls answer NOSCRIPT) and when a lock's key holds data rlock did not
/// write (an error answer in the pipeline: that lock is left out on both).
#[test]
fn a_cluster_lists_exports_and_reads_history_as_one_redis_does() {
    let c = Cluster::start(3);
    let r = Redis::shared();
    let both = || [rc(&c), rlock(&r)];
    let flush = || {
        for n in &c.nodes {
            let _: () = n.cmd(&["SCRIPT", "FLUSH"]);
        }
    };
    let held: Vec<String> = (0..30).map(|i| format!("held-{i}")).collect();
    let idle: Vec<String> = (0..6).map(|i| format!("idle-{i}")).collect();
    for k in &held {
        for d in both() {
            d.args(["acquire", k, "--ttl", "60s"]).run().ok();
        }
    }
    for k in idle.iter().chain(["foreign".to_string()].iter()) {
        for d in both() {
            d.args(["exec", k, "--", "true"]).run().ok();
        }
    }
    for d in both() {
        d.args(["acquire", "foreign", "--ttl", "60s"]).run().ok();
    }

    // The last 5 events of all are the last 5 of the whole history.
    flush();
    for cluster in [true, false] {
        let d = || if cluster { rc(&c) } else { rlock(&r) };
        let all = d()
            .args(["history", "--all", "--json", "--limit", "1000"])
            .run()
            .ok()
            .stdout;
        let all: Vec<&str> = all.lines().collect();
        // 31 grants, 7 grants and releases.
        assert_eq!(all.len(), held.len() + 1 + 2 * (idle.len() + 1), "{all:?}");
        let last = d()
            .args(["history", "--all", "--json", "--limit", "5"])
            .run()
            .ok()
            .stdout;
        assert_eq!(last.lines().collect::<Vec<_>>(), all[all.len() - 5..]);
    }

    // The foreign lock's state hash becomes a string, on the master that
    // serves it (the others answer MOVED), and on the one Redis.
    for n in &c.nodes {
        let _: redis::RedisResult<()> = redis::cmd("SET")
            .arg("rlock:{foreign}")
            .arg("not rlock's")
            .query(&mut n.conn());
    }
    let _: () = r.cmd(&["SET", &r.key("foreign"), "not rlock's"]);
    flush();

    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let json_keys = |out: &str| {
        sorted(
            out.lines()
                .flat_map(
                    |l| match serde_json::from_str::<serde_json::Value>(l).unwrap() {
                        serde_json::Value::Array(a) => a,
                        v => vec![v],
                    },
                )
                .map(|v| v["key"].as_str().unwrap().to_string())
                .collect(),
        )
    };
    let [on_c, on_r] = both().map(|d| json_keys(&d.args(["list", "--json"]).run().ok().stdout));
    assert_eq!(on_c, sorted(held.clone()));
    assert_eq!(on_r, on_c);
    flush();
    let [on_c, on_r] =
        both().map(|d| json_keys(&d.args(["top", "--once", "--json"]).run().ok().stdout));
    assert_eq!(on_c, sorted(held.clone()), "top");
    assert_eq!(on_r, on_c, "top");

    // Every lock with history, held or idle, and its grants.
    flush();
    let grants = |text: &str| {
        sorted(
            text.lines()
                .filter(|l| l.starts_with("rlock_lock_grants_total{"))
                .map(String::from)
                .collect(),
        )
    };
    let [on_c, on_r] = both().map(|d| grants(&d.args(["metrics"]).run().ok().stdout));
    assert_eq!(on_c.len(), held.len() + idle.len(), "{on_c:?}");
    assert_eq!(on_r, on_c);
}
