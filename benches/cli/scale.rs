//! Section 17 (`RLOCK_BENCH_SECTIONS=17`): the operating commands with
//! 10,000 locks held (each with a grant in its history), on a 3-master
//! Redis Cluster and on one Redis, servers of their own: wall time of the
//! whole `rlock list --json`, `rlock metrics`, `rlock top --once --json`
//! and `rlock history --all --limit 100 --json` processes (median of
//! [`RUNS`]), and what one of each costs Redis: INFO commandstats usec
//! of the commands these send (the script calls, ZSCAN and SCAN: Redis
//! also counts each command a script runs, inside its script's time
//! already) summed over the masters, and the busiest master's share,
//! which bounds the wall time when the masters work at the same time.
//!
//! Goals (issue #31, item 9): on the cluster, `list` under 500 ms and
//! `metrics` under 1 s.
//!
//! `RLOCK_BENCH_AB=/path/to/rlock` adds a row per command for that binary
//! (another build, to compare), its runs taken in turn with this one's so
//! that both see the same load.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use rlock::{ConnectOptions, Locker};

use crate::client::{clean_env, request};
use crate::deployments::start_cluster;
use crate::process::run_ok;
use crate::server::info;
use crate::stats::{median, ms, section};
use crate::support::{Redis, start_redis};
use crate::{Bench, PREFIX, RLOCK};

const LOCKS: usize = 10_000;
const MASTERS: usize = 3;
const RUNS: usize = 5;

/// One command of the table: its arguments, its goal on the cluster (ms),
/// and how many locks its output shows.
struct Row {
    args: &'static [&'static str],
    goal: &'static str,
    count: fn(&str) -> usize,
}

const ROWS: [Row; 4] = [
    Row {
        args: &["list", "--json"],
        goal: "< 500",
        count: json_len,
    },
    Row {
        args: &["metrics"],
        goal: "< 1000",
        count: holders,
    },
    Row {
        args: &["top", "--once", "--json"],
        goal: "",
        // JSON lines, one object per lock.
        count: |out| out.lines().count(),
    },
    Row {
        args: &["history", "--all", "--limit", "100", "--json"],
        goal: "",
        count: |out| out.lines().count(),
    },
];

fn json_len(out: &str) -> usize {
    serde_json::from_str::<serde_json::Value>(out)
        .ok()
        .and_then(|v| v.as_array().map(Vec::len))
        .unwrap_or(0)
}

/// `rlock metrics`'s `rlock_lock_holders` samples: one per lock.
fn holders(out: &str) -> usize {
    out.lines()
        .filter(|l| l.starts_with("rlock_lock_holders{"))
        .count()
}

pub(crate) fn run(_: &Bench) {
    section(&format!(
        "17. {LOCKS} locks held: the operating commands on a {MASTERS}-master Redis Cluster \
         and on one Redis (median of {RUNS} runs, whole process; server time: INFO \
         commandstats usec per run, all masters, and the busiest one)"
    ));
    match start_cluster(MASTERS) {
        Ok(nodes) => deployment("cluster", &nodes, true),
        Err(why) => println!("   Redis Cluster: {why}, skipped"),
    }
    deployment("one Redis", &[start_redis(&[])], false);
}

fn deployment(name: &str, servers: &[Redis], cluster: bool) {
    let urls: Vec<String> = servers.iter().map(Redis::url).collect();
    let opts = ConnectOptions {
        urls: urls.clone(),
        cluster,
        ..Default::default()
    };
    let mut l = Locker::connect(&opts, PREFIX).expect("connect locker");
    let t = Instant::now();
    for i in 0..LOCKS {
        l.acquire(
            &format!("job-{i}"),
            &request(Duration::from_secs(600)),
            None,
            &mut |_| {},
        )
        .expect("acquire");
    }
    drop(l);
    println!(
        "   {name}: {LOCKS} locks taken in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    println!(
        "   {:<44} {:>6} {:>9} {:>7} {:>12} {:>12}",
        "", "locks", "ms", "goal", "server ms", "busiest ms"
    );
    let mut conns: Vec<redis::Connection> = servers.iter().map(Redis::conn).collect();
    let other = std::env::var("RLOCK_BENCH_AB").ok();
    let binaries: Vec<&str> = std::iter::once(RLOCK).chain(other.as_deref()).collect();
    for row in &ROWS {
        let mut shown = vec![0; binaries.len()];
        let mut times = vec![Vec::with_capacity(RUNS); binaries.len()];
        let mut spent = vec![vec![0.0; servers.len()]; binaries.len()];
        for _ in 0..RUNS {
            for (b, binary) in binaries.iter().enumerate() {
                let mut c = Command::new(binary);
                clean_env(&mut c);
                c.env("RLOCK_URL", urls.join(","))
                    .env("RLOCK_PREFIX", PREFIX)
                    .args(row.args);
                if cluster {
                    c.env("RLOCK_CLUSTER", "1");
                }
                let before = usecs(&mut conns);
                let t = Instant::now();
                let out = run_ok(&mut c);
                times[b].push(t.elapsed());
                let after = usecs(&mut conns);
                for (s, (a, b4)) in spent[b].iter_mut().zip(after.iter().zip(&before)) {
                    *s += (a - b4) / RUNS as f64 / 1e3;
                }
                shown[b] = (row.count)(&String::from_utf8_lossy(&out.stdout));
            }
        }
        for (b, binary) in binaries.iter().enumerate() {
            let label = if b == 0 {
                format!("rlock {}", row.args.join(" "))
            } else {
                format!("  (RLOCK_BENCH_AB) {}", row.args[0])
            };
            println!(
                "   {:<44} {:>6} {:>9.1} {:>7} {:>12.1} {:>12.1}",
                label,
                shown[b],
                ms(median(&times[b])),
                if cluster && b == 0 { row.goal } else { "" },
                spent[b].iter().sum::<f64>(),
                spent[b].iter().cloned().fold(0.0, f64::max)
            );
            let want = if row.args[0] == "history" { 100 } else { LOCKS };
            if shown[b] != want {
                println!(
                    "   ERROR: {binary} {} showed {}, not {want}",
                    row.args.join(" "),
                    shown[b]
                );
            }
        }
    }
}

/// The commands the operating commands send; the commands their scripts
/// run are counted in the scripts' time.
const SENT: [&str; 6] = ["eval", "evalsha", "eval_ro", "evalsha_ro", "zscan", "scan"];

/// Each server's time so far (µs) in the [`SENT`] commands.
fn usecs(conns: &mut [redis::Connection]) -> Vec<f64> {
    conns
        .iter_mut()
        .map(|c| {
            let i: HashMap<String, f64> = info(c, &["commandstats"]);
            i.iter()
                .filter(|(k, _)| k.strip_prefix("usec_").is_some_and(|k| SENT.contains(&k)))
                .map(|(_, v)| v)
                .sum()
        })
        .collect()
}
