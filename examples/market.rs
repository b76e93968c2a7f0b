//! `cargo run --release --example market [-- --seconds N] [--items N]`
//!
//! The marketplace simulation of "Redis in Action" section 6.2: sellers list
//! items from their inventories into the market, buyers buy them, and three
//! ways of keeping that correct are compared under three load mixes:
//!
//! * WATCH: optimistic transactions (WATCH / MULTI / EXEC, retried on abort),
//!   as in the book's `list_item` and `purchase_item`;
//! * coarse lock: one `rlock` lock on the whole market (key `market:`) around
//!   every listing and every purchase;
//! * fine lock: one `rlock` lock per item (key `market:<itemID.sellerID>`).
//!
//! Data model, as in the book:
//!
//! * `users:<id>`      HASH  name, funds
//! * `inventory:<id>`  SET   item IDs the user owns
//! * `market:`         ZSET  member `<itemID>.<sellerID>`, score = price
//!
//! Sellers are users 1..=5, buyers users 101..=105. Seller `s` starts with
//! `--items` items `Item<s*1000000+n>` (n = 0, 1, ...), each with a fixed
//! pseudo-random price of 1 to 100, and no money; every buyer starts with
//! 10^9 and no items. Every seller and every buyer is its own thread with its
//! own Redis connection (and, for the lock variants, its own `Locker`). A
//! seller lists its items in order; a buyer picks a random listed item
//! (ZRANDMEMBER, outside any lock: browsing) and tries to buy it.
//!
//! Columns: items listed, items bought, purchase retries (WATCH: EXEC
//! aborts; locks: acquires that found the lock busy and had to wait), and
//! average wait per purchase: the time buyers spent inside purchase calls
//! (retries, lock waits and purchases of items someone else bought first
//! included) divided by the items bought. Each cell ends with a consistency
//! check: money conserved, every item exactly once in some inventory or in
//! the market, every purchase paid at the listed price, no lease lost.
//!
//! Starts its own throwaway redis-server on a free loopback port.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, RedisResult};
use rlock::clock::BootTime;
use rlock::{ConnectOptions, Locker, Released, Request, Wait};

const MARKET: &str = "market:";
/// Lock names live under this prefix, as the book's `lock:` + name.
const LOCK_PREFIX: &str = "lock:";
/// Lease TTL and longest wait for a lock, as the book's lock_timeout and
/// acquire_timeout: far above any single operation here.
const LOCK_TTL: Duration = Duration::from_secs(10);
const LOCK_WAIT: Duration = Duration::from_secs(10);
const BUYER_FUNDS: i64 = 1_000_000_000;
/// Item numbers of seller s are s * ITEM_BASE + n.
const ITEM_BASE: u64 = 1_000_000;
/// How long a buyer sleeps when the market is empty.
const EMPTY_NAP: Duration = Duration::from_micros(200);

static REDIS_PID: AtomicU32 = AtomicU32::new(0);
static REDIS_DIR: OnceLock<PathBuf> = OnceLock::new();

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Method {
    Watch,
    Coarse,
    Fine,
}

impl Method {
    fn label(self) -> &'static str {
        match self {
            Method::Watch => "WATCH",
            Method::Coarse => "coarse lock",
            Method::Fine => "fine lock",
        }
    }
}

#[derive(Clone, Copy)]
struct Mix {
    sellers: u64,
    buyers: u64,
}

impl Mix {
    fn label(self) -> String {
        let s = |n: u64, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        format!("{}, {}", s(self.sellers, "seller"), s(self.buyers, "buyer"))
    }
}

const MIXES: [Mix; 3] = [
    Mix {
        sellers: 1,
        buyers: 1,
    },
    Mix {
        sellers: 5,
        buyers: 1,
    },
    Mix {
        sellers: 5,
        buyers: 5,
    },
];
const METHODS: [Method; 3] = [Method::Watch, Method::Coarse, Method::Fine];

fn seller_id(i: u64) -> u64 {
    i + 1
}

