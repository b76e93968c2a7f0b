//! `cargo bench --bench cli`: what the `rlock` CLI and library cost next to
//! `flock`, `redis-cli PING` and `/bin/true` on the same machine.
//!
//! Prints a plain-text table and asserts nothing about timings: numbers on a
//! shared machine are for reading, not for failing a build. Correctness is
//! still checked where it is cheap (exclusion, FIFO order, leftovers),
//! because a fast but wrong lock is no benchmark.
//!
//! Starts its own throwaway redis-server on a free loopback port, and uses
//! the `rlock` binary Cargo built for this bench (bench profile). If `etcd`
//! and `etcdctl` are on PATH (`make bench` installs Debian's etcd-server and
//! etcd-client), it starts a throwaway single-node etcd the same way and
//! adds `etcdctl lock` rows; without them those rows are skipped. Section
//! 8 starts more redis-servers of its own: two RedLock sets (3 and 5
//! independent masters) and a 3-master Redis Cluster.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rlock::{ConnectOptions, Locker, Released, Request, Wait};

#[path = "cli/cost.rs"]
mod cost;
#[path = "cli/safety.rs"]
mod safety;

const RLOCK: &str = env!("CARGO_BIN_EXE_rlock");
const PREFIX: &str = "rlock:";
/// Past this the whole run is killed, so a wedged lock cannot hang CI.
const WATCHDOG: Duration = Duration::from_secs(300);

fn main() {
    if std::env::var_os(RSS_HELPER).is_some() {
        rss_helper_main();
    }
    let started = Instant::now();
    let redis = start_redis(&[]);
    let etcd = Etcd::start();
    watchdog(WATCHDOG);
    let version = redis_version(&redis);
    println!("rlock CLI benchmark");
    println!(
        "  redis-server {version} on 127.0.0.1:{}, {} CPUs, binary {RLOCK}",
        redis.port,
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    match &etcd {
        Ok(e) => println!(
            "  etcd {} on 127.0.0.1:{} (single node, WAL fsynced on disk; redis persists nothing)",
            e.version, e.port
        ),
        Err(why) => println!("  etcd: {why}, skipped"),
    }
    println!("  all times in ms; median over N runs unless said otherwise");
    let etcd = etcd.as_ref().map_err(String::as_str);

    // RLOCK_BENCH_SECTIONS=3,9 runs only those sections.
    let only = std::env::var("RLOCK_BENCH_SECTIONS").ok();
    let run = |n: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|s| s.trim() == n))
    };
    if run("1") {
        uncontended_cycle(&redis, etcd);
    }
    if run("2") {
        idle_waiters(&redis);
    }
    if run("3") {
        handoff_latency(&redis);
    }
    if run("4") {
        crowd(&redis);
    }
    if run("5") {
        contended(&redis, etcd);
    }
    if run("6") {
        throughput(&redis);
    }
    if run("7") {
        peak_rss(&redis, etcd);
    }
    if run("8") {
        deployments();
    }
    if run("9") {
        safety::margins();
    }
    if run("10") {
        cost::redis_cost();
    }

    println!();
    println!("total bench time {:.1} s", started.elapsed().as_secs_f64());
}

// ---------------------------------------------------------------- 1

/// A named thing to time; it returns the wall time of one run.
type Case<'a> = (&'static str, Box<dyn FnMut() -> Duration + 'a>);

/// Each process-spawning variant N times, interleaved round-robin so that
/// machine noise (other jobs, frequency scaling) hits all of them alike.
/// With etcd, `etcdctl lock` (about 25 ms a run here) joins the same rounds.
fn uncontended_cycle(r: &Redis, etcd: Result<&Etcd, &str>) {
    const N: usize = 200;
    const WARMUP: usize = 5;
    let port = r.port.to_string();
    let lockfile = r.dir.join("flock-cycle.lock");
    let lockfile = lockfile.to_str().expect("temp path is UTF-8");
    let mut cases: Vec<Case> = vec![
        (
            "a  rlock acquire k + rlock release k",
            Box::new(|| acquire_release_pair(r, "k")),
        ),
        (
            "b  redis-cli PING",
            Box::new(|| {
                timed(
                    Command::new("redis-cli").args(["-h", "127.0.0.1", "-p", &port, "PING"]),
                    "PONG",
                )
            }),
        ),
        (
            "c  rlock exec k -- true",
            Box::new(|| timed(rlock(r).args(["exec", "k", "--", "true"]), "")),
        ),
        (
            "d  flock FILE true",
            Box::new(|| timed(Command::new("flock").args([lockfile, "true"]), "")),
        ),
        (
            "e  /bin/true",
            Box::new(|| timed(&mut Command::new("/bin/true"), "")),
        ),
        // Not asked for, but needed to read b: how much of a PING is just
        // redis-cli starting up (here it loads 17 shared libraries, rlock 3).
        (
            "f  redis-cli --version (no connection)",
            Box::new(|| timed(Command::new("redis-cli").arg("--version"), "redis-cli")),
        ),
    ];
    if let Ok(e) = etcd {
        cases.push((
            "g  etcdctl lock k true",
            Box::new(move || timed(e.ctl().args(["lock", "k", "true"]), "")),
        ));
        // The same for g: etcdctl is a Go binary; this is its start-up.
        cases.push((
            "h  etcdctl version (no connection)",
            Box::new(move || timed(e.ctl().arg("version"), "etcdctl version")),
        ));
    }
    let mut samples = vec![Vec::with_capacity(N); cases.len()];
    for round in 0..WARMUP + N {
        for (i, (_, run)) in cases.iter_mut().enumerate() {
            let d = run();
            if round >= WARMUP {
                samples[i].push(d);
            }
        }
    }

    section(&format!(
        "1. Uncontended cycle, one process per command (N={N} each, round-robin)"
    ));
    println!("   {:<40} {:>9} {:>9}", "command", "median", "p99");
    for ((name, _), s) in cases.iter().zip(&samples) {
        println!("   {:<40} {:>9.2} {:>9.2}", name, ms(median(s)), ms(p99(s)));
    }
    let m = |i: usize| ms(median(&samples[i]));
    println!(
        "   ratios: exec/flock {:.2}x   exec/PING {:.2}x   pair/PING {:.2}x",
        m(2) / m(3),
        m(2) / m(1),
        m(0) / m(1)
    );
    match etcd {
        Ok(_) => println!(
            "   etcdctl: lock/exec {:.2}x   lock/flock {:.2}x   lock/version {:.2}x",
            m(6) / m(2),
            m(6) / m(3),
            m(6) / m(7)
        ),
        Err(why) => println!("   etcd: {why}, skipped"),
    }
}

