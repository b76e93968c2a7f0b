//! Section 16: what a waiter that died while queued costs the live waiter
//! behind it once the lock is free (issue 21).

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::Bench;
use crate::client::*;
use crate::process::*;
use crate::server::*;
use crate::stats::*;
use crate::support::signal;

/// A held lock, a queued `rlock exec` waiter SIGKILLed, a live `rlock exec
/// K -- true` queued behind it; the holder releases: how long until the
/// live waiter has had its turn (its process exits: grant, `true`,
/// release). Claims (docs/internals.md, "Dead and stalled waiters:
/// claims") keep the dead waiter from holding its place until its waiter
/// lease lapses.
pub(crate) fn run(b: &Bench) {
    let r = &b.redis;
    const ROUNDS: usize = 5;
    let key = "dead-waiter";
    let mut obs = locker(r);
    let mut conn = r.conn();
    let mut skip = Vec::with_capacity(ROUNDS);
    let mut trouble = Vec::new();
    let spawn = |args: &[&str]| -> Child {
        rlock(r)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn rlock")
    };
    for round in 0..ROUNDS {
        let held = run_ok(rlock(r).args(["acquire", key, "--ttl", "60s"]));
        let token = String::from_utf8_lossy(&held.stdout).trim().to_string();
        let mut dead = spawn(&["exec", key, "--", "true"]);
        if !wait_until(Duration::from_secs(10), || waiters_of(&mut obs, key) == 1) {
            trouble.push(format!("round {round}: first waiter not queued"));
        }
        let mut live = spawn(&["exec", key, "--", "true"]);
        if !wait_until(Duration::from_secs(10), || {
            waiters_of(&mut obs, key) == 2 && blocked_clients(&mut conn) == 2
        }) {
            trouble.push(format!("round {round}: waiters not both blocked"));
        }
        signal(dead.id() as i32, libc::SIGKILL);
        let _ = dead.wait();
        let released = Instant::now();
        run_ok(rlock(r).args(["release", key, "--token", &token]));
        match wait_deadline(&mut live, Instant::now() + Duration::from_secs(30)) {
            Some(st) if st.success() => skip.push(released.elapsed()),
            Some(st) => trouble.push(format!("round {round}: live waiter exited {st}")),
            None => {
                let _ = live.kill();
                let _ = live.wait();
                trouble.push(format!("round {round}: live waiter not done within 30 s"));
            }
        }
    }
    let left = leftovers(r);
    section(&format!(
        "16. Dead waiter: a queued `rlock exec` SIGKILLed, a live one behind it, the lock released ({ROUNDS} rounds)"
    ));
    if !skip.is_empty() {
        let each: Vec<String> = skip.iter().map(|d| format!("{:.0}", ms(*d))).collect();
        println!(
            "   release to the live waiter's exit (dead waiter skipped)  median {:>8.1}  max {:>8.1}  [{}]",
            ms(median(&skip)),
            ms(*sorted(&skip).last().expect("not empty")),
            each.join(", ")
        );
    }
    for t in &trouble {
        println!("   WARNING: {t}");
    }
    println!("   left in Redis: {}", describe(&left));
}
