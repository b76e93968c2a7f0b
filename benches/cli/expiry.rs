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
use rlock::{Lease, Locker, Mode, Released, Request, Wait};

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
    // Release and re-entry answers (`:r:<request>`) are many and alike:
    // counted, not listed.
    let answers: Vec<i64> = keys
        .iter()
        .filter(|(k, pttl)| *pttl >= 0 && k.contains("}:r:"))
        .map(|(_, pttl)| *pttl)
        .collect();
    let mut mortal: Vec<String> = keys
        .iter()
        .filter(|(k, pttl)| *pttl >= 0 && !k.contains("}:r:"))
        .map(|(k, pttl)| format!("{k} ({:.1} s)", *pttl as f64 / 1e3))
        .collect();
    if let Some(longest) = answers.iter().max() {
        mortal.push(format!(
            "{} answers `:r:<request>` (at most {:.1} s)",
            answers.len(),
            *longest as f64 / 1e3
        ));
    }

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
        keys.len() - immortal.len(),
        immortal.len()
    );
    for k in &immortal {
        println!("     no expiry: {k}");
    }
    if !mortal.is_empty() {
        println!("   still expiring (TTL left): {}", mortal.join(", "));
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
    Request::builder(TTL)
        .mode(mode)
        .limit(limit)
        .wait(Wait::For(Duration::from_secs(5)))
        .build()
        .expect("request")
}

/// Acquire `key` as `q` says.
fn take(l: &mut Locker, key: &str, q: &Request) -> Result<Lease, String> {
    l.acquire(key, q, None, &mut |_| {})
        .map_err(|e| format!("acquire {key}: {e}"))
}

/// Release one hold of `lease`; `want` is what the release must answer.
fn give(l: &mut Locker, lease: &Lease, want: Released) -> Result<(), String> {
    match l.release(&lease.key, &lease.token) {
        Ok(got) if got == want => Ok(()),
        other => Err(format!(
            "release {}: {other:?}, expected {want:?}",
            lease.key
        )),
    }
}

fn mutex(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    let lease = take(&mut l, "x-mutex", &req(Mode::Exclusive, 1))?;
    give(&mut l, &lease, Released::Released)
}

fn semaphore(r: &Redis) -> Result<(), String> {
    let (mut a, mut b) = (locker(r), locker(r));
    let q = req(Mode::Exclusive, 3);
    let (la, lb) = (take(&mut a, "x-sem", &q)?, take(&mut b, "x-sem", &q)?);
    give(&mut a, &la, Released::Released)?;
    give(&mut b, &lb, Released::Released)
}

fn read_write(r: &Redis) -> Result<(), String> {
    let (mut a, mut b) = (locker(r), locker(r));
    let rd = req(Mode::Read, 1);
    let (la, lb) = (take(&mut a, "x-rw", &rd)?, take(&mut b, "x-rw", &rd)?);
    give(&mut a, &la, Released::Released)?;
    give(&mut b, &lb, Released::Released)?;
    let lw = take(&mut a, "x-rw", &req(Mode::Write, 1))?;
    give(&mut a, &lw, Released::Released)
}

fn reentry(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    let q = req(Mode::Exclusive, 1);
    let outer = take(&mut l, "x-reenter", &q)?;
    let q = q
        .to_builder()
        .reenter(Some(outer.token.clone()))
        .build()
        .expect("request");
    let inner = take(&mut l, "x-reenter", &q)?;
    if inner.count != 2 {
        return Err(format!("re-entry count {}, expected 2", inner.count));
    }
    give(&mut l, &inner, Released::StillHeld(1))?;
    give(&mut l, &outer, Released::Released)
}

fn min_hold(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    let q = req(Mode::Exclusive, 1)
        .to_builder()
        .min_hold(MIN_HOLD)
        .build()
        .expect("request");
    let lease = take(&mut l, "x-minhold", &q)?;
    give(&mut l, &lease, Released::Released)
}

fn run_out(r: &Redis) -> Result<(), String> {
    take(&mut locker(r), "x-runout", &req(Mode::Exclusive, 1)).map(drop)
}

/// A CLI waiter queued behind a holder, then SIGKILLed: it leaves its
/// queue entry and wake-up list behind, for its waiter lease to clear.
fn abandoned_waiter(r: &Redis) -> Result<(), String> {
    let mut l = locker(r);
    let lease = take(&mut l, "x-abandon", &req(Mode::Exclusive, 1))?;
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
    let res = give(&mut l, &lease, Released::Released);
    if !queued {
        return Err("the waiter was not queued within 5 s".into());
    }
    res
}

fn exec(r: &Redis) -> Result<(), String> {
    run_ok(rlock(r).args(["exec", "--ttl", "1s", "x-exec", "--", "true"]));
    Ok(())
}