/// `rlock acquire` then `rlock release` with the printed token: the wall
/// time of both processes, as a shell script would see it.
fn acquire_release_pair(r: &Redis, key: &str) -> Duration {
    let t = Instant::now();
    let out = run_ok(rlock(r).args(["acquire", key]));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    run_ok(rlock(r).args(["release", key, "--token", &token]));
    t.elapsed()
}

// ---------------------------------------------------------------- 2

/// What idle waiters cost the server: a waiter blocks in BLPOP and only
/// re-checks every HEARTBEAT, so this should be about one request per second
/// each; anything much above that scales badly with many waiters.
fn idle_waiters(r: &Redis) {
    const WAITERS: usize = 10;
    const SETTLE: Duration = Duration::from_secs(1);
    const WINDOW: Duration = Duration::from_secs(10);
    let key = "idle";
    // Held through the CLI, so no holder process or connection adds traffic.
    let held = run_ok(rlock(r).args(["acquire", key, "--ttl", "60s"]));
    let token = String::from_utf8_lossy(&held.stdout).trim().to_string();
    let mut waiters: Vec<Child> = (0..WAITERS)
        .map(|_| {
            rlock(r)
                .args(["acquire", key])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn rlock acquire")
        })
        .collect();
    let mut obs = locker(r);
    let mut conn = r.conn();
    let all_waiting = wait_until(Duration::from_secs(10), || {
        waiters_of(&mut obs, key) == WAITERS as u64 && blocked_clients(&mut conn) == WAITERS as u64
    });
    thread::sleep(SETTLE);

    let before = info(&mut conn, &["stats", "commandstats"]);
    let t = Instant::now();
    thread::sleep(WINDOW);
    let after = info(&mut conn, &["stats", "commandstats"]);
    let secs = t.elapsed().as_secs_f64();

    let d = |k: &str| after.get(k).unwrap_or(&0.0) - before.get(k).unwrap_or(&0.0);
    // Our own INFO is counted too (the first one, in the window).
    let own = d("cmdstat_info");
    let server_cmds = d("total_commands_processed") - own;
    // Requests that only ever come from a client, never from inside a
    // script: the round trips the waiters make.
    let client_cmds: f64 = ["cmdstat_evalsha", "cmdstat_eval", "cmdstat_blpop"]
        .iter()
        .map(|k| d(k))
        .sum();
    let per = |n: f64| n / secs / WAITERS as f64;

    let mut breakdown: Vec<(String, f64)> = after
        .keys()
        .filter(|k| k.starts_with("cmdstat_") && *k != "cmdstat_info")
        .map(|k| (k["cmdstat_".len()..].to_string(), d(k)))
        .filter(|(_, n)| *n > 0.0)
        .collect();
    breakdown.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));

    // Cleanup: SIGTERM makes a waiting acquire leave the queue itself.
    for w in &waiters {
        signal(w.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let codes: Vec<String> = waiters
        .iter_mut()
        .map(|w| match wait_deadline(w, deadline) {
            Some(st) => st.code().map_or_else(|| format!("{st}"), |c| c.to_string()),
            None => {
                let _ = w.kill();
                let _ = w.wait();
                "still running (killed)".into()
            }
        })
        .collect();
    run_ok(rlock(r).args(["release", key, "--token", &token]));
    let left = leftovers(r);

    section(&format!(
        "2. Idle waiters: {WAITERS} x `rlock acquire {key}` on a held lock, {:.0} s window",
        WINDOW.as_secs_f64()
    ));
    if !all_waiting {
        println!("   WARNING: not all {WAITERS} waiters were queued and blocked before measuring");
    }
    println!(
        "   server commands/s per idle waiter (total_commands_processed, incl. inside Lua) {:>8.2}",
        per(server_cmds)
    );
    println!(
        "   client requests/s per idle waiter (EVALSHA+EVAL+BLPOP)                       {:>8.2}",
        per(client_cmds)
    );
    println!(
        "   in {secs:.2} s: {server_cmds:.0} server commands, {client_cmds:.0} client requests ({own:.0} own INFO excluded)"
    );
    let shown: Vec<String> = breakdown
        .iter()
        .map(|(k, n)| format!("{k} {n:.0}"))
        .collect();
    println!("   by command: {}", shown.join(", "));
    let (_, usec) = script_usec(&before, &after);
    println!("   server time per heartbeat acquire script: {usec:.1} us");
    println!(
        "   cleanup: waiters got SIGTERM, exit codes [{}]; left in Redis: {}",
        dedup_counts(&codes),
        describe(&left)
    );
}

// ---------------------------------------------------------------- 3

/// Time from a holder's release call to the moment a blocked waiter's
/// acquire returns, in-process, next to a bare PING round trip.
fn handoff_latency(r: &Redis) {
    const N: usize = 200;
    let key = "handoff";
    let ttl = Duration::from_secs(30);
    let mut holder = locker(r);
    let mut obs = locker(r);
    let mut conn = r.conn();

    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (got_tx, got_rx) = mpsc::channel::<Instant>();
    let mut waiter = locker(r);
    thread::spawn(move || {
        for () in go_rx {
            let lease = waiter
                .acquire(key, &request(ttl), None, &mut |_| {})
                .expect("waiter acquire");
            let granted = Instant::now();
            waiter.release(key, &lease.token).expect("waiter release");
            if got_tx.send(granted).is_err() {
                break;
            }
        }
    });

    let mut lat = Vec::with_capacity(N);
    let mut early = 0;
    let mut trouble = None;
    for i in 0..N {
        let lease = holder
            .acquire(key, &request(ttl), None, &mut |_| {})
            .expect("holder acquire");
        go_tx.send(()).expect("waiter thread alive");
        // Queued is not enough: it must be parked in BLPOP, or we would
        // time a poll instead of a wake-up.
        if !wait_until(Duration::from_secs(5), || {
            waiters_of(&mut obs, key) == 1 && blocked_clients(&mut conn) == 1
        }) {
            trouble = Some(format!("round {i}: waiter not blocked within 5 s"));
        }
        let released = Instant::now();
        holder.release(key, &lease.token).expect("holder release");
        match got_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(granted) if granted >= released => lat.push(granted - released),
            Ok(_) => early += 1,
            Err(_) => {
                trouble = Some(format!("round {i}: waiter not granted within 10 s"));
                break;
            }
        }
        if trouble.is_some() {
            break;
        }
    }
    drop(go_tx);

    let ping = sample(1000, || {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query(&mut conn).expect("PING");
        t.elapsed()
    });
    let mut free_acquire = Vec::with_capacity(N);
    let stats_before = info(&mut conn, &["commandstats"]);
    let free_release = sample(N, || {
        let t = Instant::now();
        let lease = holder
            .acquire("free", &request(ttl), None, &mut |_| {})
            .expect("acquire");
        free_acquire.push(t.elapsed());
        let t = Instant::now();
        holder.release("free", &lease.token).expect("release");
        t.elapsed()
    });
    let (_, usec) = script_usec(&stats_before, &info(&mut conn, &["commandstats"]));

    section(&format!(
        "3. Release-to-next-holder latency, library, one blocked waiter (N={N})"
    ));
    if let Some(t) = &trouble {
        println!("   WARNING: stopped early: {t}");
    }
    if early > 0 {
        println!("   WARNING: {early} grants came before the release (waiter was not waiting)");
    }
    println!("   {:<40} {:>9} {:>9}", "what", "median", "p99");
    let row = |name: &str, s: &[Duration]| {
        println!("   {:<40} {:>9.2} {:>9.2}", name, ms(median(s)), ms(p99(s)))
    };
    row(
        &format!("release -> waiter granted (n={})", lat.len()),
        &lat,
    );
    row("PING round trip, redis crate (n=1000)", &ping);
    row("acquire of a free lock, library", &free_acquire);
    row("release, library", &free_release);
    println!("   server time per acquire/release script on a free lock: {usec:.1} us");
    println!(
        "   handoff/PING {:.1}x   handoff/(acquire+release) {:.2}x",
        ms(median(&lat)) / ms(median(&ping)),
        ms(median(&lat)) / (ms(median(&free_acquire)) + ms(median(&free_release)))
    );
}

