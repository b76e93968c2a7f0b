//! `rlock doctor` against real servers configured each way: what it finds
//! and the exit code it gives.

use crate::tls_acl::readme_acl;
use crate::util::*;

/// What `doctor` exits with when it finds something unsafe.
const UNSAFE: i32 = 78;

/// A server whose settings keep locks: AOF with fsync every second, no
/// eviction (the default).
fn safe_server() -> Redis {
    Redis::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"])
}

/// The summary line for `warnings` warnings of the server's settings,
/// plus the one every report on Redis 6.2 has: it has neither ACL DRYRUN
/// nor `redis.acl_check_cmd`, so permissions cannot be asked.
fn nothing_unsafe(warnings: usize) -> String {
    let n = warnings + usize::from(redis_version() < (7, 0));
    let s = if n == 1 { "" } else { "s" };
    format!("rlock doctor: nothing unsafe found ({n} warning{s})\n")
}

/// The report lines of one severity ("ok", "warn", "unsafe", "info").
fn lines<'a>(run: &'a Run, severity: &str) -> Vec<&'a str> {
    run.stdout
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(severity))
        .collect()
}

/// Exactly one line of `severity` about `check`, holding every needle.
#[track_caller]
fn finds<'a>(run: &'a Run, severity: &str, check: &str, needles: &[&str]) -> &'a str {
    let hits: Vec<&str> = lines(run, severity)
        .into_iter()
        .filter(|l| l.contains(&format!(" {check}: ")))
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "want one {severity} {check} line with {needles:?}; report:\n{}",
        run.stdout
    );
    hits[0]
}

#[test]
fn a_safe_server_passes() {
    let r = safe_server();
    let run = rlock(&r).args(["doctor"]).run().ok();
    assert!(lines(&run, "unsafe").is_empty(), "{}", run.stdout);
    for check in [
        "version",
        "eviction",
        "persistence",
        "replication",
        "clock",
        "permissions",
    ] {
        assert!(
            run.stdout.contains(&format!(" {check}: ")),
            "no {check} line:\n{}",
            run.stdout
        );
    }
    finds(&run, "ok", "eviction", &["noeviction"]);
    finds(&run, "ok", "persistence", &["appendfsync everysec"]);
    let (name, version) = server_version();
    finds(
        &run,
        "ok",
        "version",
        &[&format!("{name} {version}"), "rlock needs 6.2 or newer"],
    );
    finds(&run, "ok", "clock", &["round trip", "302ms at TTL 30s"]);
    assert!(run.stdout.ends_with(&nothing_unsafe(0)), "{}", run.stdout);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    // Doctor leaves nothing behind.
    assert!(r.keys().is_empty(), "{:?}", r.keys());
}

#[test]
fn eviction_policies() {
    let r = safe_server();
    let _: () = r.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]);
    let _: () = r.cmd(&["CONFIG", "SET", "maxmemory", "100mb"]);
    let run = rlock(&r).args(["doctor"]).run().code(UNSAFE);
    let line = finds(
        &run,
        "unsafe",
        "eviction",
        &["volatile-lru", "100.00M", "TTL", "noeviction"],
    );
    assert!(line.contains("fix: CONFIG SET maxmemory-policy noeviction"));
    // Without a maxmemory nothing is evicted yet: a warning only.
    let _: () = r.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    let _: () = r.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let run = rlock(&r).args(["doctor"]).run().ok();
    finds(&run, "warn", "eviction", &["allkeys-lru", "maxmemory is 0"]);
    assert!(run.stdout.ends_with(&nothing_unsafe(1)), "{}", run.stdout);
}

