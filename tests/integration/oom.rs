//! A Redis filled to its `maxmemory` (maxmemory-policy noeviction): held
//! locks go on (renewal, release, queued waiters, the read-only commands),
//! new locks and new waiters are refused with exit 69 and one line naming
//! maxmemory, and no lock's state is left half-written (lua/common.lua).
//! Every test here starts a server of its own: it reconfigures it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::util::*;

/// A server that refuses writes at maxmemory instead of evicting.
fn server() -> Redis {
    Redis::start_with(&["--maxmemory-policy", "noeviction"])
}

fn used_memory(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

/// How many values `fill` wrote (keys `fill:0` ...).
struct Filled(usize);

/// Fill `r` with 64 KiB values until Redis refuses one for memory, then
/// set maxmemory 1 MiB below what is used: every connection's buffers
/// count as used memory, and clients coming and going (rlock's own) must
/// not bring it back under the limit while a test looks.
fn fill(r: &Redis) -> Filled {
    let mut c = r.conn();
    let start = used_memory(&mut c);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(start + 8 * 1024 * 1024)
        .query(&mut c)
        .unwrap();
    let value = vec![b'x'; 64 * 1024];
    let mut n = 0;
    loop {
        match redis::cmd("SET")
            .arg(format!("fill:{n}"))
            .arg(&value)
            .query::<()>(&mut c)
        {
            Ok(()) => n += 1,
            Err(e) => {
                assert!(
                    e.to_string().contains("OOM"),
                    "SET refused, not for memory: {e}"
                );
                break;
            }
        }
        assert!(n < 1000, "8 MiB more never filled the server");
    }
    assert!(n > 0, "the first value was refused already");
    let used = used_memory(&mut c);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used - 1024 * 1024)
        .query(&mut c)
        .unwrap();
    Filled(n)
}

/// Delete what `fill` wrote: the server is well under its maxmemory again.
fn free(r: &Redis, filled: Filled) {
    let keys: Vec<String> = (0..filled.0).map(|i| format!("fill:{i}")).collect();
    let _: i64 = redis::cmd("DEL").arg(&keys).query(&mut r.conn()).unwrap();
}

/// The redis keys of lock `key` (its hash, zsets, fence, wake-up lists,
/// request records).
fn keys_of(r: &Redis, key: &str) -> Vec<String> {
    let mut k: Vec<String> = r.cmd(&["KEYS", &format!("{}*", glob_escape(&r.key(key)))]);
    k.sort();
    k
}

fn glob_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '*' | '?' | '[' | ']' | '\\' => vec!['\\', c],
            _ => vec![c],
        })
        .collect()
}

/// The tokens in lock `key`'s holders zset and its wait queue.
fn members(r: &Redis, key: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let k = r.key(key);
    let h: Vec<String> = r.cmd(&["ZRANGE", &format!("{k}:h"), "0", "-1"]);
    let q: Vec<String> = r.cmd(&["ZRANGE", &format!("{k}:q"), "0", "-1"]);
    (h.into_iter().collect(), q.into_iter().collect())
}

/// Lock `key`'s state is whole: every holder in the holders zset has its
/// count, info, since and fence fields in the hash, every per-holder field
/// belongs to a holder, a lock in use says its kind (and limit), and its
/// keys expire.
#[track_caller]
fn assert_whole(r: &Redis, key: &str) {
    let k = r.key(key);
    let (holders, queue) = members(r, key);
    let fields: Vec<String> = r.cmd(&["HKEYS", &k]);
    let fields: BTreeSet<String> = fields.into_iter().collect();
    for tok in &holders {
        for f in ["c", "i", "s", "f"] {
            assert!(
                fields.contains(&format!("{f}:{tok}")),
                "{key}: holder {tok} has no {f}: field; fields {fields:?}"
            );
        }
    }
    for f in &fields {
        if let Some((p, tok)) = f.split_once(':')
            && ["c", "i", "s", "f", "m", "u"].contains(&p)
        {
            assert!(holders.contains(tok), "{key}: field {f} of no holder");
        }
    }
    if !holders.is_empty() || !queue.is_empty() {
        assert!(
            fields.contains("kind"),
            "{key}: in use, no kind: {fields:?}"
        );
        for suffix in ["", ":h"] {
            let ttl: i64 = r.cmd(&["PTTL", &format!("{k}{suffix}")]);
            assert!(ttl > 0, "{k}{suffix} has PTTL {ttl}");
        }
    }
}

