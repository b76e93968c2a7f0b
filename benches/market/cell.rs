//! One cell of the table: a method under a load mix, every seller and
//! buyer a thread with its own connection (and `Locker`), then the check.

use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use redis::Connection;
use rlock::{ConnectOptions, Locker, Request, Wait};

use crate::Config;
use crate::model::*;
use crate::support::{Redis, note};
use crate::trade::*;

pub(crate) const EMPTY_NAP: Duration = Duration::from_micros(200);

// ---------------------------------------------------------------- stats

#[derive(Default)]
pub(crate) struct SellerStats {
    pub(crate) listed: u64,
    pub(crate) ran_out: bool,
    pub(crate) errors: Vec<String>,
}

#[derive(Default)]
pub(crate) struct BuyerStats {
    pub(crate) bought: u64,
    /// WATCH: EXEC aborts; locks: acquires that had to wait.
    pub(crate) retries: u64,
    /// Purchases that found the item already sold when they looked.
    pub(crate) stale: u64,
    /// Purchases cut short by the end of the cell (WATCH retry loops).
    pub(crate) abandoned: u64,
    /// Time spent inside purchase calls.
    pub(crate) busy: Duration,
    pub(crate) errors: Vec<String>,
}

// ---------------------------------------------------------------- threads

pub(crate) struct Cell {
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) items: u64,
    pub(crate) run_for: Duration,
    pub(crate) barrier: Barrier,
    pub(crate) start: OnceLock<Instant>,
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
        let req = Request::builder(LOCK_TTL)
            .wait(Wait::For(LOCK_WAIT))
            .build()
            .expect("request");
        (conn, locker, req)
    }
}

pub(crate) fn seller(cell: &Cell, seller: u64) -> SellerStats {
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

pub(crate) fn buyer(cell: &Cell, buyer: u64) -> BuyerStats {
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
        // A price the simulation listed: a whole number, far below 2^53.
        #[allow(clippy::cast_possible_truncation, reason = "see above")]
        let lprice = lprice as i64;
        let t = Instant::now();
        let res = match locker.as_mut() {
            None => purchase_watch(
                &mut c,
                buyer,
                num,
                seller,
                lprice,
                deadline,
                &mut st.retries,
            )
            .map_err(|e| e.to_string()),
            Some(l) => {
                let key = lock_key(cell.method, m);
                purchase_locked(
                    &mut c,
                    l,
                    &req,
                    &key,
                    buyer,
                    num,
                    seller,
                    lprice,
                    &mut st.retries,
                )
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

pub(crate) struct Outcome {
    pub(crate) listed: u64,
    pub(crate) bought: u64,
    pub(crate) retries: u64,
    pub(crate) wait_ms: Option<f64>,
    pub(crate) stale: u64,
    pub(crate) abandoned: u64,
    pub(crate) ran_out: bool,
    pub(crate) problems: Vec<String>,
}

pub(crate) fn run_cell(redis: &Redis, cfg: &Config, mix: Mix, method: Method) -> Outcome {
    let mut c = redis.conn();
    seed(&mut c, mix, cfg.items);
    let cell = Arc::new(Cell {
        method,
        url: redis.url(),
        items: cfg.items,
        run_for: Duration::from_secs(cfg.seconds),
        barrier: Barrier::new(
            usize::try_from(mix.sellers + mix.buyers).expect("a thread count fits a usize"),
        ),
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