// ---------------------------------------------------------------- 4

/// 200 queued waiters, each with its own connection, drained one by one:
/// FIFO order, total drain time, and what it costs Redis in CPU.
fn crowd(r: &Redis) {
    const N: usize = 200;
    const HOLD: Duration = Duration::from_millis(1);
    let key = "big";
    let ttl = Duration::from_secs(60);
    let mut holder = locker(r);
    let mut obs = locker(r);
    let mut conn = r.conn();
    let lease = holder
        .acquire(key, &request(ttl), None, &mut |_| {})
        .expect("holder acquire");

    let order = Arc::new(Mutex::new(Vec::with_capacity(N)));
    let (tx, rx) = mpsc::channel::<Result<Instant, String>>();
    let queueing = Instant::now();
    let mut started = 0;
    let mut trouble = None;
    for i in 0..N {
        let (tx, order, url) = (tx.clone(), order.clone(), r.url());
        thread::spawn(move || {
            let res = (|| {
                let mut l = Locker::connect(&options(url), PREFIX)?;
                let lease = l.acquire(key, &request(ttl), None, &mut |_| {})?;
                let granted = Instant::now();
                order.lock().unwrap_or_else(|e| e.into_inner()).push(i);
                thread::sleep(HOLD);
                l.release(key, &lease.token)?;
                Ok::<_, rlock::Error>(granted)
            })();
            let _ = tx.send(res.map_err(|e| format!("waiter {i}: {e}")));
        });
        started += 1;
        // One at a time, so that the arrival order is known to be i.
        if !wait_until(Duration::from_secs(5), || {
            waiters_of(&mut obs, key) == i as u64 + 1
        }) {
            trouble = Some(format!("waiter {i} not queued within 5 s"));
            break;
        }
    }
    drop(tx);
    let queue_time = queueing.elapsed();

    let cpu_before = redis_cpu(&mut conn);
    let stats_before = info(&mut conn, &["commandstats"]);
    let released = Instant::now();
    holder.release(key, &lease.token).expect("holder release");
    let deadline = released + Duration::from_secs(60);
    let mut grants = Vec::with_capacity(started);
    let mut errors = Vec::new();
    for _ in 0..started {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Ok(at)) => grants.push(at),
            Ok(Err(e)) => errors.push(e),
            Err(_) => {
                trouble = Some(format!(
                    "only {} of {started} waiters finished within 60 s",
                    grants.len() + errors.len()
                ));
                break;
            }
        }
    }
    let done = released.elapsed();
    let cpu = redis_cpu(&mut conn) - cpu_before;
    let (calls, usec) = script_usec(&stats_before, &info(&mut conn, &["commandstats"]));
    let drain = grants
        .iter()
        .max()
        .map_or(Duration::ZERO, |last| *last - released);

    let order = order.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut served = order.clone();
    served.sort_unstable();
    served.dedup();
    let out_of_order = order.iter().enumerate().filter(|(j, i)| j != *i).count();
    let left = leftovers(r);

    section(&format!(
        "4. {N} concurrent waiters on one lock, library, hold ~{} ms each",
        HOLD.as_millis()
    ));
    if let Some(t) = &trouble {
        println!("   WARNING: {t}");
    }
    for e in errors.iter().take(5) {
        println!("   ERROR: {e}");
    }
    println!(
        "   queued {started} waiters one by one in {:.2} s",
        queue_time.as_secs_f64()
    );
    println!(
        "   grants {} (distinct waiters {}, expected {N}); out of arrival order: {out_of_order}",
        order.len(),
        served.len()
    );
    println!(
        "   first release -> last grant {:>9.2} ms   ({:.2} ms per handoff incl. {} ms hold)",
        ms(drain),
        ms(drain) / order.len().max(1) as f64,
        HOLD.as_millis()
    );
    println!(
        "   Redis CPU until all released {:.3} CPU-s over {:.2} s wall = {:.0}% of one core",
        cpu,
        done.as_secs_f64(),
        100.0 * cpu / done.as_secs_f64()
    );
    println!("   lock script calls during the drain {calls:.0}, {usec:.1} us of server time each");
    println!("   left in Redis: {}", describe(&left));
}

