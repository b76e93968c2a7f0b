//! Section 6: library lock cycles per second next to redis-benchmark's
//! EVAL on the same server.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::Bench;
use crate::client::*;
use crate::process::*;
use crate::server::*;
use crate::stats::*;
use crate::support::Redis;

/// Lock+unlock cycles per second through the library, on one key from one
/// and from eight threads (each with its own `Locker`), and on many keys
/// from 8 and 32 threads, next to what `redis-benchmark` gets from the
/// same server for a trivial EVAL.
pub(crate) fn run(b: &Bench) {
    let r = &b.redis;
    const WINDOW: Duration = Duration::from_secs(3);
    const CLIENTS: usize = 8;
    const REQUESTS: usize = 100_000;
    let runs: Vec<Cycles> = [(1, 1), (CLIENTS, 1), (CLIENTS, 128), (32, 1024)]
        .iter()
        .map(|&(threads, keys)| lib_cycles(r, "tput", threads, keys, WINDOW))
        .collect();
    let eval = redis_benchmark_eval(r, CLIENTS, REQUESTS);
    let left = leftovers(r);

    section(&format!(
        "6. Library throughput: acquire (Wait::Forever) + release, {:.0} s per row",
        WINDOW.as_secs_f64()
    ));
    println!(
        "   {:<8} {:>5} {:>9} {:>14} {:>8} {:>9} {:>12} {:>10} {:>9}",
        "threads",
        "keys",
        "cycles/s",
        "script calls/s",
        "vs EVAL",
        "cyc/EVAL",
        "requests/cyc",
        "redis CPU",
        "overlaps"
    );
    let eval_rate = eval.as_ref().ok().copied();
    for c in &runs {
        let rate = c.cycles as f64 / c.secs;
        let pct = |x: f64| eval_rate.map_or("-".into(), |e| format!("{:.1}%", 100.0 * x / e));
        println!(
            "   {:<8} {:>5} {:>9.0} {:>14.0} {:>8} {:>9} {:>12.2} {:>9.0}% {:>9}",
            c.threads,
            c.keys,
            rate,
            2.0 * rate,
            pct(2.0 * rate),
            pct(rate),
            c.requests / (c.cycles.max(1) as f64),
            100.0 * c.redis_cpu,
            c.overlaps
        );
        for e in c.errors.iter().take(3) {
            println!("   ERROR: {e}");
        }
    }
    match &eval {
        Ok(e) => println!(
            "   redis-benchmark -c {CLIENTS} -n {REQUESTS} EVAL \"return 1\" 0: {e:.0} ops/s (same server, same run)"
        ),
        Err(why) => println!("   redis-benchmark: {why}, skipped"),
    }
    println!("   script calls/s = 2 per cycle (acquire + release); vs EVAL = script calls/s over");
    println!(
        "   redis-benchmark's EVAL ops/s; cyc/EVAL = cycles/s over it (goal, #12: at least 40%"
    );
    println!(
        "   on many keys); requests/cyc = what the server got per cycle (EVALSHA+EVAL+BLPOP);"
    );
    println!("   redis CPU in % of one core; many keys: each cycle a thread takes the next key of");
    println!("   its own stride through the shared set, so threads meet on a key now and then");
    println!("   left in Redis: {}", describe(&left));
}

struct Cycles {
    threads: usize,
    keys: usize,
    cycles: u64,
    secs: f64,
    /// Client requests the server counted (EVALSHA, EVAL, BLPOP).
    requests: f64,
    overlaps: u64,
    /// Redis CPU-seconds per second of the run.
    redis_cpu: f64,
    errors: Vec<String>,
}

/// `threads` threads, connected before the clock starts, each acquiring and
/// releasing one of `keys` keys named after `key` until `window` is over;
/// then each finishes the cycle it is in. An atomic flag per key, set
/// inside the critical section, checks exclusion.
fn lib_cycles(r: &Redis, key: &str, threads: usize, keys: usize, window: Duration) -> Cycles {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let ttl = Duration::from_secs(30);
    let stop = Arc::new(AtomicBool::new(false));
    let inside: Arc<Vec<AtomicBool>> =
        Arc::new((0..keys).map(|_| AtomicBool::new(false)).collect());
    let names: Arc<Vec<String>> = Arc::new(if keys == 1 {
        vec![key.to_string()]
    } else {
        (0..keys).map(|i| format!("{key}-{i}")).collect()
    });
    let overlaps = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let mut l = locker(r);
            let (stop, inside, names) = (stop.clone(), inside.clone(), names.clone());
            let (overlaps, start) = (overlaps.clone(), start.clone());
            thread::spawn(move || {
                let mut n = 0usize;
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    // Thread t starts at its share of the keys and steps by
                    // 2t + 1: threads meet on a key now and then.
                    let i = (t * keys / threads + n * (2 * t + 1)) % keys;
                    let key = &names[i];
                    let lease = l.acquire(key, &request(ttl), None, &mut |_| {})?;
                    if inside[i].swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::Relaxed);
                    }
                    inside[i].store(false, Ordering::SeqCst);
                    l.release(key, &lease.token)?;
                    n += 1;
                }
                Ok::<_, rlock::Error>(n as u64)
            })
        })
        .collect();
    let mut conn = r.conn();
    let before = info(&mut conn, &["commandstats"]);
    let cpu_before = redis_cpu(&mut conn);
    start.wait();
    let t = Instant::now();
    thread::sleep(window);
    stop.store(true, Ordering::Relaxed);
    let mut cycles = 0;
    let mut errors = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(n)) => cycles += n,
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push("thread panicked".into()),
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = redis_cpu(&mut conn) - cpu_before;
    let after = info(&mut conn, &["commandstats"]);
    let d = |k: &str| after.get(k).unwrap_or(&0.0) - before.get(k).unwrap_or(&0.0);
    Cycles {
        threads,
        keys,
        cycles,
        secs,
        requests: d("cmdstat_evalsha") + d("cmdstat_eval") + d("cmdstat_blpop"),
        overlaps: overlaps.load(Ordering::Relaxed),
        redis_cpu: cpu / secs,
        errors,
    }
}

/// `redis-benchmark -q ... EVAL "return 1" 0` against our server: requests
/// per second from its final line, `EVAL return 1 0: 71633.23 requests per
/// second, p50=0.071 msec` (progress lines before it end in `\r`).
fn redis_benchmark_eval(r: &Redis, clients: usize, requests: usize) -> Result<f64, String> {
    if !on_path("redis-benchmark") {
        return Err("not installed".into());
    }
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &r.port.to_string(), "-q"])
        .args(["-c", &clients.to_string(), "-n", &requests.to_string()])
        .args(["EVAL", "return 1", "0"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(['\r', '\n'])
        .find_map(|l| l.split_once(" requests per second"))
        .and_then(|(head, _)| head.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("no rate in its output ({}): {text:?}", out.status))
}
