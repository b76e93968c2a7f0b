//! Section 2: what idle `rlock acquire` waiters cost the server.

use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::Bench;
use crate::client::*;
use crate::process::*;
use crate::server::*;
use crate::stats::*;
use crate::support::signal;

/// What idle waiters cost the server: a waiter blocks in BLPOP and only
/// re-checks every HEARTBEAT, so this should be about one request per second
/// each; anything much above that scales badly with many waiters.
pub(crate) fn run(b: &Bench) {
    let r = &b.redis;
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