/// A refusal at maxmemory: exit 69, one line saying so.
#[track_caller]
fn refused(run: Run) -> Run {
    let run = run.fails(69, "maxmemory");
    assert!(run.stderr.contains("out of memory"), "{}", run.stderr);
    run
}

/// What the design rests on (lua/common.lua), on the server under test: a
/// script without flags runs at maxmemory, its first write is refused if
/// that command may add memory, and after any first write nothing is.
#[test]
fn a_full_redis_refuses_only_a_scripts_first_write() {
    let r = server();
    let _: i64 = r.cmd(&["ZADD", "z", "1", "a"]);
    // Not full: ZADD XX of a member not there creates nothing.
    let _: i64 = r.cmd(&[
        "EVAL",
        "return redis.call('ZADD', KEYS[1], 'XX', 0, '-')",
        "1",
        "nokey",
    ]);
    assert_eq!(r.cmd::<i64>(&["EXISTS", "nokey"]), 0);
    let filled = fill(&r);
    let eval = |script: &str, keys: &[&str]| -> redis::RedisResult<redis::Value> {
        redis::cmd("EVAL")
            .arg(script)
            .arg(keys.len())
            .arg(keys)
            .query(&mut r.conn())
    };
    let oom = |res: redis::RedisResult<redis::Value>, what: &str| match res {
        // Code OOM (Redis 7, Valkey), or ERR with "-OOM ..." (Redis 6.2).
        Err(e) => assert!(
            e.to_string()
                .contains("command not allowed when used memory > 'maxmemory'"),
            "{what}: {e}"
        ),
        Ok(v) => panic!("{what}: ran at maxmemory: {v:?}"),
    };
    oom(
        eval("return redis.call('ZADD', KEYS[1], 2, 'a')", &["z"]),
        "a first write that may add memory",
    );
    oom(
        eval(
            "redis.call('TIME'); return redis.call('ZADD', KEYS[1], 'XX', 0, '-')",
            &["z"],
        ),
        "refuse_at_maxmemory's no-op ZADD XX",
    );
    // After a write that changes nothing, writes go through, even ones
    // that add memory.
    let v = eval(
        "redis.call('HDEL', KEYS[2], '-'); redis.call('ZADD', KEYS[1], 3, 'a'); \
         return redis.call('HSET', KEYS[2], 'new', 'field')",
        &["z", "h"],
    )
    .unwrap();
    assert_eq!(v, redis::Value::Int(1));
    assert_eq!(r.cmd::<String>(&["ZSCORE", "z", "a"]), "3");
    // Reads run.
    assert_eq!(
        eval("return redis.call('ZCARD', KEYS[1])", &["z"]).unwrap(),
        redis::Value::Int(1)
    );
    free(&r, filled);
    eval("return redis.call('ZADD', KEYS[1], 4, 'a')", &["z"]).unwrap();
}

/// The case: `rlock exec --ttl 3s` runs while Redis fills up. It
/// must keep its lock past its TTL (only renewals can), exit with its
/// command's status, and release; meanwhile others are refused.
#[test]
fn a_running_exec_renews_and_releases_through_a_full_redis() {
    let r = server();
    let dir = tmp_dir("oom", "exec");
    let go = dir.join("go");
    let child = rlock(&r)
        .args(["exec", "--ttl", "3s", "work", "--", "sh", "-c"])
        .args([format!(
            "until [ -e '{}' ]; do sleep 0.05; done; exit 7",
            go.display()
        )])
        .spawn();
    eventually(Duration::from_secs(10), "exec to hold the lock", || {
        r.held("work")
    });
    let fence = r.status_json("work")["fence"].clone();
    let filled = fill(&r);
    let full_since = Instant::now();

    // New locks and new waiters are refused, and leave nothing behind.
    refused(rlock(&r).args(["acquire", "fresh"]).run());
    assert!(
        keys_of(&r, "fresh").is_empty(),
        "{:?}",
        keys_of(&r, "fresh")
    );
    refused(
        rlock(&r)
            .args(["exec", "-w", "1m", "work", "--", "true"])
            .run(),
    );
    assert_eq!(r.status_json("work")["waiting"], 0);

    // A 3 s lease outlives 5 s at maxmemory only if renewals land.
    std::thread::sleep(Duration::from_secs(5).saturating_sub(full_since.elapsed()));
    let s = r.status_json("work");
    assert_eq!(s["held"], true, "the lease ran out at maxmemory: {s}");
    assert_eq!(s["fence"], fence, "{s}");
    assert_whole(&r, "work");

    std::fs::write(&go, "").unwrap();
    let run = finish(child, "rlock exec work").code(7);
    assert!(!run.stderr.contains("lost"), "{}", run.stderr);
    // Released at maxmemory: the lock's state is gone (but its fence).
    assert!(!r.held("work"));
    let left = keys_of(&r, "work");
    assert!(
        left.iter()
            .all(|k| k.ends_with(":fence") || k.ends_with("}:log") || k.ends_with("}:n")),
        "left at release: {left:?}"
    );

    free(&r, filled);
    let tok = rlock(&r).args(["acquire", "fresh"]).run().ok().token();
    rlock(&r)
        .args(["release", "fresh", "--token", &tok])
        .run()
        .ok();
}

