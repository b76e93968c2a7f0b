//! `cargo bench --bench cli` (`make bench`): what the `rlock` CLI and
//! library cost next to `flock`, `redis-cli PING` and `/bin/true` on the
//! same machine, and what they cost the Redis server.
//!
//! Prints plain-text tables and asserts nothing about timings: numbers on a
//! shared machine are for reading, not for failing a build. Correctness is
//! still checked where it is cheap (exclusion, FIFO order, leftovers),
//! because a fast but wrong lock is no benchmark.
//!
//! Starts its own throwaway redis-server on a free loopback port, and uses
//! the `rlock` binary Cargo built for this bench (bench profile). Section 1
//! also compiles `floor/floor.rs` (std only) with rustc into the same
//! directory: the floor of a Redis lock around a command, with and without
//! a dead-man guard. If `etcd`
//! and `etcdctl` are on PATH (`make bench` installs Debian's etcd-server and
//! etcd-client), it starts a throwaway single-node etcd the same way and
//! adds `etcdctl lock` rows; without them those rows are skipped. Sections
//! 8 to 17 start redis-servers of their own (sections 8 and 17: a 3-master
//! Redis Cluster; section 8 also two RedLock sets of 3 and 5 independent
//! masters). Section 18 runs its loops and their killer in a pid
//! namespace of its own (`unshare -fp --mount-proc`, root; skipped
//! without).
//!
//! Layout: this file picks and runs the sections; `server.rs` (Redis INFO,
//! leftovers), `etcd.rs`, `client.rs` (the library and the `rlock` binary
//! pointed at a server), `process.rs` and `stats.rs` (medians, tables) are
//! what the sections share; one file per section. The servers and the
//! watchdog come from `rlock_test_support::bench` (tests/support), as for
//! the market bench.

// A test or bench binary: its `pub` items only share helpers between its
// own modules (tests/support is a crate of its own), so the lint has nothing
// to say here.
#![allow(unreachable_pub)]

use std::thread;
use std::time::{Duration, Instant};

use rlock_test_support::bench as support;

mod client;
mod etcd;
mod process;
mod server;
mod stats;

mod chaos;
mod contended;
mod cost;
mod crowd;
mod cycle;
mod dead;
mod deployments;
mod expiry;
mod fairlock;
mod handoff;
mod idle;
mod index;
mod profile;
mod rss;
mod safety;
mod scale;
mod throughput;
mod top;
mod waiters;

use etcd::Etcd;
use support::{Redis, redis_version, start_redis, watchdog};

pub(crate) const RLOCK: &str = env!("CARGO_BIN_EXE_rlock");
pub(crate) const PREFIX: &str = "rlock:";
/// Past this (and section 18's window and drain) the whole run is
/// killed, so a wedged lock cannot hang CI.
const WATCHDOG: Duration = Duration::from_secs(420);

/// What every section gets: the shared redis-server, and etcd or why not.
pub(crate) struct Bench {
    pub(crate) redis: Redis,
    pub(crate) etcd: Result<Etcd, String>,
}

impl Bench {
    pub(crate) fn etcd(&self) -> Result<&Etcd, &str> {
        self.etcd.as_ref().map_err(String::as_str)
    }
}

/// One section: it prints its own table.
type Section = fn(&Bench);

/// The sections in order; `RLOCK_BENCH_SECTIONS=3,9` runs only those.
const SECTIONS: [(&str, Section); 18] = [
    ("1", cycle::run),
    ("2", idle::run),
    ("3", handoff::run),
    ("4", crowd::run),
    ("5", contended::run),
    ("6", throughput::run),
    ("7", rss::run),
    ("8", deployments::run),
    ("9", safety::run),
    ("10", cost::run),
    ("11", waiters::run),
    ("12", expiry::run),
    ("13", index::run),
    ("14", top::run),
    ("15", profile::run),
    ("16", dead::run),
    ("17", scale::run),
    ("18", chaos::run),
];

/// Issue 32's table as this run measured it: the sections that measure a
/// row (1, 5, 10, 18) add it here, and the run ends by printing them
/// together, so that the four goals are read from one run.
static GOALS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Add a row to the end-of-run summary of issue 32's goals.
pub fn goal(row: String) {
    GOALS.lock().unwrap_or_else(|e| e.into_inner()).push(row);
}

