//! The book's data model: users, inventories and the market ZSET, the
//! load mixes, seeding a cell and checking it afterwards.

use std::collections::HashMap;

use redis::Connection;

pub(crate) const MARKET: &str = "market:";
pub(crate) const BUYER_FUNDS: i64 = 1_000_000_000;
/// Item numbers of seller s are s * ITEM_BASE + n.
pub(crate) const ITEM_BASE: u64 = 1_000_000;

#[derive(Clone, Copy)]
pub(crate) struct Mix {
    pub(crate) sellers: u64,
    pub(crate) buyers: u64,
}

impl Mix {
    pub(crate) fn label(self) -> String {
        let s = |n: u64, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        format!("{}, {}", s(self.sellers, "seller"), s(self.buyers, "buyer"))
    }
}

pub(crate) const MIXES: [Mix; 3] = [
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

pub(crate) fn seller_id(i: u64) -> u64 {
    i + 1
}

pub(crate) fn buyer_id(i: u64) -> u64 {
    i + 101
}

pub(crate) fn user(id: u64) -> String {
    format!("users:{id}")
}

pub(crate) fn inventory(id: u64) -> String {
    format!("inventory:{id}")
}

pub(crate) fn item_id(num: u64) -> String {
    format!("Item{num}")
}

/// The market member of an item: `itemID.sellerID`.
pub(crate) fn member(num: u64, seller: u64) -> String {
    format!("Item{num}.{seller}")
}

/// A fixed pseudo-random price in 1..=100 (splitmix64 of the item number).
pub(crate) fn price(num: u64) -> i64 {
    let mut z = num.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    1 + (z % 100) as i64
}

/// "Item1000042" -> 1000042.
pub(crate) fn parse_item(id: &str) -> Option<u64> {
    id.strip_prefix("Item")?.parse().ok()
}

fn seed_user(c: &mut Connection, id: u64, name: &str, funds: i64) {
    redis::cmd("HSET")
        .arg(user(id))
        .arg("name")
        .arg(name)
        .arg("funds")
        .arg(funds)
        .exec(c)
        .expect("seed a user");
}

/// An empty Redis but for the mix's users: sellers with `items` items
/// each and no money, buyers with money and no items.
pub(crate) fn seed(c: &mut Connection, mix: Mix, items: u64) {
    redis::cmd("FLUSHALL").exec(c).expect("FLUSHALL");
    for i in 0..mix.sellers {
        let s = seller_id(i);
        seed_user(c, s, &format!("seller{s}"), 0);
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
        seed_user(c, b, &format!("buyer{b}"), BUYER_FUNDS);
    }
}

/// Everything that must hold after a cell, whatever the method: money
/// conserved, each item exactly once, each sale paid at its price, and the
/// counters the threads kept agree with what Redis holds.
pub(crate) fn check(
    c: &mut Connection,
    mix: Mix,
    items: u64,
    listed: u64,
    bought: u64,
) -> Vec<String> {
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