fn buyer_id(i: u64) -> u64 {
    i + 101
}

fn user(id: u64) -> String {
    format!("users:{id}")
}

fn inventory(id: u64) -> String {
    format!("inventory:{id}")
}

fn item_id(num: u64) -> String {
    format!("Item{num}")
}

/// The market member of an item: `itemID.sellerID`.
fn member(num: u64, seller: u64) -> String {
    format!("Item{num}.{seller}")
}

/// A fixed pseudo-random price in 1..=100 (splitmix64 of the item number).
fn price(num: u64) -> i64 {
    let mut z = num.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    1 + (z % 100) as i64
}

/// "Item1000042" -> 1000042.
fn parse_item(id: &str) -> Option<u64> {
    id.strip_prefix("Item")?.parse().ok()
}

// ---------------------------------------------------------------- config

struct Config {
    seconds: u64,
    items: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: cargo run --release --example market -- [--seconds N] [--items N]\n\
         \x20 --seconds N  how long each of the 9 cells runs (default 5)\n\
         \x20 --items N    items each seller starts with (default 20000 per second\n\
         \x20              of --seconds, at least 100000, at most 999999)"
    );
    std::process::exit(2);
}

fn parse_args() -> Config {
    let mut cfg = Config {
        seconds: 5,
        items: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            match args.next().and_then(|v| v.parse::<u64>().ok()) {
                Some(v) if v > 0 => v,
                _ => {
                    eprintln!("{name} needs a positive integer");
                    usage()
                }
            }
        };
        match a.as_str() {
            "--seconds" => cfg.seconds = num("--seconds"),
            "--items" => cfg.items = num("--items"),
            "-h" | "--help" => usage(),
            _ => {
                eprintln!("unknown argument {a:?}");
                usage()
            }
        }
    }
    if cfg.items == 0 {
        // Far more than a seller lists in that time here (about 7000/s).
        cfg.items = (20_000 * cfg.seconds).clamp(100_000, ITEM_BASE - 1);
    }
    if cfg.items >= ITEM_BASE {
        eprintln!("--items must be below {ITEM_BASE}");
        usage()
    }
    cfg
}

// ---------------------------------------------------------------- stats

#[derive(Default)]
struct SellerStats {
    listed: u64,
    ran_out: bool,
    errors: Vec<String>,
}

#[derive(Default)]
struct BuyerStats {
    bought: u64,
    /// WATCH: EXEC aborts; locks: acquires that had to wait.
    retries: u64,
    /// Purchases that found the item already sold when they looked.
    stale: u64,
    /// Purchases cut short by the end of the cell (WATCH retry loops).
    abandoned: u64,
    /// Time spent inside purchase calls.
    busy: Duration,
    errors: Vec<String>,
}

fn note(errors: &mut Vec<String>, e: String) {
    // Keep a few: enough to explain a FAIL, never a flood.
    if errors.len() < 3 {
        errors.push(e);
    }
}

/// What one purchase attempt came to.
enum Bought {
    Yes,
    /// Gone (sold to someone else), repriced, or not affordable.
    Stale,
    /// The cell ended while a WATCH purchase was still retrying.
    Abandoned,
}

// ---------------------------------------------------------------- WATCH

/// The book's list_item: WATCH the seller's inventory, check the item is
/// still there, then move it into the market in one MULTI/EXEC.
fn list_watch(c: &mut Connection, seller: u64, num: u64) -> RedisResult<bool> {
    let inv = inventory(seller);
    let id = item_id(num);
    loop {
        redis::cmd("WATCH").arg(&inv).exec(c)?;
        let has: bool = redis::cmd("SISMEMBER").arg(&inv).arg(&id).query(c)?;
        if !has {
            redis::cmd("UNWATCH").exec(c)?;
            return Ok(false);
        }
        let done: Option<(i64, i64)> = redis::pipe()
            .atomic()
            .cmd("ZADD")
            .arg(MARKET)
            .arg(price(num))
            .arg(member(num, seller))
            .cmd("SREM")
            .arg(&inv)
            .arg(&id)
            .query(c)?;
        if done.is_some() {
            return Ok(true);
        }
        // Only this seller touches its inventory, so this never happens.
    }
}