/// Every path of the scripts at maxmemory: what lets a holder or a waiter
/// go on or go works, what would add a holder or a waiter is refused
/// before it writes, and every lock's state stays whole.
#[test]
fn a_full_redis_refuses_new_locks_and_waiters_but_lets_holders_go() {
    let r = server();
    let acquire = |args: &[&str]| rlock(&r).args(["acquire"]).args(args).run().ok().token();
    // Held twice by one token (a re-entry), held with a min-hold, a
    // semaphore with one live holder and one about to expire, a lock with
    // a waiter queued (its waiter lease: 3 s, its TTL).
    let held = acquire(&["held", "--ttl", "60s"]);
    rlock(&r)
        .args(["acquire", "held", "--ttl", "60s"])
        .env("RLOCK_TOKEN", &held)
        .run()
        .ok();
    assert_eq!(r.status_json("held")["holders"][0]["count"], 2);
    let parked = acquire(&["parked", "--ttl", "60s", "--min-hold", "1m"]);
    acquire(&["sem", "--limit", "2", "--ttl", "60s"]);
    acquire(&["sem", "--limit", "2", "--ttl", "1s"]);
    let q = acquire(&["q", "--ttl", "60s"]);
    let waiter = rlock(&r)
        .args(["acquire", "-q", "q", "--ttl", "3s", "-w", "1m"])
        .spawn();
    r.await_waiters("q", 1);
    let before: Vec<_> = ["held", "parked", "sem", "q"]
        .iter()
        .map(|k| members(&r, k))
        .collect();

    let filled = fill(&r);

    // Refused: a new lock, a busy one with -n, a semaphore slot (its
    // expired holder's fields would be pruned first, a write that Redis
    // would let the grant follow), a read lock, a new waiter.
    refused(rlock(&r).args(["acquire", "fresh"]).run());
    refused(rlock(&r).args(["acquire", "-n", "held"]).run());
    eventually(
        Duration::from_secs(5),
        "the 1 s semaphore lease to end",
        || r.status_json("sem")["holders"].as_array().unwrap().len() == 1,
    );
    refused(
        rlock(&r)
            .args(["acquire", "-n", "sem", "--limit", "2"])
            .run(),
    );
    refused(rlock(&r).args(["rw", "read", "fresh"]).run());
    refused(rlock(&r).args(["acquire", "-w", "1m", "held"]).run());
    for key in ["fresh", "held", "sem"] {
        assert_eq!(r.status_json(key)["waiting"], 0, "{key}");
    }
    assert!(
        keys_of(&r, "fresh").is_empty(),
        "{:?}",
        keys_of(&r, "fresh")
    );

    // Read-only commands answer.
    rlock(&r)
        .args(["check", "held", "--token", &held])
        .run()
        .ok();
    let list = rlock(&r).args(["list"]).run().ok().stdout;
    for key in ["held", "parked", "sem", "q"] {
        assert!(list.contains(key), "{list}");
    }
    // A renewal moves the lease.
    rlock(&r)
        .args(["renew", "held", "--token", &held, "--ttl", "2m"])
        .run()
        .ok();
    let ttl = r.status_json("held")["holders"][0]["ttl_ms"]
        .as_u64()
        .unwrap();
    assert!(
        ttl > 60_000,
        "renewed at maxmemory to 2m, lease left {ttl} ms"
    );
    // A release of one of two holds (HINCRBY), then the last.
    rlock(&r)
        .args(["release", "held", "--token", &held])
        .run()
        .ok();
    assert_eq!(r.status_json("held")["holders"][0]["count"], 1);
    rlock(&r)
        .args(["release", "held", "--token", &held])
        .run()
        .ok();
    assert!(!r.held("held"));
    // A release parked until its min-hold ends (HSET).
    rlock(&r)
        .args(["release", "parked", "--token", &parked])
        .run()
        .ok();
    let s = r.status_json("parked");
    assert_eq!(s["holders"][0]["count"], 0, "not parked: {s}");

    // The queued waiter keeps its place past its 3 s waiter lease: its
    // heartbeats land. When the holder releases, its turn comes, and the
    // grant is refused: it leaves the queue and exits 69.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        r.status_json("q")["waiting"],
        1,
        "the waiter lost its place"
    );
    rlock(&r).args(["release", "q", "--token", &q]).run().ok();
    refused(finish(waiter, "rlock acquire q -w 1m"));
    let s = r.status_json("q");
    assert_eq!(
        (s["held"].clone(), s["waiting"].clone()),
        (false.into(), 0.into())
    );

    // No token appeared anywhere, and every lock is whole.
    for (key, (h0, q0)) in ["held", "parked", "sem", "q"].iter().zip(&before) {
        let (h, q) = members(&r, key);
        assert!(
            h.is_subset(h0),
            "{key}: new holder at maxmemory: {h:?} {h0:?}"
        );
        assert!(
            q.is_subset(q0),
            "{key}: new waiter at maxmemory: {q:?} {q0:?}"
        );
        assert_whole(&r, key);
    }

    // Memory freed: locks and waiters are taken again.
    free(&r, filled);
    acquire(&["fresh", "--ttl", "60s"]);
    acquire(&["-n", "sem", "--limit", "2", "--ttl", "60s"]);
    let run = rlock(&r).args(["acquire", "-w", "100ms", "fresh"]).run();
    run.code(75);
}

