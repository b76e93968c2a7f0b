//! The lock algorithm (lua/) under interleavings that mix its features.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rlock::{Error, Mode, Release, Request, Wait};

use crate::util::*;

/// Every hold of the token at once (what the outermost holder does).
fn all() -> Release {
    Release::default().all_holds(true)
}

/// A small xorshift, seeded per thread: no dependency, reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Threads take one read-write lock as readers, writers and plain
/// exclusive holders (a write lock), with re-entries, min-holds, waits
/// that give up, and --supersede: never a writer beside anyone, and every
/// exclusive grant's fence above the last one seen.
#[test]
fn mixed_readers_writers_never_overlap() {
    let r = Redis::shared();
    // >0: readers inside; -1: a writer inside.
    let inside = Arc::new(AtomicI64::new(0));
    let last_fence = Arc::new(Mutex::new(0u64));
    let errors = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (inside, last_fence, errors) = (inside.clone(), last_fence.clone(), errors.clone());
            let (url, prefix) = (r.url(), r.prefix.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e3779b97f4a7c15 ^ ((i as u64 + 1) * 7919));
                let mut l = locker_with(&url, &prefix);
                for _ in 0..60 {
                    let mode = match rng.below(3) {
                        0 => Mode::Read,
                        1 => Mode::Write,
                        _ => Mode::Exclusive,
                    };
                    let min_hold = if rng.below(4) == 0 {
                        Duration::from_millis(rng.below(20))
                    } else {
                        Duration::ZERO
                    };
                    let wait = match rng.below(5) {
                        0 => Wait::For(Duration::from_millis(rng.below(30))),
                        1 => Wait::No,
                        _ => Wait::Forever,
                    };
                    let supersede = matches!(wait, Wait::Forever) && rng.below(4) == 0;
                    let req = Request::builder(Duration::from_secs(20))
                        .mode(mode)
                        .min_hold(min_hold)
                        .wait(wait)
                        .supersede(supersede)
                        .build()
                        .unwrap();
                    let lease = match l.acquire("mix", &req, None, &mut |_| {}) {
                        Ok(lease) => lease,
                        Err(
                            Error::Timeout { .. } | Error::Busy { .. } | Error::Superseded { .. },
                        ) => continue,
                        Err(e) => panic!("acquire: {e}"),
                    };
                    let write = req.mode() != Mode::Read;
                    if write {
                        let was = inside.swap(-1, Ordering::SeqCst);
                        assert_eq!(was, 0, "a writer beside {was}");
                        let mut f = last_fence.lock().unwrap();
                        assert!(lease.fence > *f, "fence {} after {}", lease.fence, *f);
                        *f = lease.fence;
                    } else {
                        let was = inside.fetch_add(1, Ordering::SeqCst);
                        assert!(was >= 0, "a reader beside a writer");
                    }
                    if rng.below(3) == 0 {
                        // Re-enter as the same mode, then release that hold.
                        let nested = reentry(&req, &lease.token);
                        let n = l.acquire("mix", &nested, None, &mut |_| {}).unwrap();
                        assert_eq!(n.token, lease.token);
                        l.release("mix", &n.token).unwrap();
                    }
                    std::thread::sleep(Duration::from_millis(rng.below(3)));
                    if write {
                        assert_eq!(inside.swap(0, Ordering::SeqCst), -1);
                    } else {
                        assert!(inside.fetch_sub(1, Ordering::SeqCst) > 0);
                    }
                    let res = if rng.below(5) == 0 {
                        l.release_with("mix", &lease.token, &all())
                    } else {
                        l.release("mix", &lease.token)
                    };
                    if res.is_err() {
                        errors.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(errors.load(Ordering::SeqCst), 0);
    std::thread::sleep(Duration::from_millis(100));
    r.assert_nothing_held(&[]);
}

/// A semaphore whose holders sometimes vanish without releasing (their
/// short leases run out, to be pruned by whoever comes next), renew,
/// check, re-enter, release with a min-hold or give up waiting: never more
/// holders inside than the limit.
#[test]
fn semaphore_with_vanishing_holders_never_overfills() {
    let r = Redis::shared();
    let inside = Arc::new(AtomicI64::new(0));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let inside = inside.clone();
            let (url, prefix) = (r.url(), r.prefix.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x2545f4914f6cdd1d ^ ((i as u64 + 1) * 104729));
                let mut l = locker_with(&url, &prefix);
                for _ in 0..40 {
                    let min_hold = if rng.below(4) == 0 {
                        Duration::from_millis(rng.below(50))
                    } else {
                        Duration::ZERO
                    };
                    let wait = match rng.below(5) {
                        0 => Wait::For(Duration::from_millis(rng.below(100))),
                        _ => Wait::Forever,
                    };
                    let supersede = matches!(wait, Wait::Forever) && rng.below(5) == 0;
                    let req = Request::builder(Duration::from_millis(300))
                        .limit(3)
                        .min_hold(min_hold)
                        .wait(wait)
                        .supersede(supersede)
                        .build()
                        .unwrap();
                    let lease = match l.acquire("sem", &req, None, &mut |_| {}) {
                        Ok(lease) => lease,
                        Err(
                            Error::Timeout { .. } | Error::Busy { .. } | Error::Superseded { .. },
                        ) => {
                            continue;
                        }
                        Err(e) => panic!("acquire: {e}"),
                    };
                    let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(n <= 3, "{n} holders of a semaphore of 3");
                    match rng.below(4) {
                        0 => {
                            l.renew("sem", &lease.token, Duration::from_millis(300))
                                .unwrap();
                        }
                        1 => {
                            l.check("sem", &lease.token).unwrap();
                        }
                        2 => {
                            let nested = reentry(&req, &lease.token);
                            l.acquire("sem", &nested, None, &mut |_| {}).unwrap();
                            l.release("sem", &lease.token).unwrap();
                        }
                        _ => {}
                    }
                    std::thread::sleep(Duration::from_millis(rng.below(5)));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    if rng.below(6) != 0 {
                        l.release("sem", &lease.token).unwrap();
                    } // else: vanish, the lease runs out
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(400));
    // The next call prunes what ran out; then nothing may be left.
    let _ = r.locker().status("sem");
    eventually(
        Duration::from_secs(15),
        "the semaphore's state expires",
        || {
            r.keys().iter().all(|k| {
                k.ends_with(":fence")
                    || k.contains("}:r:")
                    || k.contains("}:w:")
                    || k.ends_with("}:log")
                    || k.ends_with("}:n")
                    || is_index_key(k)
                    || is_known_key(k)
            })
        },
    );
    r.assert_nothing_held(&[]);
}

/// A fresh grant whose reply was lost, and whose resends found no server
/// for a while, is handed back to the next attempt of the same token (see
/// "Resends" in lua/acquire.lua). Its lease began at the first send, not
/// at that attempt's: the client must not count its validity from the
/// later one, or it relies on the lock after the server let it go.
#[test]
fn a_grant_recovered_after_an_outage_is_not_trusted_past_its_lease() {
    let r = Redis::start();
    let proxy = Proxy::start(r.port);
    let mut l = locker_with(&format!("redis://127.0.0.1:{}", proxy.port), &r.prefix);
    // The server has answered (a later failure is an outage to ride out),
    // and has the acquire script (the call that is cut runs it).
    let warm = l
        .acquire(
            "warm",
            &Request::new(Duration::from_secs(1)).unwrap(),
            None,
            &mut |_| {},
        )
        .unwrap();
    l.release("warm", &warm.token).unwrap();
    // The resend window is 5 s: refuse a little longer, so that the grant
    // comes back only to the next attempt, with 8 s - 5.5 s of its lease left.
    *proxy.lose_next.lock().unwrap() = Some(Duration::from_millis(5500));
    let lease = l
        .acquire(
            "lost",
            &Request::new(Duration::from_secs(8)).unwrap(),
            None,
            &mut |_| {},
        )
        .unwrap();
    let client_left = lease.valid_until.remaining();
    let server_left = match r.locker().check("lost", &lease.token) {
        Ok(held) => held.ttl,
        Err(_) => Duration::ZERO,
    };
    assert!(
        server_left >= client_left,
        "the client relies on the lease for {client_left:?}, the server keeps it {server_left:?}"
    );
    l.release("lost", &lease.token).unwrap();
}

/// The fence key lasts for its grant's TTL; a holder that renews outlives
/// it. `status` must still show the lock's last fence, not 0.
#[test]
fn status_shows_the_fence_of_a_holder_that_outlived_its_fence_key() {
    let r = Redis::shared();
    let mut l = r.locker();
    let lease = l
        .acquire(
            "renewed",
            &Request::new(Duration::from_millis(200)).unwrap(),
            None,
            &mut |_| {},
        )
        .unwrap();
    l.renew("renewed", &lease.token, Duration::from_secs(30))
        .unwrap();
    let fence_key = format!("{}:fence", r.key("renewed"));
    eventually(Duration::from_secs(5), "the fence key expires", || {
        r.cmd::<i64>(&["EXISTS", &fence_key]) == 0
    });
    let st = l.status("renewed").unwrap();
    assert!(st.held, "{st:?}");
    assert_eq!(st.fence, lease.fence, "{st:?}");
    l.release("renewed", &lease.token).unwrap();
}

/// A released hold parked until its min-hold ends is held by nobody: a
/// second release, asking for a longer min-hold, must not move that end
/// (as a renewal may not).
#[test]
fn a_second_release_does_not_extend_a_parked_hold() {
    let r = Redis::shared();
    let mut l = r.locker();
    let lease = l
        .acquire(
            "parked",
            &Request::new(Duration::from_secs(30)).unwrap(),
            None,
            &mut |_| {},
        )
        .unwrap();
    let short = Some(Duration::from_secs(2));
    let long = Some(Duration::from_secs(3600));
    let parked = |min_hold| Release::holds(false, min_hold).unwrap();
    l.release_with("parked", &lease.token, &parked(short))
        .unwrap();
    l.release_with("parked", &lease.token, &parked(long))
        .unwrap();
    let st = l.status("parked").unwrap();
    assert_eq!(st.holders.len(), 1, "{st:?}");
    assert!(st.holders[0].ttl_ms <= 2000, "{st:?}");
    assert_eq!(st.holders[0].count, 0, "{st:?}");
    // Given back at once (no min-hold honoured): gone.
    let at_once = Release::at_once().all_holds(true);
    l.release_with("parked", &lease.token, &at_once).unwrap();
    r.assert_nothing_held(&[]);
}

/// A read re-entry into an exclusive lock with a waiter turns the lock into
/// a read-write lock and its waiters into waiting writers (P{K}:qw). That
/// key must expire with the rest of the state: left without an expiry, a
/// waiter that then dies stays a waiting writer for ever, and every reader
/// of that lock name queues behind it.
#[test]
fn a_read_reentry_that_converts_the_lock_leaves_no_key_without_expiry() {
    let r = Redis::shared();
    let mut l = r.locker();
    let outer = l
        .acquire(
            "conv",
            &Request::new(Duration::from_secs(60)).unwrap(),
            None,
            &mut |_| {},
        )
        .unwrap();
    let mut waiter = rlock(&r).args(["acquire", "conv", "--ttl", "60s"]).spawn();
    r.await_waiters("conv", 1);
    // Nested `rlock exec -s conv` under the holder, with a shorter TTL:
    // nothing to extend.
    let nested = Request::builder(Duration::from_secs(1))
        .mode(Mode::Read)
        .wait(Wait::No)
        .reenter(Some(outer.token.clone()))
        .build()
        .unwrap();
    let inner = l.acquire("conv", &nested, None, &mut |_| {}).unwrap();
    assert_eq!(inner.count, 2);
    let writers = format!("{}:qw", r.key("conv"));
    let ttl: i64 = r.cmd(&["PTTL", &writers]);
    waiter.kill().unwrap();
    waiter.wait().unwrap();
    assert!(ttl > 0, "{writers} has PTTL {ttl}");
    l.release_with("conv", &outer.token, &all()).unwrap();
}

/// --supersede: "newest wins". A waiter whose grant came back too late
/// (a slow server) gives it back and asks again with a new token; that is
/// still its old call, not a newer one, so it must not supersede a waiter
/// that queued after it.
#[test]
fn a_late_grant_retried_does_not_supersede_a_newer_waiter() {
    let r = Redis::start();
    let proxy = Proxy::start(r.port);
    let url = format!("redis://127.0.0.1:{}", proxy.port);
    // A semaphore of 2, one slot held for the whole test.
    let sem = Request::builder(Duration::from_secs(60))
        .limit(2)
        .build()
        .unwrap();
    let mut l = r.locker();
    let _keep = l.acquire("sup", &sem, None, &mut |_| {}).unwrap();
    // The old waiter, through the proxy, its scripts loaded.
    let mut old_l = locker_with(&url, &r.prefix);
    let warm = old_l.acquire(
        "warm",
        &Request::new(Duration::from_secs(1)).unwrap(),
        None,
        &mut |_| {},
    );
    old_l.release("warm", &warm.unwrap().token).unwrap();
    // Its grant of the free slot comes back 4 s late, past its 2 s lease;
    // meanwhile a plain waiter, then a newer --supersede waiter queue for
    // the slot. Both must queue while the old grant's lease lasts (once it
    // runs out, the plain waiter takes the slot): 200 ms was too short for
    // two process starts on a loaded 2-core machine. The old client waits
    // up to 10 s for a reply, so the late one is read, not resent.
    old_l.set_timeout(Duration::from_secs(10));
    *proxy.delay_next.lock().unwrap() = Some(Duration::from_secs(4));
    let old = std::thread::spawn(move || {
        let req = Request::builder(Duration::from_secs(2))
            .limit(2)
            .supersede(true)
            .wait(Wait::For(Duration::from_secs(15)))
            .build()
            .unwrap();
        old_l
            .acquire("sup", &req, None, &mut |_| {})
            .map(|lease| lease.token)
    });
    std::thread::sleep(Duration::from_millis(100));
    let mut plain = rlock(&r)
        .args(["acquire", "sup", "--limit", "2", "--ttl", "60s"])
        .spawn();
    r.await_waiters("sup", 1);
    let mut newer = rlock(&r)
        .args([
            "acquire",
            "sup",
            "--limit",
            "2",
            "--ttl",
            "60s",
            "--supersede",
        ])
        .spawn();
    r.await_waiters("sup", 2);
    let old = old.join().unwrap();
    // The newer waiter is still queued (or holds): it was not superseded.
    let newer_alive = newer.try_wait().unwrap().is_none();
    let _ = newer.kill();
    let _ = newer.wait();
    let _ = plain.kill();
    let _ = plain.wait();
    assert!(
        newer_alive,
        "the newer --supersede waiter was superseded by an older call"
    );
    assert!(matches!(old, Err(Error::Superseded { .. })), "{old:?}");
}

/// `req` again, re-entering with `token` at once (no wait, so no
/// --supersede either).
fn reentry(req: &rlock::Request, token: &rlock::Token) -> rlock::Request {
    req.to_builder()
        .reenter(Some(token.clone()))
        .wait(Wait::No)
        .supersede(false)
        .build()
        .unwrap()
}