/// The book's purchase_item: WATCH the market and the buyer, check price
/// and funds, then transfer money and item in one MULTI/EXEC; an aborted
/// EXEC (someone changed the market meanwhile) is retried.
fn purchase_watch(
    c: &mut Connection,
    buyer: u64,
    num: u64,
    seller: u64,
    lprice: i64,
    deadline: Instant,
    st: &mut BuyerStats,
) -> RedisResult<Bought> {
    let (b, s, m) = (user(buyer), user(seller), member(num, seller));
    loop {
        redis::cmd("WATCH").arg(MARKET).arg(&b).exec(c)?;
        let (p, funds): (Option<f64>, i64) = redis::pipe()
            .cmd("ZSCORE")
            .arg(MARKET)
            .arg(&m)
            .cmd("HGET")
            .arg(&b)
            .arg("funds")
            .query(c)?;
        if p != Some(lprice as f64) || lprice > funds {
            redis::cmd("UNWATCH").exec(c)?;
            return Ok(Bought::Stale);
        }
        let done: Option<(i64, i64, i64, i64)> =
            transfer(&b, &s, buyer, num, &m, lprice).query(c)?;
        match done {
            Some((_, _, _, 1)) => return Ok(Bought::Yes),
            Some(_) => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "item removed from the market twice",
                )));
            }
            None => {
                st.retries += 1;
                if Instant::now() >= deadline {
                    return Ok(Bought::Abandoned);
                }
            }
        }
    }
}

/// Pay the seller, charge the buyer, move the item: one MULTI/EXEC.
fn transfer(b: &str, s: &str, buyer: u64, num: u64, m: &str, p: i64) -> redis::Pipeline {
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
fn locked<T>(
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

fn lease_lost() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, "lease ran out before the write"))
}

/// list_item with a lock instead of WATCH.
fn list_locked(
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
        let _: (i64, i64) = redis::pipe()
            .atomic()
            .cmd("ZADD")
            .arg(MARKET)
            .arg(price(num))
            .arg(member(num, seller))
            .cmd("SREM")
            .arg(&inv)
            .arg(&id)
            .query(c)?;
        Ok(true)
    })
}

/// The book's purchase_item_with_lock (owner token and lease included).
#[allow(clippy::too_many_arguments)]
fn purchase_locked(
    c: &mut Connection,
    locker: &mut Locker,
    req: &Request,
    key: &str,
    buyer: u64,
    num: u64,
    seller: u64,
    lprice: i64,
    st: &mut BuyerStats,
) -> Result<Bought, String> {
    let (b, s, m) = (user(buyer), user(seller), member(num, seller));
    locked(locker, req, key, &mut st.retries, |valid_until| {
        let (p, funds): (Option<f64>, i64) = redis::pipe()
            .cmd("ZSCORE")
            .arg(MARKET)
            .arg(&m)
            .cmd("HGET")
            .arg(&b)
            .arg("funds")
            .query(c)?;
        if p != Some(lprice as f64) || lprice > funds {
            return Ok(Bought::Stale);
        }
        if valid_until.passed() {
            return Err(lease_lost());
        }
        let (_, _, _, removed): (i64, i64, i64, i64) =
            transfer(&b, &s, buyer, num, &m, lprice).query(c)?;
        if removed != 1 {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "item removed from the market twice",
            )));
        }
        Ok(Bought::Yes)
    })
}

fn lock_key(method: Method, m: &str) -> String {
    match method {
        Method::Fine => format!("{MARKET}{m}"),
        _ => MARKET.to_string(),
    }
}

// ---------------------------------------------------------------- threads

struct Cell {
    method: Method,
    url: String,
    items: u64,
    run_for: Duration,
    barrier: Barrier,
    start: OnceLock<Instant>,
}

