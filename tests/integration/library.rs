//! The library API against a real Redis.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rlock::clock::BootTime;
use rlock::{Error, Released, Request, RequestBuilder, Wait};

use crate::util::*;

fn req(ttl_ms: u64) -> Request {
    Request::new(Duration::from_millis(ttl_ms)).unwrap()
}

/// A request for `ttl_ms` with other settings.
fn req_with(ttl_ms: u64, set: impl FnOnce(RequestBuilder) -> RequestBuilder) -> Request {
    set(Request::builder(Duration::from_millis(ttl_ms)))
        .build()
        .unwrap()
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
            let (inside, peak) = (inside.clone(), peak.clone());
            let (url, prefix) = (r.url(), r.prefix.clone());
            std::thread::spawn(move || {
                let mut l = locker_with(&url, &prefix);
                let req = req_with(5000, |b| b.limit(limit));
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
    let r = Redis::shared();
    let f = r.fence_ahead("hot");
    assert_eq!(peak_holders(&r, "hot", 1, 10, 50, Duration::ZERO), 1);
    assert_eq!(r.locker().status("hot").unwrap().fence, f + 500);
    r.assert_nothing_held(&[]);
}

#[test]
fn reentry_counts_and_releases_at_zero() {
    let r = Redis::shared();
    let mut l = r.locker();
    let first = l.acquire("re", &req(5000), None, &mut |_| {}).unwrap();
    assert_eq!(first.count, 1);
    let again = req_with(5000, |b| {
        b.reenter(Some(first.token.clone())).wait(Wait::No)
    });
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
    let r = Redis::shared();
    let mut l = r.locker();
    let three = req_with(5000, |b| b.limit(3).wait(Wait::No));
    let leases: Vec<_> = (0..3)
        .map(|_| l.acquire("sem", &three, None, &mut |_| {}).unwrap())
        .collect();
    let fences: Vec<u64> = leases.iter().map(|l| l.fence).collect();
    assert!(fences.windows(2).all(|w| w[1] == w[0] + 1), "{fences:?}");
    assert!(matches!(
        l.acquire("sem", &three, None, &mut |_| {}),
        Err(Error::Busy { .. })
    ));
    let two = three.to_builder().limit(2).build().unwrap();
    let err = l.acquire("sem", &two, None, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("Request::limit 3, not 2"), "{err}");
    let st = l.status("sem").unwrap();
    assert_eq!((st.limit, st.holders.len()), (3, 3));
    l.release("sem", &leases[1].token).unwrap();
    l.acquire("sem", &three, None, &mut |_| {}).unwrap();
}

#[test]
fn validity_deadline_is_inside_the_ttl() {
    let r = Redis::shared();
    let mut l = r.locker();
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
    let r = Redis::shared();
    let mut l = r.locker();
    let holder = l.acquire("d", &req(60_000), None, &mut |_| {}).unwrap();
    let queue = |n: u64| {
        let child = rlock(&r).args(["acquire", "d"]).spawn();
        r.await_waiters("d", n);
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
    let r = Redis::shared();
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
    let r = Redis::shared();
    let mut l = r.locker();
    let holder = l.acquire("d", &req(60_000), None, &mut |_| {}).unwrap();
    let mut dead = rlock(&r).args(["acquire", "d"]).spawn();
    r.await_waiters("d", 1);
    dead.kill().unwrap();
    dead.wait().unwrap();
    l.release("d", &holder.token).unwrap();
    let started = std::time::Instant::now();
    let mut l2 = r.locker();
    let w = req_with(5000, |b| b.wait(Wait::For(Duration::from_secs(15))));
    l2.acquire("d", &w, None, &mut |_| {}).unwrap();
    let waited = started.elapsed();
    assert!(
        waited <= rlock::lock::WAITER_LEASE + rlock::lock::HEARTBEAT + Duration::from_millis(500),
        "waited {waited:?}"
    );
}

/// Stop `r` now and let it go on after `for_`, from another thread.
fn freeze(r: &Redis, for_: Duration) -> std::thread::JoinHandle<()> {
    let pid = r.child_pid();
    kill(pid, libc::SIGSTOP);
    std::thread::spawn(move || {
        std::thread::sleep(for_);
        kill(pid, libc::SIGCONT);
    })
}

#[test]
fn a_grant_that_arrives_after_its_lease_expired_is_given_back() {
    // The acquire goes out on the open connection into a stopped server;
    // the grant comes back 700 ms later, when a 200 ms lease is over by the
    // client's clock. Using it would let a second holder in once it ends on
    // the server: the client must give it back and take a fresh one.
    let r = Redis::start();
    let mut l = r.locker();
    let f = r.fence_ahead("stale");
    let thaw = freeze(&r, Duration::from_millis(700));
    let lease = l.acquire("stale", &req(200), None, &mut |_| {});
    thaw.join().unwrap();
    let lease = lease.unwrap();
    assert!(
        !lease.valid_until.passed(),
        "the lease returned was already invalid ({:?} ago)",
        lease.valid_until.elapsed()
    );
    assert_eq!(
        lease.fence,
        f + 2,
        "the stale grant was not given back and retaken"
    );
    let st = r.locker().status("stale").unwrap();
    assert_eq!(st.holders.len(), 1, "{st:?}");
    assert_eq!((st.holders[0].fence, st.holders[0].count), (f + 2, 1));
}

#[test]
fn a_reentry_that_arrives_after_its_lease_expired_is_given_back() {
    let r = Redis::start();
    let mut l = r.locker();
    let outer = l
        .acquire("stale-re", &req(60_000), None, &mut |_| {})
        .unwrap();
    let again = req_with(200, |b| b.reenter(Some(outer.token.clone())).wait(Wait::No));
    let thaw = freeze(&r, Duration::from_millis(700));
    let inner = l.acquire("stale-re", &again, None, &mut |_| {});
    thaw.join().unwrap();
    let inner = inner.unwrap();
    assert!(
        !inner.valid_until.passed(),
        "the re-entry returned was already invalid ({:?} ago)",
        inner.valid_until.elapsed()
    );
    // The late re-entry's hold was released: one outer hold, one inner.
    assert_eq!((inner.count, inner.fence), (2, outer.fence));
    let st = r.locker().status("stale-re").unwrap();
    assert_eq!(st.holders.len(), 1, "{st:?}");
    assert_eq!(st.holders[0].count, 2);
    assert_eq!(
        l.release("stale-re", &outer.token).unwrap(),
        Released::StillHeld(1)
    );
    assert_eq!(
        l.release("stale-re", &outer.token).unwrap(),
        Released::Released
    );
}

#[test]
fn a_server_too_slow_for_every_grant_is_reported_not_used() {
    // Every reply takes 100 ms (a proxy holds it back): each grant of a
    // 50 ms lease comes back late. A non-waiting acquire retries a bounded
    // number of times (the lock is not busy) and then reports Redis
    // unusable, holding nothing. (A proxy, not SIGSTOP/SIGCONT: a
    // stuttering server lets a retry through in time on a loaded machine.)
    let r = Redis::start();
    let f = r.fence_ahead("slow");
    let proxy = Proxy::start(r.port);
    *proxy.delay_all.lock().unwrap() = Some(Duration::from_millis(100));
    let mut l = locker_with(&format!("redis://127.0.0.1:{}", proxy.port), &r.prefix);
    let once = req_with(50, |b| b.wait(Wait::No));
    let err = l.acquire("slow", &once, None, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("acquire \"slow\": the grant arrived after its lease had expired"),
        "{text}"
    );
    assert!(text.contains("TTL 50ms") && !text.contains('\n'), "{text}");
    let st = r.locker().status("slow").unwrap();
    assert_eq!((st.fence, st.holders.len()), (f + 3, 0), "{st:?}");
}

/// The disposition of `sig` (its handler address) and this thread's mask.
fn signal_state(sig: i32) -> (usize, bool) {
    // SAFETY: plain syscalls with out-pointers to zeroed plain data.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut act);
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask);
        (act.sa_sigaction, libc::sigismember(&mask, sig) == 1)
    }
}

/// Children of this process named `comm`, zombies included.
fn children_named(comm: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|s| {
            let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
            s.contains(&format!("({comm})")) && rest.split_whitespace().nth(1) == Some(&me)
        })
        .collect()
}

