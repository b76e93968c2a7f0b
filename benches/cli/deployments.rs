//! Section 8: acquire latency by deployment: one Redis, RedLock over 3
//! and 5 masters, a Redis Cluster.

use std::time::{Duration, Instant};

use rlock::{ConnectOptions, Locker, Released, Request, Wait};

use crate::server::*;
use crate::stats::*;
use crate::support::{CLUSTER_NODE, Redis, create_cluster, note, start_redis};
use crate::{Bench, PREFIX};

/// One deployment of section 8: its servers, its locker and its samples.
struct Deployment<'a> {
    name: &'static str,
    servers: &'a [Redis],
    cluster: bool,
    locker: Result<Locker, String>,
    acquire: Vec<Duration>,
    cycle: Vec<Duration>,
    errors: Vec<String>,
}

/// Acquire (`Wait::No`, a free lock) then release, one thread, through the
/// library, on each kind of deployment of the README but Sentinel (which
/// talks to one master, as one Redis does): one Redis, RedLock over 3 and
/// over 5 independent redis-servers, and a 3-master Redis Cluster. Every
/// deployment gets servers of its own, started here and killed at the end
/// of the section, and the rows take turns cycle by cycle, as in section 1.
pub(crate) fn run(_: &Bench) {
    const N: usize = 500;
    const WARMUP: usize = 20;
    const MASTERS: usize = 3;
    let one = [start_redis(&[])];
    let red3: Vec<Redis> = (0..3).map(|_| start_redis(&[])).collect();
    let red5: Vec<Redis> = (0..5).map(|_| start_redis(&[])).collect();
    let cluster = start_cluster(MASTERS);
    let connect = |servers: &[Redis], cluster: bool| {
        let opts = ConnectOptions {
            urls: servers.iter().map(Redis::url).collect(),
            cluster,
            ..Default::default()
        };
        Locker::connect(&opts, PREFIX).map_err(|e| format!("connect: {e}"))
    };
    let row = |name, servers, cluster| Deployment {
        name,
        servers,
        cluster,
        locker: connect(servers, cluster),
        acquire: Vec::with_capacity(N),
        cycle: Vec::with_capacity(N),
        errors: Vec::new(),
    };
    let mut rows = vec![
        row("one Redis", &one[..], false),
        row("RedLock, 3 redis-servers", &red3, false),
        row("RedLock, 5 redis-servers", &red5, false),
    ];
    if let Ok(nodes) = &cluster {
        rows.push(row("Redis Cluster, 3 masters (key k<i>)", nodes, true));
    }

    let req = Request::builder(Duration::from_secs(30))
        .wait(Wait::No)
        .build()
        .expect("request");
    for round in 0..WARMUP + N {
        for d in &mut rows {
            let Ok(l) = &mut d.locker else { continue };
            // Cluster: a new key each cycle, so that every master serves;
            // elsewhere one key, free again after each release.
            let key = if d.cluster {
                format!("k{round}")
            } else {
                "k".to_string()
            };
            let t = Instant::now();
            let lease = match l.acquire(&key, &req, None, &mut |_| {}) {
                Ok(lease) => lease,
                Err(e) => {
                    note(&mut d.errors, format!("round {round}: acquire {key}: {e}"));
                    continue;
                }
            };
            let acquired = t.elapsed();
            let released = l.release(&key, &lease.token);
            let cycle = t.elapsed();
            match released {
                Ok(Released::Released) if round >= WARMUP => {
                    d.acquire.push(acquired);
                    d.cycle.push(cycle);
                }
                Ok(Released::Released) => {}
                Ok(other) => note(&mut d.errors, format!("round {round}: release: {other:?}")),
                Err(e) => note(&mut d.errors, format!("round {round}: release: {e}")),
            }
        }
    }

    section(&format!(
        "8. Acquire latency by deployment, library, one thread, Wait::No on a free lock \
         (N={N} each after {WARMUP} warm-up, round-robin)"
    ));
    println!(
        "   {:<36} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "deployment", "acquire", "p99", "acq+rel", "p99", "x acq", "x acq+rel"
    );
    let base = rows
        .first()
        .filter(|d| !d.acquire.is_empty())
        .map(|d| (ms(median(&d.acquire)), ms(median(&d.cycle))));
    for d in &rows {
        if let Err(why) = &d.locker {
            println!("   {:<36} {why}", d.name);
            continue;
        }
        let (a, c) = (ms(median(&d.acquire)), ms(median(&d.cycle)));
        let (xa, xc) = base.map_or(("-".into(), "-".into()), |(ba, bc)| {
            (format!("{:.2}x", a / ba), format!("{:.2}x", c / bc))
        });
        println!(
            "   {:<36} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9} {:>9}",
            d.name,
            a,
            ms(p99(&d.acquire)),
            c,
            ms(p99(&d.cycle)),
            xa,
            xc
        );
        if d.acquire.len() < N {
            println!(
                "   {:<36} only {} of {N} cycles counted",
                "",
                d.acquire.len()
            );
        }
        for e in &d.errors {
            println!("   ERROR: {e}");
        }
    }
    println!("   ms; x = median over the one-Redis row's median; every row on servers of its own");
    println!("   RedLock: each call runs on every master at once, one thread per master; acquire");
    println!("   returns once a majority has granted, release once every master has answered");
    match &cluster {
        Ok(nodes) => {
            let per: Vec<String> = nodes
                .iter()
                .map(|r| {
                    redis::cmd("DBSIZE")
                        .query::<u64>(&mut r.conn())
                        .map_or_else(|e| format!("? ({e})"), |n| n.to_string())
                })
                .collect();
            println!(
                "   cluster: key k<i> in cycle i (k0..k{}), a new key each cycle so that all {MASTERS}",
                WARMUP + N - 1
            );
            println!(
                "   masters serve; the others reuse key k. Keys per master afterwards (fencing counters): {}",
                per.join(" / ")
            );
        }
        Err(why) => println!("   Redis Cluster: {why}, skipped"),
    }
    let all: Vec<&Redis> = rows.iter().flat_map(|d| d.servers).collect();
    let left: Vec<String> = all.iter().flat_map(|r| leftovers(r)).collect();
    println!("   left on all {} servers: {}", all.len(), describe(&left));
}

/// `n` redis-servers in cluster mode made into one Redis Cluster of `n`
/// masters and no replicas, ready when every node says `cluster_state:ok`.
/// Err says why there is none.
pub(crate) fn start_cluster(n: usize) -> Result<Vec<Redis>, String> {
    let nodes: Vec<Redis> = (0..n).map(|_| start_redis(&CLUSTER_NODE)).collect();
    create_cluster(&nodes.iter().collect::<Vec<_>>())?;
    Ok(nodes)
}