impl Cell {
    /// Wait until every thread is connected; then all run until the same
    /// deadline.
    fn go(&self) -> Instant {
        self.barrier.wait();
        *self.start.get_or_init(Instant::now) + self.run_for
    }

    fn connect(&self) -> (Connection, Option<Locker>, Request) {
        let conn = redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection())
            .expect("connect to redis");
        let locker = (self.method != Method::Watch).then(|| {
            let opts = ConnectOptions {
                urls: vec![self.url.clone()],
                ..ConnectOptions::default()
            };
            Locker::connect(&opts, LOCK_PREFIX).expect("connect the locker")
        });
        let mut req = Request::new(LOCK_TTL);
        req.wait = Wait::For(LOCK_WAIT);
        (conn, locker, req)
    }
}

fn seller(cell: &Cell, seller: u64) -> SellerStats {
    let (mut c, mut locker, req) = cell.connect();
    let mut st = SellerStats::default();
    let deadline = cell.go();
    let mut n = 0;
    while Instant::now() < deadline {
        if n == cell.items {
            st.ran_out = true;
            break;
        }
        let num = seller * ITEM_BASE + n;
        n += 1;
        let res = match locker.as_mut() {
            None => list_watch(&mut c, seller, num).map_err(|e| e.to_string()),
            Some(l) => {
                let key = lock_key(cell.method, &member(num, seller));
                list_locked(&mut c, l, &req, &key, seller, num)
            }
        };
        match res {
            Ok(true) => st.listed += 1,
            Ok(false) => note(&mut st.errors, format!("{} not in inventory", item_id(num))),
            Err(e) => note(&mut st.errors, e),
        }
    }
    st
}

fn buyer(cell: &Cell, buyer: u64) -> BuyerStats {
    let (mut c, mut locker, req) = cell.connect();
    let mut st = BuyerStats::default();
    let deadline = cell.go();
    while Instant::now() < deadline {
        // Browse: a random listed item and its price, no lock, no WATCH.
        let pick: Vec<String> = match redis::cmd("ZRANDMEMBER")
            .arg(MARKET)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut c)
        {
            Ok(p) => p,
            Err(e) => {
                note(&mut st.errors, format!("browse: {e}"));
                break;
            }
        };
        let [m, p] = &pick[..] else {
            thread::sleep(EMPTY_NAP);
            continue;
        };
        let parsed = m.rsplit_once('.').and_then(|(id, s)| {
            Some((
                parse_item(id)?,
                s.parse::<u64>().ok()?,
                p.parse::<f64>().ok()?,
            ))
        });
        let Some((num, seller, lprice)) = parsed else {
            note(&mut st.errors, format!("bad market entry {m:?} {p:?}"));
            break;
        };
        let lprice = lprice as i64;
        let t = Instant::now();
        let res = match locker.as_mut() {
            None => purchase_watch(&mut c, buyer, num, seller, lprice, deadline, &mut st)
                .map_err(|e| e.to_string()),
            Some(l) => {
                let key = lock_key(cell.method, m);
                purchase_locked(&mut c, l, &req, &key, buyer, num, seller, lprice, &mut st)
            }
        };
        st.busy += t.elapsed();
        match res {
            Ok(Bought::Yes) => st.bought += 1,
            Ok(Bought::Stale) => st.stale += 1,
            Ok(Bought::Abandoned) => st.abandoned += 1,
            Err(e) => note(&mut st.errors, e),
        }
    }
    st
}

// ---------------------------------------------------------------- a cell

struct Outcome {
    listed: u64,
    bought: u64,
    retries: u64,
    wait_ms: Option<f64>,
    stale: u64,
    abandoned: u64,
    ran_out: bool,
    problems: Vec<String>,
}