#[test]
fn persistence_and_the_restart_delay() {
    // The fixture's default: no AOF, no RDB.
    let r = Redis::start();
    let run = rlock(&r).args(["doctor"]).run().code(UNSAFE);
    finds(
        &run,
        "unsafe",
        "persistence",
        &[
            "no persistence",
            "forgets every held lock",
            "ExecStartPre=/bin/sleep 30",
        ],
    );
    // The delay follows the longest TTL in use.
    let run = rlock(&r).args(["doctor", "--ttl", "2m"]).run().code(UNSAFE);
    finds(&run, "unsafe", "persistence", &["2m here", "sleep 120"]);
    // RDB snapshots only.
    let _: () = r.cmd(&["CONFIG", "SET", "save", "3600 1"]);
    let run = rlock(&r).args(["doctor"]).run().code(UNSAFE);
    finds(&run, "unsafe", "persistence", &["RDB snapshots only"]);
    // An AOF the kernel flushes when it likes.
    let _: () = r.cmd(&["CONFIG", "SET", "appendonly", "yes"]);
    let _: () = r.cmd(&["CONFIG", "SET", "appendfsync", "no"]);
    let run = rlock(&r).args(["doctor"]).run().code(UNSAFE);
    finds(
        &run,
        "unsafe",
        "persistence",
        &["appendfsync no", "appendfsync everysec"],
    );
    let _: () = r.cmd(&["CONFIG", "SET", "appendfsync", "always"]);
    rlock(&r).args(["doctor"]).run().ok();
}

/// The README's least-privilege user, with more rules after it.
fn acl_user(r: &Redis, more: &[&str]) -> String {
    let mut acl = readme_acl();
    acl.extend(more.iter().map(|s| s.to_string()));
    let args: Vec<&str> = acl.iter().map(String::as_str).collect();
    let _: () = r.cmd(&args);
    format!(
        "redis://rlock-operator:operator-secret@127.0.0.1:{}",
        r.port
    )
}

#[test]
fn permissions_of_the_connected_user() {
    let r = safe_server();
    let doctor = |url: &str| bare_rlock().env("RLOCK_URL", url).args(["doctor"]).run();
    if redis_version() < (7, 0) {
        // Redis 6.2 has neither ACL DRYRUN nor redis.acl_check_cmd: doctor
        // says it cannot tell, and still finds EVAL missing (it asks with
        // EVAL).
        let run = doctor(&acl_user(&r, &[])).ok();
        finds(
            &run,
            "warn",
            "permissions",
            &["cannot ask the server", "upgrade to Redis 7"],
        );
        let run = doctor(&acl_user(&r, &["-eval"])).code(UNSAFE);
        finds(&run, "unsafe", "permissions", &["may not run eval,"]);
        return;
    }
    // Exactly the README's ACL: every command allowed. CONFIG GET is not,
    // so appendfsync cannot be read: a warning, not a failure.
    let url = acl_user(&r, &[]);
    let run = doctor(&url).ok();
    finds(&run, "ok", "permissions", &["every command rlock needs"]);
    finds(&run, "warn", "persistence", &["appendfsync cannot be read"]);
    // Without EVALSHA, every lock fails: named, with the fix.
    let url = acl_user(&r, &["-evalsha"]);
    let run = doctor(&url).code(UNSAFE);
    let line = finds(&run, "unsafe", "permissions", &["may not run evalsha"]);
    assert!(line.contains("ACL SETUSER <user> +evalsha"), "{line}");
    // Without EVAL nothing else can be asked; that alone is unsafe.
    let url = acl_user(&r, &["-eval"]);
    let run = doctor(&url).code(UNSAFE);
    finds(
        &run,
        "unsafe",
        "permissions",
        &["may not run eval,", "+eval"],
    );
    // Without HSET (which only the scripts run).
    let url = acl_user(&r, &["-hset"]);
    let run = doctor(&url).code(UNSAFE);
    finds(&run, "unsafe", "permissions", &["may not run hset"]);
    // Without INFO: needed under RedLock only, so a note here, and the
    // checks that read INFO say they could not.
    let url = acl_user(&r, &["-info"]);
    let run = doctor(&url).ok();
    finds(
        &run,
        "info",
        "permissions",
        &["may not run info (needed under RedLock)"],
    );
    finds(&run, "warn", "version", &["INFO refused", "not checked"]);
    // Keys outside the user's pattern count too.
    let url = acl_user(&r, &[]);
    let run = bare_rlock()
        .env("RLOCK_URL", &url)
        .args(["--prefix", "other:", "doctor"])
        .run()
        .code(UNSAFE);
    finds(
        &run,
        "unsafe",
        "permissions",
        &["may not run evalsha, eval"],
    );
    // An admin user is checked with ACL DRYRUN: the same verdicts.
    let _: () = r.cmd(&[
        "ACL", "SETUSER", "admin", "on", ">pw", "~*", "&*", "+@all", "-zrank",
    ]);
    let run = doctor(&format!("redis://admin:pw@127.0.0.1:{}", r.port)).code(UNSAFE);
    finds(&run, "unsafe", "permissions", &["may not run zrank"]);
    r.assert_nothing_held(&[]);
}

