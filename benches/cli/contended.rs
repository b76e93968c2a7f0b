//! Section 5: shell loops fighting over one lock: rlock exec, flock and
//! etcdctl lock, with the same exclusion check.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::*;
use crate::process::*;
use crate::server::*;
use crate::stats::*;
use crate::support::{Redis, signal};
use crate::{Bench, RLOCK};

/// 10 shell loops fighting over one lock, each critical section ~4 ms:
/// rlock exec against flock (and `etcdctl lock`, with etcd), with the same
/// exclusion check in all.
pub(crate) fn run(b: &Bench) {
    let (r, etcd) = (&b.redis, b.etcd());
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
