//! Section 13: `rlock list` on a Redis with 1,000,000 unrelated keys, as
//! rlock listed before the index of locks in use (a SCAN of the keyspace,
//! `RLOCK_LIST_SCAN=1`) and through the index, same server, same run; then
//! with 10,000 locks held; and the server time of the index touch that
//! follows every acquire (INFO commandstats).
//!
//! Goals (issue #19): 200 locks held, `list` under 20 ms; 10,000 held,
//! under 500 ms, and `metrics` under 1 s. Wall time of the whole `rlock list` process, median.

use std::time::{Duration, Instant};

use rlock::Locker;

use crate::Bench;
use crate::client::{locker, request, rlock};
use crate::process::run_ok;
use crate::server::info;
use crate::stats::{median, ms, section};
use crate::support::{Redis, start_redis};

const UNRELATED: usize = 1_000_000;
const FEW: usize = 200;
const MANY: usize = 10_000;
const RUNS: usize = 7;
const TOUCHES: usize = 2_000;

/// `count` keys that are not rlock's (`DEBUG POPULATE` where the server
/// allows it; a script otherwise).
fn unrelated(r: &Redis, count: usize) {
    let mut c = r.conn();
    let populated: redis::RedisResult<()> = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(count)
        .arg("app")
        .query(&mut c);
    if populated.is_ok() {
        return;
    }
    for start in (0..count).step_by(100_000) {
        let n = (count - start).min(100_000);
        let _: i64 = redis::cmd("EVAL")
            .arg(
                "for i = ARGV[1], ARGV[1] + ARGV[2] - 1 do redis.call('SET', 'app:' .. i, 'x') end return 1",
            )
            .arg(0)
            .arg(start)
            .arg(n)
            .query(&mut c)
            .expect("populate");
    }
}

fn hold(l: &mut Locker, from: usize, to: usize) {
    for i in from..to {
        l.acquire(
            &format!("job-{i}"),
            &request(Duration::from_secs(600)),
            None,
            &mut |_| {},
        )
        .expect("acquire");
    }
}

/// Median wall time of `rlock list` (with `scan`: as before the index),
/// and the number of locks it printed.
fn list(r: &Redis, scan: bool) -> (Duration, usize) {
    let mut shown = 0;
    let times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let mut c = rlock(r);
            c.args(["list", "--json"]);
            if scan {
                c.env("RLOCK_LIST_SCAN", "1");
            }
            let t = Instant::now();
            let out = run_ok(&mut c);
            let d = t.elapsed();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("list --json");
            shown = v.as_array().map_or(0, Vec::len);
            d
        })
        .collect();
    (median(&times), shown)
}

/// Median wall time of `rlock metrics`, and the number of locks it
/// reported (its `rlock_lock_holders` samples).
fn metrics(r: &Redis) -> (Duration, usize) {
    let mut shown = 0;
    let times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let mut c = rlock(r);
            c.arg("metrics");
            let t = Instant::now();
            let out = run_ok(&mut c);
            let d = t.elapsed();
            shown = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.starts_with("rlock_lock_holders{"))
                .count();
            d
        })
        .collect();
    (median(&times), shown)
}