#[test]
fn replicas_and_min_replicas() {
    let master = safe_server();
    let replica = replica_of(&master);
    // A replica named as the one Redis.
    let run = rlock(&replica).args(["doctor"]).run().code(UNSAFE);
    finds(
        &run,
        "unsafe",
        "replication",
        &[
            "role slave",
            &format!("replica of 127.0.0.1:{}", master.port),
        ],
    );
    // The master: replication is asynchronous, --min-replicas not in use.
    let run = rlock(&master).args(["doctor"]).run().ok();
    finds(
        &run,
        "warn",
        "replication",
        &[
            "1 replica(s)",
            "--min-replicas not in use",
            "--min-replicas 1",
        ],
    );
    finds(&run, "info", "replication", &["min-replicas-to-write 0"]);
    let run = rlock(&master)
        .args(["--min-replicas", "1", "doctor"])
        .run()
        .ok();
    finds(&run, "ok", "replication", &["--min-replicas 1"]);
    let run = rlock(&master)
        .args(["--min-replicas", "2", "doctor"])
        .run()
        .code(UNSAFE);
    finds(&run, "unsafe", "replication", &["every acquire fails"]);
}

#[test]
fn redlock_masters_must_be_distinct() {
    let a = safe_server();
    let b = safe_server();
    let c = safe_server();
    let urls = [a.url(), b.url(), c.url()].join(",");
    let run = bare_rlock()
        .env("RLOCK_URL", &urls)
        .args(["doctor"])
        .run()
        .ok();
    finds(&run, "ok", "redlock", &["3 distinct masters"]);
    finds(&run, "ok", "redlock", &["majority 2"]);
    assert_eq!(run.stdout.matches(" eviction: ").count(), 3);
    // The same server twice, once over TCP and once over its socket.
    let twice = format!("{},unix://{},{}", a.url(), a.socket().display(), b.url());
    let run = bare_rlock()
        .env("RLOCK_URL", &twice)
        .args(["doctor"])
        .run()
        .code(UNSAFE);
    finds(&run, "unsafe", "redlock", &["reach the same Redis server"]);
    // A master down: the others are checked, the down one is a finding.
    let down = format!("{},{},redis://127.0.0.1:{}", a.url(), b.url(), free_port());
    let run = bare_rlock()
        .env("RLOCK_URL", &down)
        .args(["doctor"])
        .run()
        .code(UNSAFE);
    finds(&run, "unsafe", "connection", &["does not answer"]);
    assert_eq!(run.stdout.matches(" eviction: ").count(), 2);
}

#[test]
fn json_carries_the_findings() {
    let r = Redis::start();
    let run = rlock(&r).args(["doctor", "--json"]).run().code(UNSAFE);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    assert_eq!(v["safe"], false);
    assert_eq!(v["ttl_ms"], 30000);
    let findings = v["findings"].as_array().unwrap();
    let bad: Vec<&serde_json::Value> = findings
        .iter()
        .filter(|f| f["severity"] == "unsafe")
        .collect();
    assert_eq!(bad.len(), 1, "{findings:?}");
    assert_eq!(bad[0]["check"], "persistence");
    assert_eq!(bad[0]["server"], format!("127.0.0.1:{}", r.port));
    assert!(bad[0]["fix"].as_str().unwrap().contains("appendonly yes"));
    let server = &v["servers"][0];
    assert_eq!(server["role"], "master");
    assert!(server["rtt_ms"].as_f64().unwrap() >= 0.0);
    assert!(server["offset_ms"].is_number());
    // A safe server: "safe": true and exit 0.
    let r = safe_server();
    let run = rlock(&r).args(["doctor", "--json"]).run().ok();
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["safe"], true);
}