#[test]
fn exec_and_acquire_leave_signal_handling_and_no_guard_behind() {
    let r = Redis::shared();
    let mut l = r.locker();
    let watched = [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
    ];
    let before: Vec<_> = watched.iter().map(|&s| signal_state(s)).collect();
    let spec = rlock::exec::Spec {
        program: "sh".into(),
        args: vec!["-c".into(), "exit 7".into()],
        on_lost: rlock::exec::OnLost::Term,
        grace: Duration::from_secs(1),
        kill_leftovers: false,
        max_hold: None,
        held: None,
        exported: None,
    };
    for _ in 0..2 {
        let code = rlock::exec::run(
            &mut l,
            "lib-exec",
            &req(5000),
            &spec,
            &mut |_| {},
            &mut |_| {},
        );
        assert_eq!(code.unwrap().code, 7);
    }
    let after: Vec<_> = watched.iter().map(|&s| signal_state(s)).collect();
    assert_eq!(
        before, after,
        "signal dispositions or mask changed by exec::run"
    );
    assert!(
        children_named("rl-guard").is_empty(),
        "a guard was left behind"
    );
    // The acquire path's signal watch restores them too.
    let cancel = rlock::Cancel::new();
    std::thread::scope(|s| {
        let _w = rlock::signals::cancel_on_signals(s, &cancel).unwrap();
        assert!(signal_state(libc::SIGINT).1, "not blocked while watching");
    });
    let after: Vec<_> = watched.iter().map(|&s| signal_state(s)).collect();
    assert_eq!(before, after);
}