fn seed(c: &mut Connection, mix: Mix, items: u64) {
    redis::cmd("FLUSHALL").exec(c).expect("FLUSHALL");
    for i in 0..mix.sellers {
        let s = seller_id(i);
        redis::cmd("HSET")
            .arg(user(s))
            .arg("name")
            .arg(format!("seller{s}"))
            .arg("funds")
            .arg(0)
            .exec(c)
            .expect("seed seller");
        let all: Vec<u64> = (0..items).map(|n| s * ITEM_BASE + n).collect();
        for chunk in all.chunks(10_000) {
            let ids: Vec<String> = chunk.iter().map(|&n| item_id(n)).collect();
            redis::cmd("SADD")
                .arg(inventory(s))
                .arg(ids)
                .exec(c)
                .expect("seed inventory");
        }
    }
    for i in 0..mix.buyers {
        let b = buyer_id(i);
        redis::cmd("HSET")
            .arg(user(b))
            .arg("name")
            .arg(format!("buyer{b}"))
            .arg("funds")
            .arg(BUYER_FUNDS)
            .exec(c)
            .expect("seed buyer");
    }
}

fn run_cell(redis: &Redis, cfg: &Config, mix: Mix, method: Method) -> Outcome {
    let mut c = redis.conn();
    seed(&mut c, mix, cfg.items);
    let cell = Arc::new(Cell {
        method,
        url: redis.url(),
        items: cfg.items,
        run_for: Duration::from_secs(cfg.seconds),
        barrier: Barrier::new((mix.sellers + mix.buyers) as usize),
        start: OnceLock::new(),
    });
    let sellers: Vec<_> = (0..mix.sellers)
        .map(|i| {
            let cell = Arc::clone(&cell);
            thread::spawn(move || seller(&cell, seller_id(i)))
        })
        .collect();
    let buyers: Vec<_> = (0..mix.buyers)
        .map(|i| {
            let cell = Arc::clone(&cell);
            thread::spawn(move || buyer(&cell, buyer_id(i)))
        })
        .collect();
    let sellers: Vec<SellerStats> = sellers
        .into_iter()
        .map(|h| h.join().expect("seller thread"))
        .collect();
    let buyers: Vec<BuyerStats> = buyers
        .into_iter()
        .map(|h| h.join().expect("buyer thread"))
        .collect();

    let listed = sellers.iter().map(|s| s.listed).sum();
    let bought: u64 = buyers.iter().map(|b| b.bought).sum();
    let busy: Duration = buyers.iter().map(|b| b.busy).sum();
    let mut problems: Vec<String> = sellers
        .iter()
        .flat_map(|s| s.errors.iter().cloned())
        .chain(buyers.iter().flat_map(|b| b.errors.iter().cloned()))
        .collect();
    problems.extend(check(&mut c, mix, cfg.items, listed, bought));
    Outcome {
        listed,
        bought,
        retries: buyers.iter().map(|b| b.retries).sum(),
        wait_ms: (bought > 0).then(|| busy.as_secs_f64() * 1000.0 / bought as f64),
        stale: buyers.iter().map(|b| b.stale).sum(),
        abandoned: buyers.iter().map(|b| b.abandoned).sum(),
        ran_out: sellers.iter().any(|s| s.ran_out),
        problems,
    }
}

