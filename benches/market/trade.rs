//! Listing and buying, kept correct either by WATCH (optimistic
//! transactions, the book's `list_item` and `purchase_item`) or by an
//! rlock lock (the book's `purchase_item_with_lock`).

use std::time::{Duration, Instant};

use redis::{Connection, RedisResult};
use rlock::clock::BootTime;
use rlock::{Locker, Released, Request};

use crate::model::{MARKET, inventory, item_id, member, price, user};

/// How a cell keeps listing and buying correct: WATCH, one lock on the
/// whole market, or one lock per item.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Method {
    Watch,
    Coarse,
    Fine,
}

impl Method {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Method::Watch => "WATCH",
            Method::Coarse => "coarse lock",
            Method::Fine => "fine lock",
        }
    }
}

pub(crate) const METHODS: [Method; 3] = [Method::Watch, Method::Coarse, Method::Fine];

/// Lock names live under this prefix, as the book's `lock:` + name.
pub(crate) const LOCK_PREFIX: &str = "lock:";
/// Lease TTL and longest wait for a lock, as the book's lock_timeout and
/// acquire_timeout: far above any single operation here.
pub(crate) const LOCK_TTL: Duration = Duration::from_secs(10);
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(10);

/// What one purchase attempt came to.
pub(crate) enum Bought {
    Yes,
    /// Gone (sold to someone else), repriced, or not affordable.
    Stale,
    /// The cell ended while a WATCH purchase was still retrying.
    Abandoned,
}

// ---------------------------------------------------------------- WATCH

/// The book's list_item: WATCH the seller's inventory, check the item is
/// still there, then move it into the market in one MULTI/EXEC.
pub(crate) fn list_watch(c: &mut Connection, seller: u64, num: u64) -> RedisResult<bool> {
    let inv = inventory(seller);
    let id = item_id(num);
    loop {
        redis::cmd("WATCH").arg(&inv).exec(c)?;
        let has: bool = redis::cmd("SISMEMBER").arg(&inv).arg(&id).query(c)?;
        if !has {
            redis::cmd("UNWATCH").exec(c)?;
            return Ok(false);
        }
        let done: Option<(i64, i64)> = list(seller, num).query(c)?;
        if done.is_some() {
            return Ok(true);
        }
        // Only this seller touches its inventory, so this never happens.
    }
}

/// The book's purchase_item: WATCH the market and the buyer, check price
/// and funds, then transfer money and item in one MULTI/EXEC; an aborted
/// EXEC (someone changed the market meanwhile) is retried.
pub(crate) fn purchase_watch(
    c: &mut Connection,
    buyer: u64,
    num: u64,
    seller: u64,
    lprice: i64,
    deadline: Instant,
    retries: &mut u64,
) -> RedisResult<Bought> {
    let (b, s, m) = (user(buyer), user(seller), member(num, seller));
    loop {
        redis::cmd("WATCH").arg(MARKET).arg(&b).exec(c)?;
        if !still_for_sale(c, &m, &b, lprice)? {
            redis::cmd("UNWATCH").exec(c)?;
            return Ok(Bought::Stale);
        }
        let done: Option<(i64, i64, i64, i64)> =
            transfer(&b, &s, buyer, num, &m, lprice).query(c)?;
        match done {
            Some((_, _, _, 1)) => return Ok(Bought::Yes),
            Some(_) => return Err(sold_twice()),
            None => {
                *retries += 1;
                if Instant::now() >= deadline {
                    return Ok(Bought::Abandoned);
                }
            }
        }
    }
}

/// Move an item from the seller's inventory into the market at its
/// price: one MULTI/EXEC.
fn list(seller: u64, num: u64) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("ZADD")
        .arg(MARKET)
        .arg(price(num))
        .arg(member(num, seller))
        .cmd("SREM")
        .arg(inventory(seller))
        .arg(item_id(num));
    pipe
}