// ---------------------------------------------------------------- 5

/// 10 shell loops fighting over one lock, each critical section ~4 ms:
/// rlock exec against flock (and `etcdctl lock`, with etcd), with the same
/// exclusion check in all.
fn contended(r: &Redis, etcd: Result<&Etcd, &str>) {
    const WORKERS: usize = 10;
    const ITERS: usize = 50;
    let dir = r.dir.join("contended");
    std::fs::create_dir_all(&dir).expect("create work dir");
    // mkdir is atomic: if the marker exists, someone else is inside.
    let cs = dir.join("cs.sh");
    std::fs::write(
        &cs,
        "if mkdir \"$1\" 2>/dev/null; then sleep 0.004; rmdir \"$1\"; \
         else echo overlap >> \"$2\"; sleep 0.004; fi\n\
         echo . >> \"$3\"\n",
    )
    .expect("write cs.sh");

    let mut tools = vec!["rlock", "flock"];
    if etcd.is_ok() {
        tools.push("etcdctl");
    }
    let mut results = Vec::new();
    for tool in tools {
        let marker = dir.join(format!("{tool}-inside"));
        let overlaps = dir.join(format!("{tool}-overlaps"));
        let done = dir.join(format!("{tool}-done"));
        let failures = dir.join(format!("{tool}-failures"));
        let mut cmd: Vec<String> = match (tool, etcd) {
            ("rlock", _) => vec![RLOCK.into(), "exec".into(), "c".into(), "--".into()],
            ("etcdctl", Ok(e)) => {
                let mut ctl = vec!["etcdctl".into(), e.endpoints_arg()];
                ctl.extend(["lock", "c", "--"].map(String::from));
                ctl
            }
            _ => vec!["flock".into(), path(&dir.join("flock.lock"))],
        };
        cmd.extend(["sh".into(), path(&cs), path(&marker)]);
        cmd.extend([path(&overlaps), path(&done)]);
        let (wall, finished) = run_workers(r, WORKERS, ITERS, &cmd, &failures);
        results.push((
            tool,
            wall,
            finished,
            lines(&overlaps),
            lines(&done),
            lines(&failures),
        ));
    }
    let left = leftovers(r);

    section(&format!(
        "5. Contended: {WORKERS} shell loops x {ITERS} critical sections of `sleep 0.004` on one lock"
    ));
    println!(
        "   {:<8} {:>10} {:>10} {:>10} {:>10}",
        "tool", "wall ms", "sections", "overlaps", "failures"
    );
    for (tool, wall, finished, overlaps, done, failures) in &results {
        println!(
            "   {:<8} {:>10.2} {:>10} {:>10} {:>10}{}",
            tool,
            ms(*wall),
            done,
            overlaps,
            failures,
            if *finished { "" } else { "  (TIMED OUT)" }
        );
    }
    let etcd_ratio = match results.get(2) {
        Some(e) => format!("etcdctl/rlock {:.2}x   ", ms(e.1) / ms(results[0].1)),
        None => String::new(),
    };
    println!(
        "   rlock/flock {:.2}x   {etcd_ratio}(floor: {} x 4 ms = {:.0} ms of sleeping)",
        ms(results[0].1) / ms(results[1].1),
        WORKERS * ITERS,
        (WORKERS * ITERS * 4) as f64
    );
    println!("   exclusion check: mkdir of a marker inside the section, same for all tools");
    println!("   left in Redis: {}", describe(&left));
    match etcd {
        Ok(e) => println!("   left in etcd: {}", e.describe_keys()),
        Err(why) => println!("   etcd: {why}, skipped"),
    }
}

