//! The job, operator and monitor roles of docs/deployments.md ("Roles") on
//! a Cluster, under RedLock and through Sentinel: each user made on every
//! server from its line in the doc, word for word, with what the doc adds
//! for the deployment (`+cluster|slots`, `+role`). The monitor reads what
//! the operator reads and writes nothing; a job's break and the monitor's
//! writes are refused by Redis (exit 77) with nothing changed on any node.

use std::time::Instant;

use crate::monitor::{dump, unchanged};
use crate::tls_acl::role_acl;
use crate::util::*;

/// Every key of a server with its type, value and PTTL (see `dump`).
type Dump = Vec<(String, String, Vec<u8>, i64)>;

/// Role `role`'s user on `r`: the doc's line for it, then `extra`.
fn make_user(r: &Redis, role: &str, extra: &[&str]) {
    let mut acl = role_acl(role);
    acl.extend(extra.iter().map(|w| w.to_string()));
    let args: Vec<&str> = acl.iter().map(String::as_str).collect();
    let _: () = r.cmd(&args);
}

/// The roles a server can have users for: no monitor on Redis 6.2, which
/// refuses its line (see roles.rs, `monitor_line`).
fn roles() -> Vec<&'static str> {
    if redis_version() >= (7, 0) {
        vec!["job", "operator", "monitor"]
    } else {
        vec!["job", "operator"]
    }
}

/// `redis://rlock-<role>:<role>-secret@...` for each server, joined.
fn urls(servers: &[Redis], role: &str) -> String {
    servers
        .iter()
        .map(|r| format!("redis://rlock-{role}:{role}-secret@127.0.0.1:{}", r.port))
        .collect::<Vec<_>>()
        .join(",")
}

fn dumps(servers: &[Redis]) -> Vec<Dump> {
    servers.iter().map(dump).collect()
}

/// Nothing written on any server (see `unchanged`).
#[track_caller]
fn all_unchanged(before: &[Dump], after: &[Dump], since: Instant) {
    for (b, a) in before.iter().zip(after) {
        unchanged(b, a, since.elapsed());
    }
}

/// `out` with what moves between two runs a moment apart left out: the
/// lines of `top`'s and `status`'s clock-bound fields and the numbers of
/// durations.
fn steady(out: &str) -> String {
    out.lines()
        .map(|l| match serde_json::from_str::<serde_json::Value>(l) {
            Ok(mut v) => {
                drop_moving(&mut v);
                v.to_string()
            }
            // A sample of a gauge of time (`metrics`): its name stays.
            Err(_) if MOVING_METRICS.iter().any(|m| l.starts_with(m)) => {
                l.split(' ').next().unwrap_or(l).to_string()
            }
            Err(_) => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fields of a JSON output that run down between two reads.
const MOVING: &[&str] = &["ttl_ms", "held_ms", "oldest_wait_ms", "server_time"];

/// The gauges of `metrics` that count time passing.
const MOVING_METRICS: &[&str] = &[
    "rlock_lock_oldest_wait_seconds{",
    "rlock_lock_held_seconds{",
    "rlock_lock_lease_left_seconds{",
    "rlock_lock_renewed_seconds_ago{",
];

fn drop_moving(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|k, _| !MOVING.contains(&k.as_str()));
            m.values_mut().for_each(drop_moving);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_moving),
        _ => {}
    }
}

/// The monitor's reads and their output, compared with the operator's
/// once the monitor's are known to have written nothing (the operator's
/// reads may write: its `list` drops the index entries of free locks).
#[derive(Default)]
struct Reads(Vec<(Vec<String>, String)>);

impl Reads {
    /// `args` run by the monitor, ok: its output.
    fn monitor(&mut self, run: &dyn Fn(&str, &[&str]) -> Run, args: &[&str]) -> String {
        let out = run("monitor", args).ok().stdout;
        self.0
            .push((args.iter().map(|a| a.to_string()).collect(), out.clone()));
        out
    }

    /// Each read run again by the operator: the same output, but for what
    /// moves with the clock.
    #[track_caller]
    fn same_for_the_operator(&self, run: &dyn Fn(&str, &[&str]) -> Run) {
        for (args, mon) in &self.0 {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let op = run("operator", &args).ok().stdout;
            assert_eq!(steady(mon), steady(&op), "{args:?}: monitor, then operator");
        }
    }
}

