//! Section 15 (#21): where one uncontended lock cycle's server time goes,
//! script path by script path, beside the naive pair and the bare cost of
//! running a script at all; and `rlock exec k -- true` next to `flock FILE
//! true` and the naive pair as one `redis-cli` per command, interleaved.
//!
//! Server time per call is read from the slow log with a threshold of 0
//! (every command is logged with its duration, the same clock as INFO
//! commandstats' usec), grouped by the script's SHA1: so the acquire, the
//! index touch pipelined behind it and the release are told apart within
//! the very same cycles. Inner commands per path come from INFO
//! commandstats around a phase that runs only that path.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use rlock::{Request, Wait};

use crate::Bench;
use crate::client::{locker, rlock};
use crate::process::run_ok;
use crate::server::info;
use crate::stats::{median, ms, section};
use crate::support::{Redis, start_redis};

const CYCLES: usize = 500;
const PHASE: usize = 300;
const WALL: usize = 150;
const COMMON: &str = include_str!("../../lua/common.lua");

/// Every command from now on goes to the slow log.
pub(crate) fn slowlog_start(conn: &mut redis::Connection) {
    for (k, v) in [
        ("slowlog-log-slower-than", "0"),
        ("slowlog-max-len", "100000"),
    ] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .exec(conn)
            .expect("CONFIG SET");
    }
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .exec(conn)
        .expect("SLOWLOG RESET");
}

/// Back to logging only slow commands (10 ms, as the bench's server had).
pub(crate) fn slowlog_stop(conn: &mut redis::Connection) {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg("10000")
        .exec(conn)
        .expect("CONFIG SET");
}

/// The slow log's durations (µs) by what was called: the command, or for
/// EVALSHA/FCALL the script named by `names` (else its first argument).
fn slowlog_take(
    conn: &mut redis::Connection,
    names: &HashMap<&str, &str>,
) -> HashMap<String, Vec<u64>> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1_000_000)
        .query(conn)
        .expect("SLOWLOG GET");
    slowlog_stop(conn);
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    for e in entries {
        let redis::Value::Array(f) = e else { continue };
        let (Some(redis::Value::Int(us)), Some(redis::Value::Array(args))) = (f.get(2), f.get(3))
        else {
            continue;
        };
        let arg = |i: usize| match args.get(i) {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).to_lowercase(),
            _ => String::new(),
        };
        let cmd = arg(0);
        let key = match cmd.as_str() {
            "evalsha" | "fcall" => {
                let a = arg(1);
                names
                    .get(a.as_str())
                    .map_or_else(|| format!("{cmd} {a}"), |n| (*n).to_string())
            }
            "slowlog" | "config" | "info" => continue,
            _ => cmd,
        };
        out.entry(key)
            .or_default()
            .push((*us).max(0).unsigned_abs());
    }
    out
}

fn mean(v: &[u64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<u64>() as f64 / v.len() as f64
    }
}

/// Inner (script-run) commands per call of what `f` runs `n` times.
fn inner_commands(r: &Redis, n: usize, sent: &[&str], mut f: impl FnMut(usize)) -> String {
    let mut conn = r.conn();
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut conn)
        .expect("CONFIG RESETSTAT");
    for i in 0..n {
        f(i);
    }
    let after = info(&mut conn, &["commandstats"]);
    let mut rows: Vec<(String, f64)> = after
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("cmdstat_")?, *v)))
        .filter(|(k, _)| {
            !sent.contains(k)
                && *k != "info"
                && !k.starts_with("config")
                && !k.starts_with("client")
        })
        .map(|(k, v)| (k.to_uppercase(), v / n as f64))
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: f64 = rows.iter().map(|(_, c)| c).sum();
    let by: Vec<String> = rows.iter().map(|(k, c)| format!("{k} {c:.1}")).collect();
    format!("{total:.1}: {}", by.join(", "))
}

