//! Section 10: what one lock cycle costs the Redis server, side by side
//! with the naive lock (`SET k tok NX PX` + a compare-and-delete EVALSHA),
//! same server, same run: the library's acquire + release, and one whole
//! `rlock exec cK -- true` from the CLI (its connection set-up included).
//!
//! How the server time is read. `CONFIG RESETSTAT` zeroes INFO
//! commandstats, the cycles run, and one `INFO commandstats` reads, per
//! command, `calls` and `usec`. In Redis 7 a script's commands are counted
//! twice over: the EVALSHA row's usec is the script's whole run, the
//! commands it called included, and those inner commands also appear in
//! their own rows (GET, HGET, ZADD ...) with their own calls and usec. So
//! the server time of a cycle is the sum of the usec of the rows of the
//! commands clients sent (EVALSHA, EVAL, SET, BLPOP, connection set-up),
//! never of all rows; the inner rows are reported only as counts, beside.
//! The rows of our own CONFIG RESETSTAT and INFO are left out (the INFO
//! that reads is not yet counted in its own reply).

use std::collections::HashMap;
use std::time::Duration;

use rlock::{Request, Wait};

use crate::Bench;
use crate::client::{locker, rlock};
use crate::process::run_ok;
use crate::server::info;
use crate::stats::section;
use crate::support::{Redis, start_redis};

const CYCLES: usize = 500;
const EXEC_CYCLES: usize = 100;
/// The commands rlock's clients send on these paths (its scripts call none
/// of them): their usec is the server time of a cycle.
const RLOCK_SENT: [&str; 3] = ["evalsha", "eval", "blpop"];
/// The naive lock's client commands.
const NAIVE_SENT: [&str; 2] = ["set", "evalsha"];

/// One cycle's cost, averaged over the cycles measured.
struct Cost {
    /// Server time of the commands clients sent, µs per cycle.
    usec: f64,
    /// Commands clients sent per cycle.
    sent: f64,
    /// Commands run inside scripts per cycle.
    inner: f64,
    /// Inner commands per cycle, by name, most first.
    inner_by: Vec<(String, f64)>,
}

/// Connection set-up and other commands no script may call: always sent
/// by a client.
fn connection_command(name: &str) -> bool {
    [
        "client|", "script|", "hello", "auth", "select", "ping", "readonly",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// Server cost per cycle of `cycle`, run `n` times; `sent` names the
/// commands the clients send (their usec already holds the inner ones).
fn measure(r: &Redis, n: usize, sent: &[&str], mut cycle: impl FnMut(usize)) -> Cost {
    let mut conn = r.conn();
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut conn)
        .expect("CONFIG RESETSTAT");
    for i in 0..n {
        cycle(i);
    }
    let after = info(&mut conn, &["commandstats"]);
    let calls: HashMap<&str, f64> = after
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("cmdstat_")?, *v)))
        .filter(|(name, _)| *name != "info" && !name.starts_with("config|"))
        .collect();
    let per = |x: f64| x / n as f64;
    let is_sent = |name: &str| sent.contains(&name) || connection_command(name);
    let usec: f64 = calls
        .keys()
        .filter(|name| is_sent(name))
        .map(|name| after.get(&format!("usec_{name}")).unwrap_or(&0.0))
        .sum();
    let mut inner_by: Vec<(String, f64)> = calls
        .iter()
        .filter(|(name, _)| !is_sent(name))
        .map(|(name, c)| (name.to_uppercase(), per(*c)))
        .collect();
    inner_by.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Cost {
        usec: per(usec),
        sent: per(calls
            .iter()
            .filter(|(k, _)| is_sent(k))
            .map(|(_, c)| c)
            .sum()),
        inner: inner_by.iter().map(|(_, c)| c).sum(),
        inner_by,
    }
}

