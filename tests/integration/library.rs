//! The library API against a real Redis.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rlock::clock::BootTime;
use rlock::{Error, Released, Request, Wait};

use crate::util::*;

fn req(ttl_ms: u64) -> Request {
    Request::new(Duration::from_millis(ttl_ms))
}

/// `threads` threads, each with its own connection, take `key` (with
/// `limit` slots) `rounds` times each and hold it for `hold`; returns the
/// most holders ever inside at once, by the threads' own count.
fn peak_holders(
    r: &Redis,
    key: &'static str,
    limit: u32,
    threads: usize,
    rounds: usize,
    hold: Duration,
) -> usize {
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (inside, peak, url) = (inside.clone(), peak.clone(), r.url());
            std::thread::spawn(move || {
                let mut l = locker(&url);
                let mut req = req(5000);
                req.limit = limit;
                for _ in 0..rounds {
                    let lease = l.acquire(key, &req, None, &mut |_| {}).unwrap();
                    let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(hold);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    assert_eq!(l.release(key, &lease.token).unwrap(), Released::Released);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    peak.load(Ordering::SeqCst)
}

#[test]
fn threads_hammering_one_key_never_overlap() {
    let r = Redis::start();
    assert_eq!(peak_holders(&r, "hot", 1, 10, 50, Duration::ZERO), 1);
    assert_eq!(locker(&r.url()).status("hot").unwrap().fence, 500);
    r.assert_nothing_held(&[]);
}

#[test]
fn reentry_counts_and_releases_at_zero() {
    let r = Redis::start();
    let mut l = locker(&r.url());
    let first = l.acquire("re", &req(5000), None, &mut |_| {}).unwrap();
    assert_eq!(first.count, 1);
    let mut again = req(5000);
    again.reenter = Some(first.token.clone());
    again.wait = Wait::No;
    let second = l.acquire("re", &again, None, &mut |_| {}).unwrap();
    assert_eq!((second.count, second.fence), (2, first.fence));
    assert_eq!(
        l.release("re", &first.token).unwrap(),
        Released::StillHeld(1)
    );
    assert!(l.status("re").unwrap().held);
    assert_eq!(l.release("re", &first.token).unwrap(), Released::Released);
    assert_eq!(l.release("re", &first.token).unwrap(), Released::NotHeld);
}

#[test]
fn semaphore_admits_exactly_limit_and_refuses_a_different_limit() {
    let r = Redis::start();
    let mut l = locker(&r.url());
    let mut three = req(5000);
    three.limit = 3;
    three.wait = Wait::No;
    let leases: Vec<_> = (0..3)
        .map(|_| l.acquire("sem", &three, None, &mut |_| {}).unwrap())
        .collect();
    let fences: Vec<u64> = leases.iter().map(|l| l.fence).collect();
    assert_eq!(fences, [1, 2, 3]);
    assert!(matches!(
        l.acquire("sem", &three, None, &mut |_| {}),
        Err(Error::Busy { .. })
    ));
    let mut two = three.clone();
    two.limit = 2;
    let err = l.acquire("sem", &two, None, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("--limit 3, not 2"), "{err}");
    let st = l.status("sem").unwrap();
    assert_eq!((st.limit, st.holders.len()), (3, 3));
    l.release("sem", &leases[1].token).unwrap();
    l.acquire("sem", &three, None, &mut |_| {}).unwrap();
}

#[test]
fn validity_deadline_is_inside_the_ttl() {
    let r = Redis::start();
    let mut l = locker(&r.url());
    let before = BootTime::now();
    let lease = l.acquire("v", &req(1000), None, &mut |_| {}).unwrap();
    assert!(lease.valid_until > before);
    let after = BootTime::now();
    assert!(
        lease.valid_until <= after + Duration::from_millis(1000) - rlock::lock::drift(lease.ttl)
    );
}

#[test]
fn a_killed_waiter_in_the_middle_of_the_queue_does_not_stall_the_rest() {
    // Holder, then waiters A (alive), B (killed), C (alive). When A is done,
    // B's turn comes but B is dead: C must get the lock once B's waiter
    // lease runs out, not later.
    let r = Redis::start();
    let mut l = locker(&r.url());
    let holder = l.acquire("d", &req(60_000), None, &mut |_| {}).unwrap();
    let queue = |n: u64| {
        let child = rlock(&r).args(["acquire", "d"]).spawn();
        eventually(Duration::from_secs(5), "the waiter to queue", || {
            locker(&r.url()).status("d").unwrap().waiters == n
        });
        child
    };
    let a = queue(1);
    let mut b = queue(2);
    let c = queue(3);
    b.kill().unwrap();
    b.wait().unwrap();
    l.release("d", &holder.token).unwrap();
    let a_token = finish(a, "waiter A").ok().token();
    let a_token = rlock::Token::parse(&a_token).unwrap();
    let started = std::time::Instant::now();
    l.release("d", &a_token).unwrap();
    finish(c, "waiter C").ok().token();
    let waited = started.elapsed();
    let bound = rlock::lock::WAITER_LEASE + rlock::lock::HEARTBEAT + Duration::from_millis(500);
    assert!(
        waited <= bound,
        "C waited {waited:?} behind a dead waiter (bound {bound:?})"
    );
    eprintln!("waiter behind a dead one got the lock after {waited:?}");
}

#[test]
fn semaphore_peak_concurrency_is_exactly_the_limit() {
    let r = Redis::start();
    assert_eq!(
        peak_holders(&r, "sem", 3, 8, 20, Duration::from_millis(2)),
        3
    );
    r.assert_nothing_held(&[]);
}

#[test]
fn a_dead_waiter_at_the_head_is_skipped() {
    // A waiter that queued and then vanished (no heartbeat) must not stall
    // the ones behind it for longer than the waiter lease.
    let r = Redis::start();
    let mut l = locker(&r.url());
    let holder = l.acquire("d", &req(60_000), None, &mut |_| {}).unwrap();
    let mut dead = rlock(&r).args(["acquire", "d"]).spawn();
    eventually(Duration::from_secs(5), "the first waiter to queue", || {
        locker(&r.url()).status("d").unwrap().waiters == 1
    });
    dead.kill().unwrap();
    dead.wait().unwrap();
    l.release("d", &holder.token).unwrap();
    let started = std::time::Instant::now();
    let mut l2 = locker(&r.url());
    let mut w = req(5000);
    w.wait = Wait::For(Duration::from_secs(15));
    l2.acquire("d", &w, None, &mut |_| {}).unwrap();
    let waited = started.elapsed();
    assert!(
        waited <= rlock::lock::WAITER_LEASE + rlock::lock::HEARTBEAT + Duration::from_millis(500),
        "waited {waited:?}"
    );
}