/// A locker whose replies time out after `timeout`.
fn impatient(r: &Redis, timeout: Duration) -> rlock::Locker {
    let opts = rlock::ConnectOptions {
        urls: vec![r.url()],
        connect_timeout: timeout,
        ..Default::default()
    };
    rlock::Locker::connect(&opts, "rlock:").unwrap()
}

#[test]
fn calls_resent_after_lost_replies_count_once() {
    // Redis stalls past the client's 200 ms reply timeout: the client
    // resends on new connections, and when Redis resumes it runs the first
    // send (still in the old connection's buffer) and every resend. Each
    // call must still count once: one re-entry, one release.
    let r = Redis::start();
    let mut l = impatient(&r, Duration::from_millis(200));
    let outer = l.acquire("once", &req(30_000), None, &mut |_| {}).unwrap();
    let count = |r: &Redis| r.locker().status("once").unwrap().holders[0].count;

    let nested = req_with(30_000, |b| b.reenter(Some(outer.token.clone())));
    let thaw = freeze(&r, Duration::from_millis(700));
    let inner = l.acquire("once", &nested, None, &mut |_| {});
    thaw.join().unwrap();
    let inner = inner.unwrap();
    assert_eq!(inner.count, 2);
    assert_eq!(count(&r), 2, "a resent re-entry counted twice");

    let thaw = freeze(&r, Duration::from_millis(700));
    let released = l.release("once", &outer.token);
    thaw.join().unwrap();
    assert_eq!(released.unwrap(), Released::StillHeld(1));
    assert_eq!(count(&r), 1, "a resent release counted twice");

    // The last hold: a resend finds the tombstone and says released, not
    // gone (which exec would report as a lost lock).
    let thaw = freeze(&r, Duration::from_millis(700));
    let released = l.release("once", &outer.token);
    thaw.join().unwrap();
    assert_eq!(released.unwrap(), Released::Released);
    r.assert_nothing_held(&[]);
}

/// The acquire or release script, as rlock runs it.
fn script(name: &str) -> String {
    lua_script(&format!("{name}.lua"))
}

#[test]
fn sibling_reentries_sharing_a_token_never_count_a_resend_twice() {
    // `rlock exec K -- sh -c 'rlock exec K -- a & rlock exec K -- b'`: two
    // re-entries with the parent's token at once. A's release is resent
    // (its reply was lost) after B released: the resend must change
    // nothing, or the parent's hold is dropped under its running command.
    let r = Redis::start();
    let tok = "11111111-1111-4111-8111-111111111111";
    let keys = |req: &str| -> Vec<String> {
        let b = "rlock:{sib}";
        vec![
            b.into(),
            format!("{b}:h"),
            format!("{b}:q"),
            format!("{b}:qa"),
            format!("{b}:fence"),
            format!("{b}:qw"),
            format!("{b}:log"),
            format!("{b}:n"),
            format!("{b}:w:{tok}"),
            format!("{b}:r:{req}"),
        ]
    };
    let mut c = r.conn();
    let (acq, rel) = (script("acquire"), script("release"));
    let acquire = |c: &mut redis::Connection, req: &str, reenter: &str| -> Vec<redis::Value> {
        redis::cmd("EVAL")
            .arg(&acq)
            .arg(10)
            .arg(keys(req))
            .arg(&[
                tok,
                "30000",
                "1",
                "{}",
                "0",
                "5000",
                reenter,
                "x",
                req,
                "0",
                "0",
                "20000",
                "0",
                "0",
                "200",
                "604800000",
            ])
            .query(c)
            .unwrap()
    };
    let release = |c: &mut redis::Connection, req: &str| -> i64 {
        let reply: Vec<redis::Value> = redis::cmd("EVAL")
            .arg(&rel)
            .arg(10)
            .arg(keys(req))
            .arg(&[
                tok,
                "0",
                req,
                "0",
                "1",
                "20000",
                "",
                "",
                "",
                "0",
                "200",
                "604800000",
            ])
            .query(c)
            .unwrap();
        redis::FromRedisValue::from_redis_value(reply[0].clone()).unwrap()
    };
    let count = |v: &[redis::Value]| -> i64 {
        redis::FromRedisValue::from_redis_value(v[2].clone()).unwrap()
    };
    assert_eq!(count(&acquire(&mut c, "a0", "0")), 1); // the parent's grant
    assert_eq!(count(&acquire(&mut c, "a0", "0")), 1); // its resend
    assert_eq!(count(&acquire(&mut c, "a1", "1")), 2); // sibling A
    assert_eq!(count(&acquire(&mut c, "b1", "1")), 3); // sibling B
    assert_eq!(count(&acquire(&mut c, "a1", "1")), 2); // A's resend: no change
    assert_eq!(release(&mut c, "a2"), 2); // A releases
    assert_eq!(release(&mut c, "b2"), 1); // B releases; the parent holds on
    assert_eq!(release(&mut c, "a2"), 2); // A's resend: A's answer, no change
    let st = r.locker().status("sib").unwrap();
    assert_eq!(st.holders.len(), 1, "the parent's hold was dropped: {st:?}");
    let mut l = r.locker();
    let req = req_with(30_000, |b| b.wait(Wait::No));
    assert!(matches!(
        l.acquire("sib", &req, None, &mut |_| {}),
        Err(Error::Busy { .. })
    ));
}