/// Server µs spent so far in each of EVALSHA, EVAL, FCALL and SET.
fn usec_now(conn: &mut redis::Connection) -> f64 {
    let i = info(conn, &["commandstats"]);
    ["evalsha", "eval", "fcall", "set"]
        .iter()
        .map(|c| i.get(&format!("usec_{c}")).unwrap_or(&0.0))
        .sum()
}

pub(crate) fn run(_: &Bench) {
    let r = start_redis(&[]);
    let mut conn = r.conn();
    let mut obs = r.conn();
    let cad = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
    let load = crate::server::script_load;
    let cad_sha = load(&mut conn, cad);
    let empty_sha = load(&mut conn, "return 0");
    let prelude_sha = load(&mut conn, &format!("{COMMON}\nreturn 0"));
    let functions = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg("#!lua name=rlockbench\nredis.register_function('noop', function() return 0 end)")
        .query::<String>(&mut conn)
        .is_ok();
    let keys: Vec<String> = (1..=10).map(|i| format!("rlock:{{p}}:{i}")).collect();
    let index_sha = crate::index::load_index(&mut conn);

    let mut l = locker(&r);
    let req = Request::builder(Duration::from_secs(30))
        .wait(Wait::No)
        .build()
        .expect("request");
    // Each step's server time: the INFO commandstats usec it added (the
    // INFO calls themselves are counted in a row of their own).
    let steps = [
        "naive SET NX PX",
        "naive compare-and-delete EVALSHA",
        "library acquire (acquire.lua + index.lua)",
        "library release (release.lua)",
        "index.lua alone (same touch, another name)",
        "empty EVALSHA",
        "empty EVALSHA + common.lua prelude",
        "empty FCALL (Redis 7 Functions)",
    ];
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); steps.len()];
    let mut last = usec_now(&mut obs);
    let mut mark = |obs: &mut redis::Connection, i: usize, per: &mut Vec<Vec<f64>>| {
        let now = usec_now(obs);
        per[i].push(now - last);
        last = now;
    };
    for i in 0..CYCLES {
        let tok = format!("tok-{i}");
        let _: Option<String> = redis::cmd("SET")
            .arg("naive")
            .arg(&tok)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query(&mut conn)
            .expect("SET");
        mark(&mut obs, 0, &mut per);
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&cad_sha)
            .arg(1)
            .arg("naive")
            .arg(&tok)
            .query(&mut conn)
            .expect("EVALSHA");
        mark(&mut obs, 1, &mut per);
        let lease = l.acquire("p", &req, None, &mut |_| {}).expect("acquire");
        mark(&mut obs, 2, &mut per);
        l.release("p", &lease.token).expect("release");
        mark(&mut obs, 3, &mut per);
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&index_sha)
            .arg(1)
            .arg("rlock:{i0}:index")
            .arg("p2")
            .arg(3_630_000)
            .query(&mut conn)
            .expect("EVALSHA index");
        mark(&mut obs, 4, &mut per);
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&empty_sha)
            .arg(0)
            .query(&mut conn)
            .expect("EVALSHA");
        mark(&mut obs, 5, &mut per);
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&prelude_sha)
            .arg(10)
            .arg(&keys)
            .query(&mut conn)
            .expect("EVALSHA");
        mark(&mut obs, 6, &mut per);
        if functions {
            let _: i64 = redis::cmd("FCALL")
                .arg("noop")
                .arg(0)
                .query(&mut conn)
                .expect("FCALL");
            mark(&mut obs, 7, &mut per);
        }
    }

    // What each inner command costs: the slow log at threshold 0, over
    // cycles of their own (logging every command slows the scripts down,
    // so their own totals are taken from the run above).
    let names = HashMap::new();
    slowlog_start(&mut conn);
    for _ in 0..PHASE {
        let lease = l.acquire("p", &req, None, &mut |_| {}).expect("acquire");
        l.release("p", &lease.token).expect("release");
    }
    let log = slowlog_take(&mut conn, &names);

    // Inner commands of each library path on its own.
    let sent = ["evalsha", "eval", "fcall", "hello", "select", "ping"];
    let mut leases = Vec::new();
    let acq = inner_commands(&r, PHASE, &sent, |i| {
        leases.push(
            l.acquire(&format!("q{i}"), &req, None, &mut |_| {})
                .expect("acquire"),
        );
    });
    let mut it = leases.iter();
    let rel = inner_commands(&r, PHASE, &sent, |i| {
        let lease = it.next().expect("a lease");
        l.release(&format!("q{i}"), &lease.token).expect("release");
    });

    section(&format!(
        "15. Server time per step (#21; INFO commandstats usec added by each call, {CYCLES} interleaved cycles)"
    ));
    println!(
        "   {:<48} {:>7} {:>7} {:>7}",
        "step", "calls", "mean", "p10"
    );
    let stat = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let mean = if s.is_empty() {
            0.0
        } else {
            s.iter().sum::<f64>() / s.len() as f64
        };
        (mean, s.get(s.len() / 10).copied().unwrap_or(0.0))
    };
    for (name, v) in steps.iter().zip(&per) {
        let (mean, p10) = stat(v);
        println!("   {name:<48} {:>7} {mean:>7.1} {p10:>7.1}", v.len());
    }
    let m = |i: usize| stat(&per[i]).0;
    let naive = m(0) + m(1);
    let lib = m(2) + m(3);
    println!(
        "   naive pair {naive:.1} us; library cycle {lib:.1} us = {:.2}x (goal 3.0x); of it the index touch about {:.1} us",
        lib / naive,
        m(4)
    );
    println!(
        "   inner commands per call (slow log at threshold 0, {PHASE} library cycles), mean us:"
    );
    let mut rows: Vec<(&String, &Vec<u64>)> = log
        .iter()
        .filter(|(k, _)| !k.starts_with("evalsha") && !k.starts_with("eval "))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let row: Vec<String> = rows
        .iter()
        .map(|(k, v)| {
            format!(
                "{} {:.2} (x{:.0})",
                k.to_uppercase(),
                mean(v),
                v.len() as f64 / PHASE as f64
            )
        })
        .collect();
    for chunk in row.chunks(6) {
        println!("     {}", chunk.join(", "));
    }
    println!("   inner commands, acquire + index touch: {acq}");
    println!("   inner commands, release: {rel}");

    // Wall time, interleaved.
    let port = r.port.to_string();
    let lockfile = r.dir.join("flock-profile.lock");
    let lockfile = lockfile.to_str().expect("temp path is UTF-8").to_string();
    let mut exec = Vec::new();
    let mut flock = Vec::new();
    let mut pair = Vec::new();
    for i in 0..WALL + 5 {
        let t = Instant::now();
        run_ok(rlock(&r).args(["exec", "k", "--", "true"]));
        let a = t.elapsed();
        let t = Instant::now();
        run_ok(Command::new("flock").args([&lockfile, "true"]));
        let b = t.elapsed();
        let tok = format!("tok-{i}");
        let t = Instant::now();
        for args in [
            vec!["SET", "naivecli", &tok, "NX", "PX", "30000"],
            vec!["EVALSHA", &cad_sha, "1", "naivecli", &tok],
        ] {
            run_ok(Command::new("redis-cli").args(["-p", &port]).args(&args));
        }
        let c = t.elapsed();
        if i >= 5 {
            exec.push(a);
            flock.push(b);
            pair.push(c);
        }
    }
    let (e, f, p) = (median(&exec), median(&flock), median(&pair));
    println!(
        "   wall, median of {WALL} interleaved: rlock exec k -- true {:.3} ms, flock FILE true {:.3} ms ({:.2}x, goal 1.4x), naive pair as 2 redis-cli {:.3} ms",
        ms(e),
        ms(f),
        e.as_secs_f64() / f.as_secs_f64(),
        ms(p)
    );
}
