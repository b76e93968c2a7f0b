//! A lock's keys deleted by hand (`redis-cli del`, issue 30): the holder
//! learns it lost the lock when its ownership went, `status` reports a
//! damaged lock instead of failing, the next acquirer (or `rlock break`)
//! clears the remains, and no key is left without expiry.

use std::thread;
use std::time::Duration;

use rlock::{Error, Mode, Request, Wait};

use crate::util::*;

fn req(mode: Mode, ttl: Duration, wait: Wait) -> Request {
    Request::builder(ttl).mode(mode).wait(wait).build().unwrap()
}

/// Every key under the test's prefix has a TTL (none is left for ever).
#[track_caller]
fn all_keys_expire(r: &Redis) {
    for k in r.keys() {
        let ttl: i64 = r.cmd(&["PTTL", &k]);
        assert!(
            ttl > 0 || ttl == -2,
            "{k} has PTTL {ttl}: a key without expiry"
        );
    }
}

#[test]
fn a_lock_whose_state_hash_is_deleted_is_damaged_not_foreign() {
    let r = Redis::shared();
    let mut a = r.locker();
    let ttl = Duration::from_secs(60);
    let held = a
        .acquire(
            "dl",
            &req(Mode::Exclusive, ttl, Wait::No),
            None,
            &mut |_| {},
        )
        .unwrap();
    let state = r.key("dl");
    let _: i64 = r.cmd(&["DEL", &state]);
    // status: exit 0, a warning naming the remains and `rlock break`, and
    // the remains in --json; the holds are gone.
    let out = rlock(&r).args(["status", "dl", "--json"]).run().ok();
    assert!(
        out.stderr.contains("damaged") && out.stderr.contains("rlock break"),
        "{}",
        out.stderr
    );
    let st: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        st["damaged"],
        serde_json::json!([format!("{state}:h")]),
        "{st}"
    );
    assert_eq!(st["held"], false, "{st}");
    rlock(&r).args(["history", "dl"]).run().ok();
    all_keys_expire(&r);
    // The holder's renewal finds its hold gone (its fields went with the
    // hash), and clears the remains.
    let e = a.renew("dl", &held.token, ttl).unwrap_err();
    assert!(matches!(e, Error::Lost { .. }), "{e}");
    assert!(r.status_json("dl").get("damaged").is_none());
    // Again, and this time an acquirer comes first: it takes the lock.
    let held = a
        .acquire(
            "dl",
            &req(Mode::Exclusive, ttl, Wait::No),
            None,
            &mut |_| {},
        )
        .unwrap();
    let _: i64 = r.cmd(&["DEL", &state]);
    let mut b = r.locker();
    let taken = b
        .acquire(
            "dl",
            &req(Mode::Exclusive, ttl, Wait::No),
            None,
            &mut |_| {},
        )
        .unwrap();
    assert!(taken.fence > held.fence);
    let e = a.renew("dl", &held.token, ttl).unwrap_err();
    assert!(matches!(e, Error::NotOwner { .. }), "{e}");
    // The new holder was not disturbed by the old one's renewal.
    b.renew("dl", &taken.token, ttl).unwrap();
    b.release("dl", &taken.token).unwrap();
    // And once more: `rlock break` clears the remains.
    let held = a
        .acquire(
            "dl",
            &req(Mode::Exclusive, ttl, Wait::No),
            None,
            &mut |_| {},
        )
        .unwrap();
    let _: i64 = r.cmd(&["DEL", &state]);
    let out = rlock(&r)
        .args(["break", "dl", "--reason", "deleted by hand", "--yes"])
        .run()
        .ok();
    assert!(out.stderr.contains("cleared the remains"), "{}", out.stderr);
    assert!(r.status_json("dl").get("damaged").is_none());
    let e = a.renew("dl", &held.token, ttl).unwrap_err();
    assert!(
        matches!(&e, Error::Lost { why, .. } if why.contains("(reason: deleted by hand)")),
        "{e}"
    );
    all_keys_expire(&r);
    r.assert_nothing_held(&[]);
}