/// Everything that must hold after a cell, whatever the method: money
/// conserved, each item exactly once, each sale paid at its price, and the
/// counters the threads kept agree with what Redis holds.
fn check(c: &mut Connection, mix: Mix, items: u64, listed: u64, bought: u64) -> Vec<String> {
    let mut bad = Vec::new();
    let funds = |c: &mut Connection, id: u64| -> i64 {
        redis::cmd("HGET")
            .arg(user(id))
            .arg("funds")
            .query(c)
            .expect("HGET funds")
    };
    let members = |c: &mut Connection, key: String| -> Vec<String> {
        redis::cmd("SMEMBERS").arg(key).query(c).expect("SMEMBERS")
    };
    // Where each item is: seller inventory, market, or buyer inventory.
    let mut seen: HashMap<u64, u32> = HashMap::new();
    let mut see = |num: u64| *seen.entry(num).or_default() += 1;

    let mut total = 0;
    let mut earned: HashMap<u64, i64> = HashMap::new();
    for i in 0..mix.sellers {
        let s = seller_id(i);
        total += funds(c, s);
        for id in members(c, inventory(s)) {
            match parse_item(&id) {
                Some(n) => see(n),
                None => bad.push(format!("foreign item {id:?} in {}", inventory(s))),
            }
        }
    }
    let market: Vec<String> = redis::cmd("ZRANGE")
        .arg(MARKET)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .expect("ZRANGE market");
    for pair in market.chunks(2) {
        let ok = pair[0].rsplit_once('.').and_then(|(id, s)| {
            let n = parse_item(id)?;
            let p: f64 = pair.get(1)?.parse().ok()?;
            (s.parse::<u64>().ok()? == n / ITEM_BASE && p == price(n) as f64).then_some(n)
        });
        match ok {
            Some(n) => see(n),
            None => bad.push(format!("bad market entry {pair:?}")),
        }
    }
    let in_market = (market.len() / 2) as u64;
    let mut in_buyers = 0;
    for i in 0..mix.buyers {
        let b = buyer_id(i);
        let f = funds(c, b);
        total += f;
        let mut spent = 0;
        for id in members(c, inventory(b)) {
            let Some(n) = parse_item(&id) else {
                bad.push(format!("foreign item {id:?} in {}", inventory(b)));
                continue;
            };
            see(n);
            in_buyers += 1;
            spent += price(n);
            *earned.entry(n / ITEM_BASE).or_default() += price(n);
        }
        if BUYER_FUNDS - f != spent {
            bad.push(format!(
                "buyer {b} paid {} for items worth {spent}",
                BUYER_FUNDS - f
            ));
        }
    }
    for i in 0..mix.sellers {
        let s = seller_id(i);
        let (got, due) = (funds(c, s), earned.get(&s).copied().unwrap_or(0));
        if got != due {
            bad.push(format!("seller {s} has {got}, sold items worth {due}"));
        }
    }
    let want_total = BUYER_FUNDS * mix.buyers as i64;
    if total != want_total {
        bad.push(format!("total funds {total}, expected {want_total}"));
    }
    let expected = mix.sellers * items;
    let missing = (0..mix.sellers)
        .flat_map(|i| (0..items).map(move |n| seller_id(i) * ITEM_BASE + n))
        .filter(|n| !seen.contains_key(n))
        .count();
    let doubled = seen.values().filter(|&&k| k > 1).count();
    if seen.len() as u64 != expected || missing > 0 || doubled > 0 {
        bad.push(format!(
            "{} distinct items of {expected}: {missing} missing, {doubled} in two places",
            seen.len()
        ));
    }
    if in_buyers != bought {
        bad.push(format!(
            "{bought} purchases counted, {in_buyers} items bought"
        ));
    }
    if in_market + in_buyers != listed {
        bad.push(format!(
            "{listed} listings counted, {in_market} in the market + {in_buyers} sold"
        ));
    }
    bad
}

// ---------------------------------------------------------------- output

/// The book's table 6.3 (60 s per cell, Python, 2013 hardware), as printed
/// in the article: listed, bought, retries, average wait per purchase.
const ARTICLE: [[(&str, &str, &str, &str); 3]; 3] = [
    [
        ("145 000", "27 000", "80 000", "14 ms"),
        ("51 000", "50 000", "0", "1 ms"),
        ("113 000", "110 000", "0", "<1 ms"),
    ],
    [
        ("331 000", "<200", "50 000", "150 ms"),
        ("68 000", "13 000", "<10", "5 ms"),
        ("192 000", "36 000", "0", "<2 ms"),
    ],
    [
        ("206 000", "<600", "161 000", "498 ms"),
        ("21 000", "20 500", "0", "14 ms"),
        ("116 000", "111 000", "0", "<3 ms"),
    ],
];