/// RedLock with one master full: the others are a majority, and the full
/// one counts as a refusal, not as a foreign answer. Two full: refused,
/// saying why.
#[test]
fn a_full_redlock_master_is_outvoted() {
    let ms: Vec<Redis> = (0..3).map(|_| server()).collect();
    let urls = ms.iter().map(|m| m.url()).collect::<Vec<_>>().join(",");
    let rl = || rlock(&ms[0]).env("RLOCK_URL", &urls);
    let _f0 = fill(&ms[0]);
    let tok = rl()
        .args(["acquire", "k", "--ttl", "30s"])
        .run()
        .ok()
        .token();
    rl().args(["renew", "k", "--token", &tok]).run().ok();
    rl().args(["release", "k", "--token", &tok]).run().ok();
    let _f1 = fill(&ms[1]);
    let run = rl().args(["acquire", "-n", "k"]).run();
    refused(run);
    for m in &ms {
        assert!(!m.held("k"));
    }
}

/// `rlock doctor` reports memory headroom: fine, under the margin (warn),
/// at the limit (unsafe, exit 78).
#[test]
fn doctor_reports_memory_headroom() {
    let r = Redis::start_with(&[
        "--maxmemory-policy",
        "noeviction",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
    ]);
    let memory_line = |run: &Run| -> String {
        run.stdout
            .lines()
            .find(|l| l.contains(" memory: "))
            .unwrap_or_else(|| panic!("no memory line:\n{}", run.stdout))
            .to_string()
    };
    let run = rlock(&r).args(["doctor"]).run();
    let line = memory_line(&run);
    assert!(
        line.starts_with("ok ") && line.contains("no maxmemory"),
        "{line}"
    );

    let used = used_memory(&mut r.conn());
    let _: () = r.cmd(&["CONFIG", "SET", "maxmemory", &(used * 100).to_string()]);
    let line = memory_line(&rlock(&r).args(["doctor"]).run());
    assert!(
        line.starts_with("ok ") && line.contains("headroom"),
        "{line}"
    );

    // 95% used: a warning with the margin named.
    let _: () = r.cmd(&["CONFIG", "SET", "maxmemory", &(used * 100 / 95).to_string()]);
    let line = memory_line(&rlock(&r).args(["doctor"]).run());
    assert!(line.starts_with("warn "), "{line}");
    assert!(line.contains("under 10% of maxmemory"), "{line}");

    let filled = fill(&r);
    let run = rlock(&r).args(["doctor"]).run().code(78);
    let line = memory_line(&run);
    assert!(line.starts_with("unsafe "), "{line}");
    assert!(
        line.contains("refuses every new lock") && line.contains("fix: free memory"),
        "{line}"
    );
    let json = rlock(&r).args(["doctor", "--json"]).run().code(78);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let s = &v["servers"][0];
    assert!(
        s["used_memory"].as_u64().unwrap() > s["maxmemory"].as_u64().unwrap(),
        "{s}"
    );
    free(&r, filled);
    let line = memory_line(&rlock(&r).args(["doctor"]).run());
    assert!(line.starts_with("ok "), "{line}");
}