#[test]
fn bad_input_and_unreachable_servers() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    let run = bare_rlock()
        .env("RLOCK_URL", &url)
        .args(["doctor"])
        .run()
        .fails(69, "cannot use Redis");
    assert!(run.stdout.is_empty());
    let r = Redis::start();
    rlock(&r)
        .args(["doctor", "--ttl", "1"])
        .run()
        .fails(64, "unit");
    rlock(&r)
        .args(["doctor", "--ttl", "10ms"])
        .run()
        .fails(64, "ttl");
    rlock(&r)
        .args(["--url", "http://x", "doctor"])
        .run()
        .fails(64, "scheme");
}

#[test]
fn sentinel_topology() {
    let s = Sentinels::start();
    let run = bare_rlock()
        .env("RLOCK_URL", &s.urls())
        .args(["--sentinel", "mymaster", "doctor"])
        .run()
        .code(UNSAFE);
    finds(
        &run,
        "ok",
        "sentinel",
        &[&format!(
            "3 of 3 Sentinels answer and name master 127.0.0.1:{}",
            s.master.port
        )],
    );
    // The fixture's master has no persistence and one replica.
    finds(&run, "unsafe", "persistence", &["no persistence"]);
    finds(&run, "warn", "replication", &["1 replica(s)"]);
    bare_rlock()
        .env("RLOCK_URL", &s.urls())
        .args(["--sentinel", "nosuchmaster", "doctor"])
        .run()
        .fails(69, "");
}

#[test]
fn cluster_topology() {
    let c = Cluster::start(3);
    let run = bare_rlock()
        .env("RLOCK_URL", &c.urls())
        .args(["--cluster", "doctor"])
        .run()
        .code(UNSAFE);
    finds(
        &run,
        "ok",
        "cluster",
        &["cluster_state ok, all 16384 slots served by 3 masters"],
    );
    finds(&run, "info", "cluster", &["3 of 3 masters have no replica"]);
    // Every master checked on its own.
    assert_eq!(run.stdout.matches(" persistence: ").count(), 3);
    assert_eq!(run.stdout.matches(" permissions: ").count(), 3);
}

/// A server that accepts connections but never answers (frozen: SIGSTOP,
/// a hung host) is down, not a server that refuses INFO and TIME: alone it
/// is exit 69 like a refused connection (it was "nothing unsafe found",
/// exit 0); as a RedLock master it is an unsafe finding.
#[test]
fn a_frozen_server_does_not_answer() {
    let frozen = Redis::start();
    kill(frozen.child_pid(), libc::SIGSTOP);
    let run = rlock(&frozen)
        .args(["--connect-timeout", "300ms", "doctor"])
        .run();
    kill(frozen.child_pid(), libc::SIGCONT);
    let run = run.fails(
        69,
        &format!(
            "Redis at 127.0.0.1:{} did not answer within 300ms",
            frozen.port
        ),
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    let (a, b) = (safe_server(), safe_server());
    let urls = [a.url(), b.url(), frozen.url()].join(",");
    kill(frozen.child_pid(), libc::SIGSTOP);
    let run = bare_rlock()
        .env("RLOCK_URL", &urls)
        .args(["--connect-timeout", "300ms", "doctor"])
        .run();
    kill(frozen.child_pid(), libc::SIGCONT);
    let run = run.code(UNSAFE);
    finds(&run, "unsafe", "connection", &["does not answer"]);
    assert_eq!(run.stdout.matches(" eviction: ").count(), 2);
}