fn header() {
    println!(
        "{:<20} {:<12} {:>9} {:>9} {:>9} {:>10} {:>8}  check",
        "mix", "method", "listed", "bought", "retries", "wait ms", "stale"
    );
}

fn row(mix: Mix, method: Method, o: &Outcome) {
    let wait = o.wait_ms.map_or("-".to_string(), |w| format!("{w:.3}"));
    let check = if o.problems.is_empty() { "OK" } else { "FAIL" };
    println!(
        "{:<20} {:<12} {:>9} {:>9} {:>9} {:>10} {:>8}  {check}",
        mix.label(),
        method.label(),
        o.listed,
        o.bought,
        o.retries,
        wait,
        o.stale
    );
    if o.abandoned > 0 {
        println!(
            "{:33}({} purchase(s) cut short mid-retry by the end of the cell)",
            "", o.abandoned
        );
    }
    if o.ran_out {
        println!("{:33}(a seller ran out of items: raise --items)", "");
    }
    for p in &o.problems {
        println!("{:33}! {p}", "");
    }
}

fn main() {
    let cfg = parse_args();
    let started = Instant::now();
    let redis = Redis::start();
    REDIS_PID.store(redis.child.id(), Ordering::SeqCst);
    let _ = REDIS_DIR.set(redis.dir.clone());
    // The release profile aborts on panic, skipping Drop: kill Redis first.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        kill_redis();
        default_hook(info);
    }));
    watchdog(Duration::from_secs(9 * cfg.seconds * 4 + 120));

    println!("Redis in Action 6.2 market simulation");
    println!(
        "  redis-server {} on 127.0.0.1:{}, {} CPUs; {} s per cell, {} items per seller",
        redis_version(&redis),
        redis.port,
        thread::available_parallelism().map_or(0, |n| n.get()),
        cfg.seconds,
        cfg.items
    );
    println!(
        "  retries: WATCH = EXEC aborts; locks = acquires that had to wait (rlock, TTL {}s)",
        LOCK_TTL.as_secs()
    );
    println!(
        "  wait ms: buyer time in purchase calls / items bought; \
         stale: picked item already gone when the purchase looked"
    );
    println!();
    header();
    let mut failed = 0;
    for mix in MIXES {
        for method in METHODS {
            let o = run_cell(&redis, &cfg, mix, method);
            failed += usize::from(!o.problems.is_empty());
            row(mix, method, &o);
        }
    }

    println!();
    println!("The article's table (60 s per cell):");
    println!(
        "{:<20} {:<12} {:>9} {:>9} {:>9} {:>10}",
        "mix", "method", "listed", "bought", "retries", "wait"
    );
    for (mix, cells) in MIXES.iter().zip(ARTICLE) {
        for (method, (l, b, r, w)) in METHODS.iter().zip(cells) {
            println!(
                "{:<20} {:<12} {l:>9} {b:>9} {r:>9} {w:>10}",
                mix.label(),
                method.label()
            );
        }
    }
    println!();
    println!(
        "total time {:.1} s; consistency: {}",
        started.elapsed().as_secs_f64(),
        if failed == 0 {
            "all 9 cells OK".to_string()
        } else {
            format!("{failed} cells FAILED")
        }
    );
    drop(redis);
    if failed > 0 {
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------- redis

#[path = "../tests/support/redis_server.rs"]
mod redis_server;
use redis_server::Redis;

fn redis_version(r: &Redis) -> String {
    let text: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut r.conn())
        .expect("INFO server");
    text.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string()
}

/// Kill Redis and remove its directory: for paths that skip Drop.
fn kill_redis() {
    let pid = REDIS_PID.load(Ordering::SeqCst);
    if pid != 0 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
    if let Some(dir) = REDIS_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Kill Redis and exit if the run takes far too long.
fn watchdog(limit: Duration) {
    thread::spawn(move || {
        thread::sleep(limit);
        eprintln!("market: still running after {limit:?}; giving up");
        kill_redis();
        std::process::exit(2);
    });
}