#[test]
fn an_exec_whose_lock_state_is_deleted_stops_as_for_a_loss() {
    let r = Redis::shared();
    let holder = rlock(&r)
        .args(["exec", "--ttl", "3s", "dl", "--", "sleep", "6"])
        .spawn();
    eventually(Duration::from_secs(10), "the lock held", || r.held("dl"));
    let _: i64 = r.cmd(&["DEL", &r.key("dl")]);
    // Found at the next renewal (every second), well before the command
    // would have ended.
    let out = finish(holder, "the holder").code(79);
    assert!(out.stderr.contains("lost"), "{}", out.stderr);
    assert!(out.elapsed < Duration::from_secs(5), "{:?}", out.elapsed);
    let events = r.locker().history("dl", 100).unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert!(kinds.contains(&"lost"), "{kinds:?}");
    assert!(!kinds.contains(&"released"), "{kinds:?}");
    rlock(&r)
        .args(["exec", "-n", "dl", "--", "true"])
        .run()
        .ok();
    all_keys_expire(&r);
    r.assert_nothing_held(&[]);
}

/// Each key of a lock deleted in turn, under a reader holding it and a
/// writer waiting (so every key exists): the holder loses the lock exactly
/// when its ownership went (the hash or the leases), nothing answers 64,
/// the waiter gets the lock, and every key keeps an expiry.
#[test]
fn each_key_of_a_lock_deleted_by_hand() {
    let r = Redis::shared();
    let ttl = Duration::from_secs(60);
    for (i, suffix) in ["", ":h", ":q", ":qa", ":qw", ":fence", ":log", ":n"]
        .into_iter()
        .enumerate()
    {
        let key = format!("k{i}");
        let mut a = r.locker();
        let held = a
            .acquire(&key, &req(Mode::Read, ttl, Wait::No), None, &mut |_| {})
            .unwrap();
        let waiter = {
            let (mut b, key) = (r.locker(), key.clone());
            thread::spawn(move || {
                let wait = Wait::For(Duration::from_secs(30));
                let req = req(Mode::Write, Duration::from_secs(5), wait);
                let lease = b.acquire(&key, &req, None, &mut |_| {})?;
                b.release(&key, &lease.token)
            })
        };
        r.await_waiters(&key, 1);
        let deleted = format!("{}{suffix}", r.key(&key));
        assert_eq!(r.cmd::<i64>(&["DEL", &deleted]), 1, "{deleted}");
        rlock(&r).args(["status", &key]).run().ok();
        all_keys_expire(&r);
        let renewed = a.renew(&key, &held.token, ttl);
        let owned = !matches!(suffix, "" | ":h");
        assert_eq!(renewed.is_ok(), owned, "{deleted}: {renewed:?}");
        if owned {
            a.release(&key, &held.token).unwrap();
        }
        all_keys_expire(&r);
        let got = waiter.join().unwrap();
        assert!(got.is_ok(), "{deleted}: the waiter got {got:?}");
        rlock(&r).args(["history", &key]).run().ok();
        rlock(&r)
            .args(["exec", "-n", &key, "--", "true"])
            .run()
            .ok();
        all_keys_expire(&r);
    }
    r.assert_nothing_held(&[]);
}

/// Without P{K}:qa a dead waiter has no lease left to lapse: it must not
/// keep the head of the queue from the live waiter behind it.
#[test]
fn a_dead_waiter_loses_its_place_when_the_waiter_leases_are_deleted() {
    let r = Redis::shared();
    let mut a = r.locker();
    let ttl = Duration::from_secs(60);
    let held = a
        .acquire("q", &req(Mode::Exclusive, ttl, Wait::No), None, &mut |_| {})
        .unwrap();
    let mut dead = rlock(&r).args(["exec", "q", "--", "true"]).spawn();
    r.await_waiters("q", 1);
    kill_waiter_with_guard(&mut dead);
    let live = rlock(&r)
        .args(["exec", "-w", "20s", "q", "--", "true"])
        .spawn();
    r.await_waiters("q", 2);
    let _: i64 = r.cmd(&["DEL", &format!("{}:qa", r.key("q"))]);
    a.release("q", &held.token).unwrap();
    finish(live, "the live waiter").ok();
    all_keys_expire(&r);
}

/// Without P{K}:h the writer mark named a holder that was gone: every
/// reader waited behind it.
#[test]
fn readers_are_not_kept_out_by_a_writer_whose_lease_was_deleted() {
    let r = Redis::shared();
    let ttl = Duration::from_secs(60);
    let mut w = r.locker();
    w.acquire("rw", &req(Mode::Write, ttl, Wait::No), None, &mut |_| {})
        .unwrap();
    let _: i64 = r.cmd(&["DEL", &format!("{}:h", r.key("rw"))]);
    let mut reader = r.locker();
    let got = reader.acquire("rw", &req(Mode::Read, ttl, Wait::No), None, &mut |_| {});
    let lease = got.unwrap();
    reader.release("rw", &lease.token).unwrap();
    all_keys_expire(&r);
}
