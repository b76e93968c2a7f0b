//! Section 4: 200 queued waiters on one lock, drained one by one.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rlock::Locker;

use crate::client::*;
use crate::process::*;
use crate::server::*;
use crate::stats::*;
use crate::{Bench, PREFIX};

/// 200 queued waiters, each with its own connection, drained one by one:
/// FIFO order, total drain time, and what it costs Redis in CPU.
pub(crate) fn run(b: &Bench) {
    let r = &b.redis;
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
