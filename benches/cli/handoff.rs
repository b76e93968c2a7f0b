//! Section 3: release-to-next-holder latency through the library.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::Bench;
use crate::client::*;
use crate::process::*;
use crate::server::*;
use crate::stats::*;

/// Time from a holder's release call to the moment a blocked waiter's
/// acquire returns, in-process, next to a bare PING round trip.
pub(crate) fn run(b: &Bench) {
    let r = &b.redis;
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
