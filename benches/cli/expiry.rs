//! Section 12: no key without an expiry. Every kind of lock is taken and
//! given back (or abandoned) on a redis-server of its own: a mutex, a
//! semaphore slot pair, read and write holds of a read-write lock, a
//! re-entered hold, a release under --min-hold, a lease left to run out,
//! a waiter killed while queued, and one `rlock exec`. Once every lease
//! has ended, each key under the prefix is listed (SCAN) with its PTTL:
//! a key at -1 would live forever, and is reported by name. Nothing here
//! hides a key: the fencing counters are listed like the rest.

use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rlock::lock::WAITER_LEASE;
use rlock::{Mode, Released, Request, Wait};

use crate::client::{locker, rlock, waiters_of};
use crate::process::{run_ok, wait_until};
use crate::stats::section;
use crate::support::{Redis, note, signal, start_redis};
use crate::{Bench, PREFIX};

/// The leases of this section: short, so that all end soon.
const TTL: Duration = Duration::from_secs(1);
const MIN_HOLD: Duration = Duration::from_secs(2);

pub(crate) fn run(_: &Bench) {
    let r = start_redis(&[]);
    let mut errors = Vec::new();
    let mut kinds = Vec::new();
    let mut step = |what: &'static str, res: Result<(), String>| {
        kinds.push(what);
        if let Err(e) = res {
            note(&mut errors, format!("{what}: {e}"));
        }
    };
    step("mutex", mutex(&r));
    step("semaphore --limit 3", semaphore(&r));
    step("read-write: 2 readers, then a writer", read_write(&r));
    step("re-entry (2 holds)", reentry(&r));
    step("release under --min-hold 2s", min_hold(&r));
    step("lease left to run out", run_out(&r));
    step("waiter killed while queued", abandoned_waiter(&r));
    step("rlock exec", exec(&r));
    // Every lease (TTL, min-hold, the killed waiter's) ends by now.
    let ended = Instant::now() + MIN_HOLD.max(TTL).max(WAITER_LEASE) + Duration::from_secs(1);
    thread::sleep(ended.saturating_duration_since(Instant::now()));

    let mut conn = r.conn();
    let mut keys: Vec<(String, i64)> = scan(&mut conn, &format!("{PREFIX}*"))
        .into_iter()
        .map(|k| {
            let pttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut conn).expect("PTTL");
            (k, pttl)
        })
        .filter(|(_, pttl)| *pttl != -2) // gone meanwhile
        .collect();
    keys.sort();
    let immortal: Vec<&str> = keys
        .iter()
        .filter(|(_, pttl)| *pttl == -1)
        .map(|(k, _)| k.as_str())
        .collect();
    let mortal: Vec<String> = keys
        .iter()
        .filter(|(_, pttl)| *pttl >= 0)
        .map(|(k, pttl)| format!("{k} ({:.1} s)", *pttl as f64 / 1e3))
        .collect();

    section(&format!(
        "12. Key expiry: every kind of lock used once, then every key under {PREFIX:?} once all \
         leases have ended (TTL {} s, min-hold {} s, waiter lease {} s)",
        TTL.as_secs(),
        MIN_HOLD.as_secs(),
        WAITER_LEASE.as_secs()
    ));
    println!("   used: {}", kinds.join(", "));
    for e in &errors {
        println!("   ERROR: {e}");
    }
    println!(
        "   keys left: {}; with a TTL: {}; WITHOUT an expiry (PTTL -1): {}",
        keys.len(),
        mortal.len(),
        immortal.len()
    );
    for k in &immortal {
        println!("     no expiry: {k}");
    }
    if !mortal.is_empty() {
        println!("   still expiring: {}", mortal.join(", "));
    }
    println!("   goal (#12): no key without an expiry");
}

