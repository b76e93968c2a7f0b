//! `make bench-market`, or `cargo bench --bench market [-- --seconds N]
//! [--items N]`
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
//!
//! Layout: this file reads the arguments and prints the table; `model.rs`
//! is the book's data model (seeding and the consistency check),
//! `trade.rs` the three methods and listing and buying under each,
//! `cell.rs` one cell's seller and buyer threads (each uses only the ones
//! before it). The servers and the watchdog come from
//! `rlock_test_support::bench` (tests/support), as for the `cli` bench.

// A test or bench binary: its `pub` items only share helpers between its
// own modules (tests/support is a crate of its own), so the lint has nothing
// to say here.
#![allow(unreachable_pub)]

use std::thread;
use std::time::{Duration, Instant};

use rlock_test_support::bench as support;

mod cell;
mod model;
mod trade;

use cell::{Outcome, run_cell};
use model::{ITEM_BASE, MIXES, Mix};
use support::{kill_watched, redis_version, start_redis, watchdog};
use trade::{METHODS, Method};

// ---------------------------------------------------------------- config

pub(crate) struct Config {
    pub(crate) seconds: u64,
    pub(crate) items: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: cargo bench --bench market -- [--seconds N] [--items N]\n\
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
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
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
    let redis = start_redis(&[]);
    // A panic may skip Drop (the release profile aborts): kill Redis first.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        kill_watched();
        default_hook(info);
    }));
    watchdog("market", Duration::from_secs(9 * cfg.seconds * 4 + 120));

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
        trade::LOCK_TTL.as_secs()
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
