//! Section 10: what one lock cycle costs the Redis server, side by side
//! with the naive lock (`SET k tok NX PX` + a compare-and-delete script),
//! same server, same run. Server time is the commandstats usec of the
//! commands clients sent (a script's own time includes the commands it
//! runs; those are also listed under their names, and not added twice);
//! server commands count everything Redis executed, inside scripts too.

use super::*;

const CYCLES: usize = 500;
const EXEC_CYCLES: usize = 100;

/// Server time (usec) and commands per cycle of `cycle`, run `n` times.
fn measure(r: &Redis, n: usize, top: &[&str], mut cycle: impl FnMut(usize)) -> (f64, f64) {
    let mut conn = r.conn();
    let before = info(&mut conn, &["stats", "commandstats"]);
    for i in 0..n {
        cycle(i);
    }
    let after = info(&mut conn, &["stats", "commandstats"]);
    let d = |k: &str| after.get(k).unwrap_or(&0.0) - before.get(k).unwrap_or(&0.0);
    let usec: f64 = top.iter().map(|c| d(&format!("usec_{c}"))).sum();
    // Our own INFO calls are counted too.
    let cmds = d("total_commands_processed") - d("cmdstat_info");
    (usec / n as f64, cmds / n as f64)
}

pub(crate) fn redis_cost() {
    let r = start_redis(&[]);
    let mut conn = r.conn();
    let cad = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(cad)
        .query(&mut conn)
        .expect("SCRIPT LOAD");
    let naive = measure(&r, CYCLES, &["set", "evalsha"], |i| {
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
    let mut req = request(Duration::from_secs(30));
    req.wait = Wait::No;
    let lib = measure(&r, CYCLES, &["evalsha", "eval"], |_| {
        let lease = l.acquire("cost", &req, None, &mut |_| {}).expect("acquire");
        l.release("cost", &lease.token).expect("release");
    });
    let cli = measure(&r, EXEC_CYCLES, &["evalsha", "eval"], |i| {
        run_ok(rlock(&r).args(["exec", &format!("c{i}"), "--", "true"]));
    });
    section(&format!(
        "10. Redis cost per lock cycle (server time from commandstats; {CYCLES} cycles, exec {EXEC_CYCLES})"
    ));
    println!(
        "   {:<44} {:>10} {:>10} {:>8}",
        "cycle", "usec", "commands", "ratio"
    );
    for (name, (usec, cmds)) in [
        ("naive SET NX PX + compare-and-delete EVALSHA", naive),
        ("rlock library acquire + release", lib),
        ("rlock exec cK -- true (CLI)", cli),
    ] {
        println!(
            "   {name:<44} {usec:>10.1} {cmds:>10.1} {:>7.2}x",
            usec / naive.0
        );
    }
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