/// SCAN the whole keyspace for `pattern`.
fn scan(conn: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let mut cursor = 0u64;
    let mut out = Vec::new();
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query(conn)
            .expect("SCAN");
        out.extend(keys);
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

fn req(mode: Mode, limit: u32) -> Request {
    let mut req = Request::new(TTL);
    req.mode = mode;
    req.limit = limit;
    req.wait = Wait::For(Duration::from_secs(5));
    req
}

fn released(what: String, res: rlock::Result<Released>, want: Released) -> Result<(), String> {
    match res {
        Ok(got) if got == want => Ok(()),
        other => Err(format!("{what}: {other:?}, expected {want:?}")),
    }
}

fn mutex(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    let lease = l
        .acquire("x-mutex", &req(Mode::Exclusive, 1), None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    released(
        "release".into(),
        l.release("x-mutex", &lease.token),
        Released::Released,
    )
}

fn semaphore(r: &Redis) -> Result<(), String> {
    let (mut a, mut b) = (locker(r), locker(r));
    let q = req(Mode::Exclusive, 3);
    let la = a
        .acquire("x-sem", &q, None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    let lb = b
        .acquire("x-sem", &q, None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    released(
        "slot 1".into(),
        a.release("x-sem", &la.token),
        Released::Released,
    )?;
    released(
        "slot 2".into(),
        b.release("x-sem", &lb.token),
        Released::Released,
    )
}

fn read_write(r: &Redis) -> Result<(), String> {
    let (mut a, mut b) = (locker(r), locker(r));
    let (rd, wr) = (req(Mode::Read, 1), req(Mode::Write, 1));
    let la = a
        .acquire("x-rw", &rd, None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    let lb = b
        .acquire("x-rw", &rd, None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    released(
        "reader 1".into(),
        a.release("x-rw", &la.token),
        Released::Released,
    )?;
    released(
        "reader 2".into(),
        b.release("x-rw", &lb.token),
        Released::Released,
    )?;
    let lw = a
        .acquire("x-rw", &wr, None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    released(
        "writer".into(),
        a.release("x-rw", &lw.token),
        Released::Released,
    )
}

fn reentry(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    let mut q = req(Mode::Exclusive, 1);
    let outer = l
        .acquire("x-reenter", &q, None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    q.reenter = Some(outer.token.clone());
    let inner = l
        .acquire("x-reenter", &q, None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    if inner.count != 2 {
        return Err(format!("re-entry count {}, expected 2", inner.count));
    }
    released(
        "inner".into(),
        l.release("x-reenter", &inner.token),
        Released::StillHeld(1),
    )?;
    released(
        "outer".into(),
        l.release("x-reenter", &outer.token),
        Released::Released,
    )
}

fn min_hold(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    let mut q = req(Mode::Exclusive, 1);
    q.min_hold = MIN_HOLD;
    let lease = l
        .acquire("x-minhold", &q, None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    released(
        "release".into(),
        l.release("x-minhold", &lease.token),
        Released::Released,
    )
}

fn run_out(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    l.acquire("x-runout", &req(Mode::Exclusive, 1), None, &mut |_| {})
        .map(drop)
        .map_err(|e| e.to_string())
}

/// A CLI waiter queued behind a holder, then SIGKILLed: it leaves its
/// queue entry and wake-up list behind, for its waiter lease to clear.
fn abandoned_waiter(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    let lease = l
        .acquire("x-abandon", &req(Mode::Exclusive, 1), None, &mut |_| {})
        .map_err(|e| e.to_string())?;
    let mut waiter: Child = rlock(r)
        .args(["acquire", "--ttl", "1s", "x-abandon"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn rlock acquire: {e}"))?;
    let mut obs = locker(r);
    let queued = wait_until(Duration::from_secs(5), || {
        waiters_of(&mut obs, "x-abandon") == 1
    });
    signal(waiter.id() as i32, libc::SIGKILL);
    let _ = waiter.wait();
    let res = l.release("x-abandon", &lease.token);
    if !queued {
        return Err("the waiter was not queued within 5 s".into());
    }
    released("holder".into(), res, Released::Released)
}

fn exec(r: &Redis) -> Result<(), String> {
    run_ok(rlock(r).args(["exec", "--ttl", "1s", "x-exec", "--", "true"]));
    Ok(())
}