/// Start `workers` shell loops, each running `cmd` `iters` times, and wait
/// for all. Returns the wall time and whether all finished in time.
fn run_workers(
    r: &Redis,
    workers: usize,
    iters: usize,
    cmd: &[String],
    failures: &Path,
) -> (Duration, bool) {
    let script = format!(
        "i=0; while [ $i -lt {iters} ]; do \"$@\" || echo \"exit $?\" >> {}; i=$((i+1)); done",
        sh_quote(&path(failures))
    );
    let t = Instant::now();
    let mut children: Vec<Child> = (0..workers)
        .map(|_| {
            use std::os::unix::process::CommandExt;
            let mut c = Command::new("sh");
            c.arg("-c").arg(&script).arg("sh").args(cmd);
            clean_env(&mut c);
            c.env("RLOCK_URL", r.url())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                // Its own group, so a timeout can kill the whole loop.
                .process_group(0)
                .spawn()
                .expect("spawn sh")
        })
        .collect();
    let deadline = t + Duration::from_secs(120);
    let mut finished = true;
    for c in &mut children {
        if wait_deadline(c, deadline).is_none() {
            finished = false;
            signal(-(c.id() as i32), libc::SIGKILL);
            let _ = c.wait();
        }
    }
    (t.elapsed(), finished)
}

// ---------------------------------------------------------------- 6