/// lua/wake.lua pushes to the waiters' wake-up lists a script named: a
/// list there that rlock did not write (every one of rlock's has a TTL,
/// set when it is pushed to) is left alone, not pushed to and given a TTL.
#[test]
fn a_wake_up_never_touches_a_list_rlock_did_not_write() {
    let r = Redis::shared();
    let theirs = format!("{}:w:theirs", r.key("wake"));
    let ours = format!("{}:w:ours", r.key("wake"));
    let _: () = r.cmd(&["RPUSH", &theirs, "a", "b"]);
    let _: i64 = redis::cmd("EVAL")
        .arg(include_str!("../../lua/wake.lua"))
        .arg(2)
        .arg(&theirs)
        .arg(&ours)
        .arg("10000")
        .query(&mut r.conn())
        .unwrap();
    assert_eq!(
        r.cmd::<Vec<String>>(&["LRANGE", &theirs, "0", "-1"]),
        ["a", "b"]
    );
    assert_eq!(r.cmd::<i64>(&["PTTL", &theirs]), -1);
    assert_eq!(r.cmd::<Vec<String>>(&["LRANGE", &ours, "0", "-1"]), ["1"]);
    assert!(r.cmd::<i64>(&["PTTL", &ours]) > 0);
}

/// A keeper's loss record (`P{K}:lost`, always written with a TTL) is not
/// written over a key someone else keeps there without one.
#[test]
fn a_loss_record_is_not_written_over_data_rlock_did_not_write() {
    let r = Redis::shared();
    let opts = rlock::ConnectOptions {
        urls: vec![r.url()],
        ..Default::default()
    };
    let record = rlock::keep::LostRecord {
        host: "h".into(),
        pid: 1,
        when: "2026-01-01T00:00:00Z".into(),
        when_ms: 0,
        why: "gone".into(),
        action: "nothing".into(),
    };
    let theirs = rlock::lock::LockName::new(&r.prefix, "theirs").unwrap();
    let key = format!("{}:lost", r.key("theirs"));
    let _: () = r.cmd(&["SET", &key, "their value"]);
    assert!(rlock::keep::record_loss(&opts, &theirs, &record).is_err());
    assert_eq!(r.cmd::<String>(&["GET", &key]), "their value");
    assert_eq!(r.cmd::<i64>(&["PTTL", &key]), -1);
    // Where there is nothing, or an earlier record, it is written.
    let ours = rlock::lock::LockName::new(&r.prefix, "ours").unwrap();
    rlock::keep::record_loss(&opts, &ours, &record).unwrap();
    rlock::keep::record_loss(&opts, &ours, &record).unwrap();
    assert_eq!(r.status_json("ours")["last_lost"]["why"], "gone");
}

#[test]
fn a_replica_url_fails_fast() {
    // READONLY from a replica named as the one Redis is a wrong address,
    // not an outage to ride out.
    let master = Redis::start();
    let replica = replica_of(&master);
    let started = std::time::Instant::now();
    bare_rlock()
        .args(["--url", &replica.url(), "acquire", "k"])
        .run()
        .fails(69, "READONLY");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