/// A refusal by the ACL: exit 77, one line naming NOPERM.
#[track_caller]
/// The job: exec works; its break of lock `held` (held by the job's
/// token `tok`) is refused, nothing changes on any of `servers`, and the
/// holder keeps it; the operator's break works.
fn job_and_operator(run: &dyn Fn(&str, &[&str]) -> Run, servers: &[Redis], tok: &str) {
    run("job", &["exec", "other", "--", "true"]).ok();
    let before = dumps(servers);
    let t = Instant::now();
    let b = refused(
        run("job", &["break", "held", "--reason", "not mine", "--yes"]),
        "job's break",
    );
    assert!(
        b.stderr.contains("break needs the operator role"),
        "{}",
        b.stderr
    );
    all_unchanged(&before, &dumps(servers), t);
    run("job", &["renew", "held", "--token", tok]).ok();
    run("operator", &["break", "held", "--reason", "ops", "--yes"]).ok();
    run("job", &["renew", "held", "--token", tok]).fails(79, "broken by");
}

fn refused(run: Run, what: &str) -> Run {
    assert_eq!(run.code, 77, "{what}: {}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: {}", run.stderr);
    assert!(lines[0].starts_with("rlock: "), "{what}: {}", run.stderr);
    assert!(run.stderr.contains("NOPERM"), "{what}: {}", run.stderr);
    run
}

#[test]
fn the_roles_on_a_cluster() {
    let c = Cluster::start(3);
    for r in &c.nodes {
        for role in roles() {
            make_user(r, role, &["+cluster|slots", "+ping"]);
        }
    }
    let cmd = |role: &str| {
        bare_rlock()
            .env("RLOCK_URL", &urls(&c.nodes, role))
            .env("RLOCK_CLUSTER", "1")
    };
    let run = |role: &str, args: &[&str]| cmd(role).args(args).run();
    // Held with a waiter; idle with history, on every master.
    let idle: Vec<String> = (0..6).map(|i| format!("idle-{i}")).collect();
    let masters: std::collections::BTreeSet<usize> = idle
        .iter()
        .map(String::as_str)
        .chain(["held"])
        .map(|k| c.master_of(k))
        .collect();
    assert_eq!(masters.len(), 3, "the locks on every master: {masters:?}");
    let tok = run("job", &["acquire", "held", "--ttl", "1h"]).ok().token();
    let waiter = cmd("job").args(["acquire", "held", "-w", "1h"]).spawn();
    c.nodes[c.master_of("held")].await_waiters("held", 1);
    for k in &idle {
        run("job", &["exec", k, "--", "true"]).ok();
    }
    // The waiter stopped, so that nothing but the commands below writes.
    kill(waiter.id(), libc::SIGSTOP);

    if roles().contains(&"monitor") {
        let before = dumps(&c.nodes);
        let t0 = Instant::now();
        let mut reads = Reads::default();
        let s = run("monitor", &["status", "held"]).ok().stdout;
        assert!(s.contains("held: held"), "{s}");
        let s = reads.monitor(&run, &["status", "held", "--json"]);
        assert!(s.contains("\"waiting\":1"), "{s}");
        reads.monitor(&run, &["status", "idle-0", "--json"]);
        let list = reads.monitor(&run, &["list", "--json"]);
        assert!(list.contains("\"held\""), "{list}");
        let top = reads.monitor(&run, &["top", "--once", "--json"]);
        assert!(top.contains("\"held\""), "{top}");
        let m = reads.monitor(&run, &["metrics"]);
        for want in [
            "rlock_lock_holders{lock=\"held\"} 1",
            "rlock_lock_waiters{lock=\"held\"} 1",
            "rlock_lock_grants_total{lock=\"idle-5\"} 1",
            "rlock_lock_released_total{lock=\"idle-5\"} 1",
        ] {
            assert!(m.contains(want), "{want} not in:\n{m}");
        }
        let all = reads.monitor(&run, &["history", "--all", "--json"]);
        for k in idle.iter().map(String::as_str).chain(["held"]) {
            assert!(all.contains(&format!("\"lock\":\"{k}\"")), "{k}: {all}");
        }
        let after_reads = dumps(&c.nodes);
        all_unchanged(&before, &after_reads, t0);
        reads.same_for_the_operator(&run);
        let after_reads = dumps(&c.nodes);

        // The monitor's writes: refused, nothing changed on any node.
        let t1 = Instant::now();
        refused(run("monitor", &["acquire", "new"]), "monitor's acquire");
        refused(
            run("monitor", &["acquire", "held", "--no-wait"]),
            "monitor's acquire of a held lock",
        );
        refused(
            run(
                "monitor",
                &["break", "held", "--yes", "--reason", "monitor"],
            ),
            "monitor's break",
        );
        all_unchanged(&after_reads, &dumps(&c.nodes), t1);
    }

    // doctor --role finds each user has what its role needs with
    // --cluster (PING and CLUSTER SLOTS included), and no more.
    if redis_version() >= (7, 0) {
        for role in roles() {
            let d = run(role, &["doctor", "--role", role]);
            let line = d
                .stdout
                .lines()
                .find(|l| l.contains(" role: "))
                .unwrap_or_else(|| panic!("{role}: exit {}: {}{}", d.code, d.stdout, d.stderr));
            assert!(
                line.starts_with("ok ")
                    && line.contains(&format!("exactly what the {role} role needs")),
                "{role}: {}",
                d.stdout
            );
        }
    }

    job_and_operator(&run, &c.nodes, &tok);
    kill(waiter.id(), libc::SIGKILL);
    finish(waiter, "waiter");
}

