//! Section 1: one uncontended lock cycle, one process per command, next
//! to flock, redis-cli PING, /bin/true (and etcdctl lock).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::Bench;
use crate::client::*;
use crate::process::*;
use crate::stats::*;
use crate::support::Redis;

/// A named thing to time; it returns the wall time of one run.
type Case<'a> = (&'static str, Box<dyn FnMut() -> Duration + 'a>);

/// Each process-spawning variant N times, interleaved round-robin so that
/// machine noise (other jobs, frequency scaling) hits all of them alike.
/// With etcd, `etcdctl lock` (about 25 ms a run here) joins the same rounds.
pub(crate) fn run(b: &Bench) {
    let (r, etcd) = (&b.redis, b.etcd());
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
    crate::goal(format!(
        "exec k -- true over flock FILE true (section 1, medians): {:.2}x   goal at most 1.3x",
        m(2) / m(3)
    ));
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