/// Lock+unlock cycles per second on one key through the library, from one
/// and from eight threads (each with its own `Locker`), next to what
/// `redis-benchmark` gets from the same server for a trivial EVAL.
fn throughput(r: &Redis) {
    const WINDOW: Duration = Duration::from_secs(3);
    const CLIENTS: usize = 8;
    const REQUESTS: usize = 100_000;
    let runs: Vec<Cycles> = [1, CLIENTS]
        .iter()
        .map(|&threads| lib_cycles(r, "tput", threads, WINDOW))
        .collect();
    let eval = redis_benchmark_eval(r, CLIENTS, REQUESTS);
    let left = leftovers(r);

    section(&format!(
        "6. Library throughput: acquire (Wait::Forever) + release on one key, {:.0} s per row",
        WINDOW.as_secs_f64()
    ));
    println!(
        "   {:<8} {:>9} {:>14} {:>8} {:>12} {:>10} {:>9}",
        "threads", "cycles/s", "script calls/s", "vs EVAL", "requests/cyc", "redis CPU", "overlaps"
    );
    let eval_rate = eval.as_ref().ok().copied();
    for c in &runs {
        let rate = c.cycles as f64 / c.secs;
        let vs_eval = eval_rate.map_or("-".into(), |e| format!("{:.1}%", 100.0 * 2.0 * rate / e));
        println!(
            "   {:<8} {:>9.0} {:>14.0} {:>8} {:>12.2} {:>9.0}% {:>9}",
            c.threads,
            rate,
            2.0 * rate,
            vs_eval,
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
    println!("   redis-benchmark's EVAL ops/s (for cycles, halve it); requests/cyc = what the");
    println!("   server got per cycle (EVALSHA+EVAL+BLPOP); redis CPU in % of one core");
    println!("   left in Redis: {}", describe(&left));
}

struct Cycles {
    threads: usize,
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
/// releasing `key` until `window` is over; then each finishes the cycle it
/// is in. An atomic flag set inside the critical section checks exclusion.
fn lib_cycles(r: &Redis, key: &'static str, threads: usize, window: Duration) -> Cycles {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let ttl = Duration::from_secs(30);
    let stop = Arc::new(AtomicBool::new(false));
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let mut l = locker(r);
            let (stop, inside) = (stop.clone(), inside.clone());
            let (overlaps, start) = (overlaps.clone(), start.clone());
            thread::spawn(move || {
                let mut n = 0u64;
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let lease = l.acquire(key, &request(ttl), None, &mut |_| {})?;
                    if inside.swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::Relaxed);
                    }
                    inside.store(false, Ordering::SeqCst);
                    l.release(key, &lease.token)?;
                    n += 1;
                }
                Ok::<_, rlock::Error>(n)
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

// ---------------------------------------------------------------- 7

/// Set in the environment of this bench binary run as the peak-RSS helper.
const RSS_HELPER: &str = "RLOCK_BENCH_RSS_HELPER";

/// Peak resident set size of one run, in KB. Linux keeps a process's peak
/// across execve, and a child spawned by this bench starts out sharing the
/// bench's memory (vfork), so ru_maxrss of any child of ours is at least
/// the bench's own peak: every command would read about the same 9 MB. So
/// a fresh copy of this binary, still small, forks and runs each command
/// (see [`rss_helper_main`]) and reports what wait4(2) measured.
fn peak_rss(r: &Redis, etcd: Result<&Etcd, &str>) {
    const N: usize = 10;
    let lockfile = path(&r.dir.join("flock-rss.lock"));
    let url = r.url();
    let mut cases: Vec<(&str, Vec<String>)> = vec![
        (
            "rlock exec k -- true",
            vec![RLOCK, "exec", "k", "--", "true"],
        ),
        ("flock FILE true", vec!["flock", &lockfile, "true"]),
        ("/bin/true", vec!["/bin/true"]),
    ]
    .into_iter()
    .map(|(name, argv)| (name, argv.into_iter().map(String::from).collect()))
    .collect();
    if let Ok(e) = etcd {
        let mut argv = vec!["etcdctl".into(), e.endpoints_arg()];
        argv.extend(["lock", "k", "true"].map(String::from));
        cases.push(("etcdctl lock k true", argv));
    }
    let kb: Vec<Vec<u64>> = cases
        .iter()
        .map(|(_, argv)| {
            (0..N)
                .map(|_| {
                    let exe = std::env::current_exe().expect("path of this bench binary");
                    let mut c = Command::new(exe);
                    clean_env(&mut c);
                    c.env(RSS_HELPER, "1").env("RLOCK_URL", &url).args(argv);
                    let out = run_ok(c.stdin(Stdio::null()));
                    let text = String::from_utf8_lossy(&out.stdout);
                    text.trim().parse().expect("helper prints a number")
                })
                .collect()
        })
        .collect();

    section(&format!(
        "7. Peak RSS of one run in KB (ru_maxrss, incl. children it waited for; N={N})"
    ));
    println!("   {:<40} {:>9} {:>9}", "command", "median", "max");
    let med = |v: &[u64]| sorted_u64(v)[v.len() / 2];
    for ((name, _), v) in cases.iter().zip(&kb) {
        let max = v.iter().max().copied().unwrap_or(0);
        println!("   {:<40} {:>9} {:>9}", name, med(v), max);
    }
    let ratio = |i: usize, j: usize| med(&kb[i]) as f64 / med(&kb[j]) as f64;
    match etcd {
        Ok(_) => println!(
            "   ratios: exec/flock {:.2}x   etcdctl/exec {:.2}x",
            ratio(0, 1),
            ratio(3, 0)
        ),
        Err(why) => {
            println!("   ratios: exec/flock {:.2}x", ratio(0, 1));
            println!("   etcd: {why}, skipped");
        }
    }
    println!("   measured by a fresh copy of this bench: fork, exec, wait4, as /usr/bin/time %M");
    println!("   rlock's guard and the command are rlock's waited-for descendants: included");
}

/// The helper side of [`peak_rss`]: run argv once, print its ru_maxrss in
/// KB, and exit 0 if it succeeded. A real fork(2), not std's vfork-style
/// spawn: the child then starts with a new memory map holding only the
/// helper's few private pages, instead of sharing (and inheriting the peak
/// of) the helper's whole map until it execs. The helper is single-threaded.
fn rss_helper_main() -> ! {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let args: Vec<CString> = std::env::args_os()
        .skip(1)
        .map(|a| CString::new(a.as_bytes()).expect("no NUL in arguments"))
        .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // SAFETY: single-threaded, nothing else reads the environment now.
    unsafe { std::env::remove_var(RSS_HELPER) };
    // SAFETY: a NUL-terminated literal.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
    assert!(null >= 0, "open /dev/null");
    // SAFETY: the helper is single-threaded, so the child may call
    // anything; it only uses memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above; argv is NULL-terminated, its strings live.
        unsafe {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            libc::execvp(argv[0], argv.as_ptr());
            libc::_exit(127);
        }
    }
    assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
    let mut status = 0;
    // SAFETY: rusage is plain old data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pointers to live locals of the right types.
    while unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        let err = std::io::Error::last_os_error();
        assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "wait4: {err}");
    }
    println!("{}", usage.ru_maxrss); // KB on Linux
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    std::process::exit(if ok { 0 } else { 1 });
}