/// Is market member `m` still listed at `lprice`, and can buyer `b` pay
/// it? One round trip.
fn still_for_sale(c: &mut Connection, m: &str, b: &str, lprice: i64) -> RedisResult<bool> {
    let (p, funds): (Option<f64>, i64) = redis::pipe()
        .cmd("ZSCORE")
        .arg(MARKET)
        .arg(m)
        .cmd("HGET")
        .arg(b)
        .arg("funds")
        .query(c)?;
    Ok(p == Some(lprice as f64) && lprice <= funds)
}

fn sold_twice() -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Client,
        "item removed from the market twice",
    ))
}

/// Pay the seller, charge the buyer, move the item: one MULTI/EXEC.
pub(crate) fn transfer(b: &str, s: &str, buyer: u64, num: u64, m: &str, p: i64) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("HINCRBY")
        .arg(s)
        .arg("funds")
        .arg(p)
        .cmd("HINCRBY")
        .arg(b)
        .arg("funds")
        .arg(-p)
        .cmd("SADD")
        .arg(inventory(buyer))
        .arg(item_id(num))
        .cmd("ZREM")
        .arg(MARKET)
        .arg(m);
    pipe
}

// ---------------------------------------------------------------- locks

/// Run `f` holding the lock `key`: acquire (counting a wait in `waits`),
/// run, release. `f` gets the point (CLOCK_BOOTTIME) its lease is safe
/// until, and must not write after it. A release that finds the lease gone
/// is an error: the critical section was not protected.
pub(crate) fn locked<T>(
    locker: &mut Locker,
    req: &Request,
    key: &str,
    waits: &mut u64,
    f: impl FnOnce(BootTime) -> RedisResult<T>,
) -> Result<T, String> {
    let lease = locker
        .acquire(key, req, None, &mut |_| *waits += 1)
        .map_err(|e| format!("acquire {key}: {e}"))?;
    let res = f(lease.valid_until);
    match locker.release(key, &lease.token) {
        Ok(Released::Released) => {}
        Ok(other) => return Err(format!("release {key}: {other:?}")),
        Err(e) => return Err(format!("release {key}: {e}")),
    }
    res.map_err(|e| format!("under lock {key}: {e}"))
}

pub(crate) fn lease_lost() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, "lease ran out before the write"))
}

/// list_item with a lock instead of WATCH.
pub(crate) fn list_locked(
    c: &mut Connection,
    locker: &mut Locker,
    req: &Request,
    key: &str,
    seller: u64,
    num: u64,
) -> Result<bool, String> {
    let inv = inventory(seller);
    let id = item_id(num);
    let mut waits = 0;
    locked(locker, req, key, &mut waits, |valid_until| {
        let has: bool = redis::cmd("SISMEMBER").arg(&inv).arg(&id).query(c)?;
        if !has {
            return Ok(false);
        }
        if valid_until.passed() {
            return Err(lease_lost());
        }
        let _: (i64, i64) = list(seller, num).query(c)?;
        Ok(true)
    })
}

/// The book's purchase_item_with_lock (owner token and lease included).
#[allow(clippy::too_many_arguments)]
pub(crate) fn purchase_locked(
    c: &mut Connection,
    locker: &mut Locker,
    req: &Request,
    key: &str,
    buyer: u64,
    num: u64,
    seller: u64,
    lprice: i64,
    retries: &mut u64,
) -> Result<Bought, String> {
    let (b, s, m) = (user(buyer), user(seller), member(num, seller));
    locked(locker, req, key, retries, |valid_until| {
        if !still_for_sale(c, &m, &b, lprice)? {
            return Ok(Bought::Stale);
        }
        if valid_until.passed() {
            return Err(lease_lost());
        }
        let (_, _, _, removed): (i64, i64, i64, i64) =
            transfer(&b, &s, buyer, num, &m, lprice).query(c)?;
        if removed != 1 {
            return Err(sold_twice());
        }
        Ok(Bought::Yes)
    })
}

pub(crate) fn lock_key(method: Method, m: &str) -> String {
    match method {
        Method::Fine => format!("{MARKET}{m}"),
        _ => MARKET.to_string(),
    }
}