pub(crate) fn run(_: &Bench) {
    let r = start_redis(&[]);
    let mut conn = r.conn();
    let cad = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(cad)
        .query(&mut conn)
        .expect("SCRIPT LOAD");
    let naive = measure(&r, CYCLES, &NAIVE_SENT, |i| {
        let tok = format!("tok-{i}");
        let _: Option<String> = redis::cmd("SET")
            .arg("naive")
            .arg(&tok)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query(&mut conn)
            .expect("SET");
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg("naive")
            .arg(&tok)
            .query(&mut conn)
            .expect("EVALSHA");
    });
    let mut l = locker(&r);
    let req = Request::builder(Duration::from_secs(30))
        .wait(Wait::No)
        .build()
        .expect("request");
    let lib = measure(&r, CYCLES, &RLOCK_SENT, |_| {
        let lease = l.acquire("cost", &req, None, &mut |_| {}).expect("acquire");
        l.release("cost", &lease.token).expect("release");
    });
    // The history at its cap (#19): what it weighs, and what the cycle
    // costs with counters only (no stream).
    let name = l.name("cost").expect("lock name");
    let weigh = |conn: &mut redis::Connection, k: &str| -> i64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(k)
            .arg("SAMPLES")
            .arg(0)
            .query(conn)
            .unwrap_or(0)
    };
    let log_len: i64 = redis::cmd("XLEN")
        .arg(name.log_key())
        .query(&mut conn)
        .unwrap_or(0);
    let log_mem = weigh(&mut conn, &name.log_key());
    let stats_mem = weigh(&mut conn, &name.stats_key());
    let keep = rlock::HistoryLimits::default().retention();
    l.set_history(rlock::HistoryLimits::new(0, keep).expect("history limits"));
    let lib_counters = measure(&r, CYCLES, &RLOCK_SENT, |_| {
        let lease = l
            .acquire("cost0", &req, None, &mut |_| {})
            .expect("acquire");
        l.release("cost0", &lease.token).expect("release");
    });
    // The naive lock as a shell script runs it: one redis-cli per command,
    // each a new connection, as each `rlock exec` is. Server time per call
    // depends on the pacing (a server that idles between calls runs them
    // with colder caches), so the CLI is compared with this row.
    let port = r.port.to_string();
    let naive_cli = measure(&r, EXEC_CYCLES, &NAIVE_SENT, |i| {
        let tok = format!("tok-{i}");
        for args in [
            vec!["SET", "naivecli", &tok, "NX", "PX", "30000"],
            vec!["EVALSHA", &sha, "1", "naivecli", &tok],
        ] {
            let out = std::process::Command::new("redis-cli")
                .args(["-p", &port])
                .args(&args)
                .output()
                .expect("redis-cli");
            assert!(out.status.success(), "redis-cli {args:?}");
        }
    });
    let cli = measure(&r, EXEC_CYCLES, &RLOCK_SENT, |i| {
        run_ok(rlock(&r).args(["exec", &format!("c{i}"), "--", "true"]));
    });
    section(&format!(
        "10. Redis cost per lock cycle (INFO commandstats after CONFIG RESETSTAT; {CYCLES} cycles, exec {EXEC_CYCLES})"
    ));
    println!(
        "   {:<44} {:>8} {:>8} {:>6} {:>6} {:>7} {:>7}",
        "cycle", "usec", "commands", "sent", "inner", "x usec", "x cmds"
    );
    let rows = [
        (
            "naive SET NX PX + compare-and-delete EVALSHA",
            &naive,
            &naive,
        ),
        ("rlock library acquire + release", &lib, &naive),
        ("the same, --history-events 0", &lib_counters, &naive),
        (
            "naive pair, one redis-cli per command",
            &naive_cli,
            &naive_cli,
        ),
        ("rlock exec cK -- true (CLI)", &cli, &naive_cli),
    ];
    for (name, c, base) in rows {
        let cmds = c.sent + c.inner;
        println!(
            "   {name:<44} {:>8.1} {cmds:>8.1} {:>6.1} {:>6.1} {:>6.2}x {:>6.2}x",
            c.usec,
            c.sent,
            c.inner,
            c.usec / base.usec,
            cmds / (base.sent + base.inner)
        );
    }
    for (name, c) in [("library", &lib), ("exec", &cli)] {
        let by: Vec<String> = c
            .inner_by
            .iter()
            .map(|(k, n)| format!("{k} {n:.1}"))
            .collect();
        println!("   inside scripts per {name} cycle: {}", by.join(", "));
    }
    println!(
        "   usec: server time per cycle, the sum over the commands clients sent (EVALSHA, EVAL,"
    );
    println!(
        "   SET, BLPOP, connection set-up), whose usec includes the commands scripts ran; those"
    );
    println!("   are counted as inner and their time is not added again. commands = sent + inner.");
    println!("   x = over the naive pair paced alike: the library over the first row, the CLI");
    println!("   over the redis-cli row. Goals (#12): library at most 2x, exec at most 2.5x usec");
    println!(
        "   history after {CYCLES} cycles (cap 200): P{{K}}:log {log_len} entries, {log_mem} bytes; P{{K}}:n {stats_mem} bytes"
    );
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    keys.sort();
    let immortal: Vec<&String> = keys
        .iter()
        .filter(|k| {
            redis::cmd("PTTL")
                .arg(*k)
                .query::<i64>(&mut conn)
                .unwrap_or(0)
                == -1
        })
        .collect();
    let sample: Vec<&&String> = immortal.iter().take(3).collect();
    println!(
        "   keys left after the runs: {}, {} of them without an expiry (e.g. {sample:?})",
        keys.len(),
        immortal.len(),
    );
}