#[test]
fn the_roles_under_redlock() {
    let ms: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    for m in &ms {
        for role in roles() {
            make_user(m, role, &[]);
        }
    }
    let cmd = |role: &str| bare_rlock().env("RLOCK_URL", &urls(&ms, role));
    let run = |role: &str, args: &[&str]| cmd(role).args(args).run();
    let tok = run("job", &["acquire", "held", "--ttl", "1h"]).ok().token();
    let waiter = cmd("job").args(["acquire", "held", "-w", "1h"]).spawn();
    eventually(
        std::time::Duration::from_secs(10),
        "the waiter to queue",
        || {
            run("operator", &["status", "held", "--json"])
                .ok()
                .stdout
                .contains("\"waiting\":1")
        },
    );
    run("job", &["exec", "idle", "--", "true"]).ok();
    kill(waiter.id(), libc::SIGSTOP);

    if roles().contains(&"monitor") {
        let before = dumps(&ms);
        let t0 = Instant::now();
        let mut reads = Reads::default();
        let s = reads.monitor(&run, &["status", "held", "--json"]);
        assert!(s.contains("\"waiting\":1"), "{s}");
        let list = reads.monitor(&run, &["list", "--json"]);
        assert!(list.contains("\"held\""), "{list}");
        let m = reads.monitor(&run, &["metrics"]);
        assert!(
            m.contains("rlock_lock_holders{lock=\"held\"} 1"),
            "holders not in:\n{m}"
        );
        // The history's counter, read by the monitor: at least the exec's
        // grant. A RedLock attempt that outlived its validity on a loaded
        // machine is released and tried again, and each master's history
        // counts both grants (a CI run saw 2).
        let grants = m
            .lines()
            .find_map(|l| l.strip_prefix("rlock_lock_grants_total{lock=\"idle\"} "))
            .and_then(|v| v.trim().parse::<u64>().ok());
        assert!(grants.is_some_and(|g| g >= 1), "grants of idle in:\n{m}");
        let after_reads = dumps(&ms);
        all_unchanged(&before, &after_reads, t0);
        reads.same_for_the_operator(&run);
        let after_reads = dumps(&ms);
        let t1 = Instant::now();
        refused(run("monitor", &["acquire", "new"]), "monitor's acquire");
        refused(
            run(
                "monitor",
                &["break", "held", "--yes", "--reason", "monitor"],
            ),
            "monitor's break",
        );
        all_unchanged(&after_reads, &dumps(&ms), t1);
    }

    job_and_operator(&run, &ms, &tok);
    kill(waiter.id(), libc::SIGKILL);
    finish(waiter, "waiter");
}

#[test]
fn the_roles_through_sentinel() {
    let s = Sentinels::start();
    // The first URL's user and password reach the first Sentinel as well
    // as the master: each role's user on each Sentinel, from the doc's
    // Sentinel line (the job's) word for word.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deployments.md"))
        .unwrap();
    let line = doc
        .lines()
        .find(|l| l.starts_with("ACL SETUSER rlock-job ") && l.contains("+sentinel|"))
        .expect("docs/deployments.md: the Sentinels' ACL line");
    for port in s.ports() {
        for role in roles() {
            let line = line
                .replace("rlock-job", &format!("rlock-{role}"))
                .replace(">job-secret", &format!(">{role}-secret"));
            let words: Vec<&str> = line.split_whitespace().collect();
            let mut c = redis::cmd(words[0]);
            for w in &words[1..] {
                c.arg(*w);
            }
            let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                .unwrap()
                .get_connection()
                .unwrap();
            let _: () = c.query(&mut conn).unwrap();
        }
    }
    for r in [&s.master, &s.replica] {
        make_user(r, "job", &["+role"]);
        if roles().contains(&"monitor") {
            make_user(r, "monitor", &["+role"]);
        }
    }
    let run = |role: &str, args: &[&str]| {
        let urls: Vec<String> = s
            .ports()
            .iter()
            .map(|p| format!("redis://rlock-{role}:{role}-secret@127.0.0.1:{p}"))
            .collect();
        bare_rlock()
            .env("RLOCK_URL", &urls.join(","))
            .env("RLOCK_SENTINEL", "mymaster")
            .args(args)
            .run()
    };
    run("job", &["exec", "k", "--", "true"]).ok();
    if roles().contains(&"monitor") {
        let out = run("monitor", &["status", "k"]).ok().stdout;
        assert!(out.contains("k: free"), "{out}");
    }
}