/// Take out of LD_LIBRARY_PATH what cargo put in front of it; says how
/// many entries that was.
///
/// cargo runs a bench with its build's directories and the toolchain's
/// library directories first in LD_LIBRARY_PATH. Every dynamically linked
/// program the bench starts would then look for each of its libraries in
/// each of them first (glibc tries some twenty subdirectories in each:
/// about 100 failed opens for flock's libc alone): flock, redis-cli,
/// /bin/true and the command under rlock pay that, rlock and the floor
/// program (linked statically, no loader) do not. Against flock that
/// favoured rlock: section 1 measured exec/flock 1.31x under cargo's path
/// and 1.52x without it on the same machine and build (BENCHMARKS.md,
/// session 14). So the programs timed get the caller's path.
fn drop_cargo_library_path() -> usize {
    let Some(path) = std::env::var_os("LD_LIBRARY_PATH") else {
        return 0;
    };
    // The build's target directory: the bench is <target>[/<host>]/
    // <profile>/deps/cli-<hash>; and the toolchain that cargo is from.
    let exe = std::env::current_exe().unwrap_or_default();
    let target = exe.ancestors().nth(3).map(std::path::Path::to_path_buf);
    let toolchain = std::env::var_os("CARGO")
        .map(std::path::PathBuf::from)
        .and_then(|c| c.ancestors().nth(2).map(std::path::Path::to_path_buf));
    let cargos = |p: &std::path::Path| {
        target.as_deref().is_some_and(|t| p.starts_with(t))
            || toolchain.as_deref().is_some_and(|t| p.starts_with(t))
    };
    let all: Vec<_> = std::env::split_paths(&path).collect();
    let kept: Vec<_> = all.iter().filter(|p| !cargos(p)).collect();
    let dropped = all.len() - kept.len();
    // SAFETY: first thing in main, before any thread is started.
    unsafe {
        if kept.is_empty() {
            std::env::remove_var("LD_LIBRARY_PATH");
        } else if dropped > 0 {
            let kept = std::env::join_paths(kept).expect("the entries were split from one path");
            std::env::set_var("LD_LIBRARY_PATH", kept);
        }
    }
    dropped
}

fn main() {
    if std::env::var_os(rss::RSS_HELPER).is_some() {
        rss::rss_helper_main();
    }
    let cargo_paths = drop_cargo_library_path();
    let started = Instant::now();
    let bench = Bench {
        redis: start_redis(&[]),
        etcd: Etcd::start(),
    };
    watchdog("bench", WATCHDOG + chaos::budget());
    let r = &bench.redis;
    println!("rlock CLI benchmark");
    println!(
        "  redis-server {} on 127.0.0.1:{}, {} CPUs, binary {RLOCK} ({})",
        redis_version(r),
        r.port,
        thread::available_parallelism().map_or(0, |n| n.get()),
        // `make bench` builds as `make build` does (scripts/cargo-release.sh).
        if cfg!(target_feature = "crt-static") {
            "C library linked in"
        } else {
            "C library linked dynamically"
        }
    );
    match &bench.etcd {
        Ok(e) => println!(
            "  etcd {} on 127.0.0.1:{} (single node, WAL fsynced on disk; redis persists nothing)",
            e.version, e.port
        ),
        Err(why) => println!("  etcd: {why}, skipped"),
    }
    println!(
        "  LD_LIBRARY_PATH as the caller had it ({cargo_paths} entries cargo put in front taken out)"
    );
    println!("  all times in ms; median over N runs unless said otherwise");

    let only = std::env::var("RLOCK_BENCH_SECTIONS").ok();
    for (n, run) in SECTIONS {
        if only
            .as_deref()
            .is_none_or(|o| o.split(',').any(|s| s.trim() == n))
        {
            run(&bench);
        }
    }

    let goals = GOALS.lock().unwrap_or_else(|e| e.into_inner());
    if !goals.is_empty() {
        stats::section("Issue 32's goals in this run");
        for row in goals.iter() {
            println!("   {row}");
        }
    }
    println!();
    println!("total bench time {:.1} s", started.elapsed().as_secs_f64());
}
