//! Section 1: one uncontended lock cycle, one process per command, next
//! to flock, redis-cli PING, /bin/true (and etcdctl lock), and the floor
//! program (floor/floor.rs) with and without a dead-man guard: what any
//! Redis lock around a command pays, and what one with rlock's safety net
//! pays at least.

use std::path::PathBuf;
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
    let addr = format!("127.0.0.1:{port}");
    let floor_bin = match build_floor() {
        Ok(bin) => Some(bin),
        Err(why) => {
            println!("   floor program: {why}; its rows are skipped");
            None
        }
    };
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
    if let Some(bin) = &floor_bin {
        // Beside flock in the table, in the same rounds as the rest.
        let at = cases
            .iter()
            .position(|(n, _)| n.starts_with("d "))
            .expect("d")
            + 1;
        cases.insert(
            at,
            (
                "d1 floor (SET NX PX, true, EVAL del)",
                Box::new(|| floor(bin, "plain", &addr)),
            ),
        );
        cases.insert(
            at + 1,
            (
                "d2 floor-guard (floor + dead-man guard)",
                Box::new(|| floor(bin, "guard", &addr)),
            ),
        );
    }
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
    // The median of the case whose label starts with `tag` ("c", "d1"..).
    let m = |tag: &str| {
        let i = cases
            .iter()
            .position(|(name, _)| name.split(' ').next() == Some(tag))
            .expect("a case of that tag");
        ms(median(&samples[i]))
    };
    println!(
        "   ratios: exec/flock {:.2}x   exec/PING {:.2}x   pair/PING {:.2}x",
        m("c") / m("d"),
        m("c") / m("b"),
        m("a") / m("b")
    );
    let floors = floor_bin.is_some().then(|| {
        println!(
            "   floors: floor/flock {:.2}x   floor-guard/flock {:.2}x   exec/floor-guard {:.2}x",
            m("d1") / m("d"),
            m("d2") / m("d"),
            m("c") / m("d2")
        );
        format!(
            "; floor-guard {:.2}x, floor {:.2}x (floor/floor.rs)",
            m("d2") / m("d"),
            m("d1") / m("d")
        )
    });
    crate::goal(format!(
        "exec k -- true over flock FILE true (section 1, medians): {:.2}x   goal at most 1.3x{}",
        m("c") / m("d"),
        floors.unwrap_or_default()
    ));
    match etcd {
        Ok(_) => println!(
            "   etcdctl: lock/exec {:.2}x   lock/flock {:.2}x   lock/version {:.2}x",
            m("g") / m("c"),
            m("g") / m("d"),
            m("g") / m("h")
        ),
        Err(why) => println!("   etcd: {why}, skipped"),
    }
}

/// One run of the floor program on key `floor-cycle` (its own, without
/// rlock's prefix; it deletes it at the end).
fn floor(bin: &std::path::Path, mode: &str, addr: &str) -> Duration {
    timed(
        Command::new(bin).args([mode, addr, "floor-cycle", "true"]),
        "",
    )
}

/// Compile floor/floor.rs beside the rlock binary with the rustc that
/// Cargo runs and what rlock's release profile and build.rs give rlock
/// (LTO, one codegen unit, panic=abort, stripped, the unwinder linked
/// statically so that libgcc_s is not loaded), so that the two differ in
/// what they do, not in how they were built. Rebuilt only when the source
/// is newer.
fn build_floor() -> Result<PathBuf, String> {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/cli/floor/floor.rs");
    let bin = std::path::Path::new(crate::RLOCK).with_file_name("rlock-bench-floor");
    let mtime = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if mtime(&bin).is_some() && mtime(&bin) >= mtime(src.as_ref()) {
        return Ok(bin);
    }
    // Cargo names its rustc in RUSTC for build scripts only; beside
    // `cargo` (rustup's proxies, or a toolchain's bin/) is the usual place.
    let rustc = std::env::var_os("RUSTC")
        .map(PathBuf::from)
        .or_else(|| {
            let cargo = PathBuf::from(std::env::var_os("CARGO")?).with_file_name("rustc");
            cargo.exists().then_some(cargo)
        })
        .unwrap_or_else(|| "rustc".into());
    let mut cmd = Command::new(&rustc);
    cmd.args(["--edition", "2024", "-C", "opt-level=3", "-C", "lto"])
        .args([
            "-C",
            "codegen-units=1",
            "-C",
            "panic=abort",
            "-C",
            "strip=symbols",
        ]);
    // Linked as rlock is: `make bench` (scripts/cargo-release.sh) builds
    // rlock and this bench with the C library linked in on Linux/glibc.
    if cfg!(target_feature = "crt-static") {
        cmd.args(["-C", "target-feature=+crt-static"]);
    }
    let eh = Command::new("cc")
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.is_absolute() && p.exists());
    if let Some(dir) = eh.as_ref().and_then(|p| p.parent()) {
        cmd.arg("-L").arg(dir).args(["-l", "static=gcc_eh"]);
    }
    let out = cmd
        .arg("-o")
        .arg(&bin)
        .arg(src)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", rustc.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            rustc.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(bin)
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