pub(crate) fn run(_: &Bench) {
    section(&format!(
        "13. `rlock list`: {UNRELATED} unrelated keys; SCAN (before the index) vs the index \
         (median of {RUNS} runs, whole process)"
    ));
    let r = start_redis(&[]);
    unrelated(&r, UNRELATED);
    let mut l = locker(&r);
    hold(&mut l, 0, FEW);
    println!(
        "  {:<34} {:>10} {:>8} {:>8}",
        "", "locks held", "ms", "goal"
    );
    let (scan, n_scan) = list(&r, true);
    println!(
        "  {:<34} {:>10} {:>8.1} {:>8}",
        "list by SCAN (before)",
        n_scan,
        ms(scan),
        ""
    );
    let (index, n_index) = list(&r, false);
    println!(
        "  {:<34} {:>10} {:>8.1} {:>8}",
        "list through the index",
        n_index,
        ms(index),
        "< 20"
    );
    hold(&mut l, FEW, MANY);
    let mut c = r.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut c)
        .expect("RESETSTAT");
    let (many, n_many) = list(&r, false);
    let s = info(&mut c, &["commandstats"]);
    let sent = ["evalsha", "eval", "zscan"]
        .iter()
        .map(|k| s.get(&format!("usec_{k}")).unwrap_or(&0.0))
        .sum::<f64>()
        / RUNS as f64;
    println!(
        "  {:<34} {:>10} {:>8.1} {:>8}",
        "list through the index",
        n_many,
        ms(many),
        "< 500"
    );
    println!(
        "  {:<34} {:>10} {:>8.1}",
        "  of which Redis server time",
        n_many,
        sent / 1e3
    );
    let (metrics, n_metrics) = metrics(&r);
    println!(
        "  {:<34} {:>10} {:>8.1} {:>8}",
        "metrics through the index",
        n_metrics,
        ms(metrics),
        "< 1000"
    );
    if n_scan != FEW || n_index != FEW || n_many != MANY || n_metrics != MANY {
        println!("  ERROR: list showed {n_scan}, {n_index}, {n_many} locks, metrics {n_metrics}");
    }

    // The touch after an acquire, alone: lua/index.lua on a shard already
    // holding its share of 10,000 entries, as each acquire sends it.
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut c)
        .expect("RESETSTAT");
    let shard = "rlock:{i0}:index";
    let sha = load_index(&mut c);
    for i in 0..TOUCHES {
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg(shard)
            .arg(format!("job-{}", i % MANY))
            .arg(3_600_000 + 600_000)
            .query(&mut c)
            .expect("touch");
    }
    let s = info(&mut c, &["commandstats"]);
    let touch = s.get("usec_evalsha").unwrap_or(&0.0) / s.get("cmdstat_evalsha").unwrap_or(&1.0);
    // A whole library acquire + release (acquire script, touch, release
    // script), for scale.
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut c)
        .expect("RESETSTAT");
    for i in 0..TOUCHES {
        let k = format!("cycle-{}", i % 100);
        let lease = l
            .acquire(&k, &request(Duration::from_secs(10)), None, &mut |_| {})
            .expect("acquire");
        l.release(&k, &lease.token).expect("release");
    }
    let s = info(&mut c, &["commandstats"]);
    let sent = |k: &str| s.get(&format!("usec_{k}")).unwrap_or(&0.0);
    let cycle = (sent("evalsha") + sent("eval")) / TOUCHES as f64;
    println!(
        "  server time: the index touch {touch:.1} µs per acquire (on a shard growing to \
         {TOUCHES} entries); a whole acquire + release cycle {cycle:.1} µs, touch included \
         (so {:.1} µs without it)",
        cycle - touch
    );
}

/// Load lua/index.lua as build.rs assembles it (its parts put in, each
/// once, recursively) and the library sends it: a library acquire on one
/// server no longer does (the touch is inside the acquire script), so a
/// bench that runs it loads it. Its SHA1 is checked against the library's.
pub(crate) fn load_index(c: &mut redis::Connection) -> String {
    fn assemble(path: &std::path::Path, done: &mut Vec<String>, code: &mut String) {
        let text = std::fs::read_to_string(path).expect("read a Lua script");
        for line in text.split_inclusive('\n') {
            let part = line.trim_end().strip_prefix("--@").filter(|p| {
                !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            });
            match part {
                Some(p) if done.iter().any(|d| d == p) => {}
                Some(p) => {
                    done.push(p.to_string());
                    let lua = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
                    let file = if p == "common" {
                        lua.join("common.lua")
                    } else {
                        lua.join("part").join(format!("{p}.lua"))
                    };
                    assemble(&file, done, code);
                }
                None => code.push_str(line),
            }
        }
    }
    let mut code = String::new();
    let index = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/index.lua");
    assemble(&index, &mut Vec::new(), &mut code);
    let sha = crate::server::script_load(c, &code);
    assert_eq!(
        sha,
        env!("RLOCK_LUA_SHA_index.lua"),
        "lua/index.lua assembled here is not the library's (a part added?)"
    );
    sha
}