// ---------------------------------------------------------------- 8

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
fn deployments() {
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

    let mut req = Request::new(Duration::from_secs(30));
    req.wait = Wait::No;
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
fn start_cluster(n: usize) -> Result<Vec<Redis>, String> {
    let nodes: Vec<Redis> = (0..n).map(|_| start_redis(&CLUSTER_NODE)).collect();
    create_cluster(&nodes.iter().collect::<Vec<_>>())?;
    Ok(nodes)
}

/// Keep the first few errors: enough to explain a row, never a flood.
fn note(errors: &mut Vec<String>, e: String) {
    if errors.len() < 3 {
        errors.push(e);
    }
}

// ---------------------------------------------------------------- etcd

/// An etcd child process, single member, on two free loopback ports (client
/// and peer); killed and its data dir removed on drop.
struct Etcd {
    child: Child,
    port: u16,
    dir: PathBuf,
    version: String,
}

impl Etcd {
    /// Err says why there is none: not installed, or failed to start.
    fn start() -> Result<Etcd, String> {
        if !on_path("etcd") || !on_path("etcdctl") {
            return Err("not installed".into());
        }
        let mut why = String::new();
        for attempt in 0..5 {
            match Etcd::try_start(attempt) {
                Ok(e) => return Ok(e),
                Err(e) => why = e,
            }
        }
        Err(format!("failed to start after 5 tries ({why})"))
    }

    fn try_start(attempt: u32) -> Result<Etcd, String> {
        // Both listeners open at once, so that the two ports differ.
        let bind = || TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let (a, b) = (bind(), bind());
        let port_of = |l: TcpListener| l.local_addr().expect("local address").port();
        let (port, peer) = (port_of(a), port_of(b));
        let dir = std::env::temp_dir().join(format!(
            "rlock-bench-etcd-{}-{attempt}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        let log = std::fs::File::create(dir.join("etcd.log")).expect("create etcd.log");
        let client_url = format!("http://127.0.0.1:{port}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new("etcd");
        clean_env(&mut cmd);
        cmd.args(["--name", "default", "--data-dir", &path(&dir.join("data"))])
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("default={peer_url}")])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .args(["--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = cmd.spawn().map_err(|e| format!("spawn etcd: {e}"))?;
        let mut e = Etcd {
            child,
            port,
            dir,
            version: String::new(),
        };
        watch(&e.child, &e.dir);
        let healthy = wait_until(Duration::from_secs(10), || {
            matches!(e.child.try_wait(), Ok(None))
                && e.ctl()
                    .args(["--dial-timeout=1s", "--command-timeout=2s"])
                    .args(["endpoint", "health"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
        });
        if !healthy {
            let log = std::fs::read_to_string(e.dir.join("etcd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(3).collect();
            return Err(format!("not healthy within 10 s; log ends {tail:?}"));
        }
        let out = Command::new("etcd").arg("--version").output();
        e.version = out
            .ok()
            .and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                let v = text.lines().next()?.strip_prefix("etcd Version:")?.trim();
                Some(v.to_string())
            })
            .unwrap_or_else(|| "?".into());
        Ok(e)
    }

    fn endpoints_arg(&self) -> String {
        format!("--endpoints=http://127.0.0.1:{}", self.port)
    }

    /// etcdctl pointed at our etcd, API v3, none of the caller's ETCD*.
    fn ctl(&self) -> Command {
        let mut c = Command::new("etcdctl");
        clean_env(&mut c);
        c.arg(self.endpoints_arg()).stdin(Stdio::null());
        c
    }

    /// All keys in etcd: `etcdctl lock` leaves none once it has exited.
    fn describe_keys(&self) -> String {
        let out = run_ok(self.ctl().args(["get", "", "--prefix", "--keys-only"]));
        let keys: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        if keys.is_empty() {
            "nothing".into()
        } else {
            format!("{keys:?}")
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        unwatch(&self.child);
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------- redis

#[path = "../tests/support/redis_server.rs"]
mod redis_server;
use redis_server::{CLUSTER_NODE, Redis, create_cluster};

/// A redis-server (the shared test fixture) that the watchdog knows about.
fn start_redis(extra: &[&str]) -> Redis {
    let r = Redis::start_with(extra);
    watch(&r.child, &r.dir);
    r
}

/// One INFO reply as field -> number; a commandstats line becomes
/// `cmdstat_<name>` -> calls and `usec_<name>` -> microseconds spent. One
/// INFO call for all sections, so that the cost of observing is exactly one
/// INFO per snapshot.
fn info(conn: &mut redis::Connection, sections: &[&str]) -> HashMap<String, f64> {
    let mut cmd = redis::cmd("INFO");
    for s in sections {
        cmd.arg(*s);
    }
    let text: String = cmd.query(conn).expect("INFO");
    let mut out = HashMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        if let Some(name) = k.strip_prefix("cmdstat_") {
            for (field, prefix) in [("calls=", "cmdstat_"), ("usec=", "usec_")] {
                let n = v.split(',').find_map(|f| f.strip_prefix(field));
                if let Some(n) = n.and_then(|n| n.parse::<f64>().ok()) {
                    out.insert(format!("{prefix}{name}"), n);
                }
            }
        } else if let Ok(n) = v.parse::<f64>() {
            out.insert(k.to_string(), n);
        }
    }
    out
}

/// Server-side microseconds per lock script call between two snapshots:
/// what one acquire/release/status costs Redis's single thread.
fn script_usec(before: &HashMap<String, f64>, after: &HashMap<String, f64>) -> (f64, f64) {
    let d = |k: &str| after.get(k).unwrap_or(&0.0) - before.get(k).unwrap_or(&0.0);
    let calls = d("cmdstat_evalsha") + d("cmdstat_eval");
    let usec = d("usec_evalsha") + d("usec_eval");
    (calls, if calls > 0.0 { usec / calls } else { 0.0 })
}

fn blocked_clients(conn: &mut redis::Connection) -> u64 {
    info(conn, &["clients"])
        .get("blocked_clients")
        .map_or(0, |n| *n as u64)
}

/// CPU seconds the server has used, system plus user, all threads.
fn redis_cpu(conn: &mut redis::Connection) -> f64 {
    let i = info(conn, &["cpu"]);
    i.get("used_cpu_sys").unwrap_or(&0.0) + i.get("used_cpu_user").unwrap_or(&0.0)
}

fn redis_version(r: &Redis) -> String {
    let text: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut r.conn())
        .expect("INFO server");
    text.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string()
}

/// Keys left in Redis, but the fencing counters, which never expire by
/// design.
/// Lock state left in Redis: not the fencing counters, nor the release
/// tombstones (`:r:<request>`, which expire by themselves within 10 s).
fn leftovers(r: &Redis) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut r.conn())
        .expect("KEYS");
    keys.retain(|k| !k.ends_with(":fence") && !k.contains("}:r:"));
    keys.sort();
    keys
}

fn describe(keys: &[String]) -> String {
    if keys.is_empty() {
        "nothing (but fencing counters)".into()
    } else {
        format!("{keys:?}")
    }
}

// ---------------------------------------------------------------- rlock

fn options(url: String) -> ConnectOptions {
    ConnectOptions {
        urls: vec![url],
        ..Default::default()
    }
}

fn locker(r: &Redis) -> Locker {
    Locker::connect(&options(r.url()), PREFIX).expect("connect locker")
}

fn request(ttl: Duration) -> Request {
    let mut req = Request::new(ttl);
    req.wait = Wait::Forever;
    req
}

/// Waiters queued on `key` right now (0 on error: the caller polls anyway).
fn waiters_of(l: &mut Locker, key: &str) -> u64 {
    l.status(key).map_or(0, |s| s.waiters)
}

/// The bench's own `rlock`, pointed at our server, with none of the
/// caller's RLOCK_* settings (a stray RLOCK_HELD would mean re-entry).
fn rlock(r: &Redis) -> Command {
    let mut c = Command::new(RLOCK);
    clean_env(&mut c);
    c.env("RLOCK_URL", r.url()).stdin(Stdio::null());
    c
}

/// None of the caller's RLOCK_*, ETCD_* or ETCDCTL_* settings (etcd and
/// etcdctl read their flags from the environment too), and etcdctl speaks
/// API v3 (the default only since 3.4).
fn clean_env(c: &mut Command) {
    for (k, _) in std::env::vars_os() {
        let s = k.to_string_lossy();
        if ["RLOCK_", "ETCD_", "ETCDCTL_"]
            .iter()
            .any(|p| s.starts_with(p))
        {
            c.env_remove(k);
        }
    }
    c.env("ETCDCTL_API", "3");
}

// ---------------------------------------------------------------- processes

/// Run to completion; panics unless it exits 0 (a failing command would
/// make its timing meaningless).
fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    if !out.status.success() {
        panic!(
            "{cmd:?} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Wall time of one successful run whose stdout contains `want`.
fn timed(cmd: &mut Command, want: &str) -> Duration {
    let t = Instant::now();
    let out = run_ok(cmd);
    let d = t.elapsed();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(want),
        "{cmd:?} printed {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    d
}

fn wait_deadline(c: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Ok(Some(st)) = c.try_wait() {
            return Some(st);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// kill(2); a negative pid means a process group.
fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Servers started (Redis, etcd), for the watchdog: pid and directory.
/// Each adds itself when it starts; etcd leaves when it is dropped.
static SERVERS: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());

fn watch(server: &Child, dir: &Path) {
    let mut s = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    s.push((server.id(), dir.to_path_buf()));
}

fn unwatch(server: &Child) {
    let mut s = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    s.retain(|(pid, _)| *pid != server.id());
}

/// Kill the servers (Redis, etcd) and exit if the run takes far too long:
/// with the servers gone, every client still running errors out and exits.
fn watchdog(limit: Duration) {
    thread::spawn(move || {
        thread::sleep(limit);
        eprintln!("bench: still running after {limit:?}; giving up");
        let servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
        for (pid, dir) in servers.iter() {
            // Redis servers leave no note when dropped: kill a pid only while
            // it is still a child of ours, never one reused meanwhile.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat.rsplit(") ").next().and_then(|r| r.split(' ').nth(1));
            if ppid == Some(&std::process::id().to_string()) {
                signal(*pid as i32, libc::SIGKILL);
            }
            let _ = std::fs::remove_dir_all(dir);
        }
        std::process::exit(2);
    });
}

/// An executable file called `name` in some directory of PATH.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

fn path(p: &Path) -> String {
    p.to_str().expect("temp path is UTF-8").to_string()
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Lines in a file; 0 if it does not exist.
fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |s| s.lines().count())
}

/// Poll `f` every millisecond until it holds or `limit` passes.
fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() >= limit {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    true
}

// ---------------------------------------------------------------- stats

fn sample(n: usize, mut f: impl FnMut() -> Duration) -> Vec<Duration> {
    (0..n).map(|_| f()).collect()
}

fn sorted_u64(s: &[u64]) -> Vec<u64> {
    let mut v = s.to_vec();
    v.sort_unstable();
    v
}

fn sorted(s: &[Duration]) -> Vec<Duration> {
    let mut v = s.to_vec();
    v.sort_unstable();
    v
}

fn median(s: &[Duration]) -> Duration {
    let v = sorted(s);
    match v.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

/// Nearest-rank 99th percentile.
fn p99(s: &[Duration]) -> Duration {
    let v = sorted(s);
    if v.is_empty() {
        return Duration::ZERO;
    }
    v[(v.len() * 99).div_ceil(100) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `["143", "143", "x"]` as `143 x2, x`.
fn dedup_counts(items: &[String]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for i in items {
        match counts.iter_mut().find(|(k, _)| k == i) {
            Some((_, n)) => *n += 1,
            None => counts.push((i, 1)),
        }
    }
    counts
        .iter()
        .map(|(k, n)| {
            if *n > 1 {
                format!("{k} x{n}")
            } else {
                k.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn section(title: &str) {
    println!();
    println!("{title}");
}
