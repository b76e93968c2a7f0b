//! The majority reads, on answers made up for 3 and 5 masters.

use super::*;
use crate::lock::HolderInfo;

fn holder(token: &str, fence: u64, ttl_ms: u64) -> HolderStatus {
    HolderStatus {
        mode: "exclusive".into(),
        host: "h".into(),
        pid: 7,
        since_ms: 1_000,
        ttl_ms,
        count: 1,
        fence,
        token_digest: token.into(),
        ..HolderStatus::default()
    }
}

fn free(key: &str) -> Status {
    Status {
        key: key.into(),
        ..Status::default()
    }
}

fn held(key: &str, hs: Vec<HolderStatus>) -> Status {
    Status {
        kind: "exclusive".into(),
        held: true,
        limit: 1,
        fence: hs.iter().map(|h| h.fence).max().unwrap_or(0),
        holders: hs,
        ..free(key)
    }
}

fn refs(s: &[Status]) -> Vec<&Status> {
    s.iter().collect()
}

#[test]
fn a_holder_on_a_majority_holds_whichever_master_answers_first() {
    // The issue's case: master 1 was frozen while the others granted.
    for order in [[0, 1, 2], [1, 0, 2], [2, 1, 0]] {
        let masters = [
            free("k"),
            held("k", vec![holder("t", 5, 19_000)]),
            held("k", vec![holder("t", 5, 18_000)]),
        ];
        let answers: Vec<&Status> = order.iter().map(|&i| &masters[i]).collect();
        let st = status_on_majority("k", &answers, 2);
        assert!(st.held);
        assert_eq!((st.kind.as_str(), st.limit, st.fence), ("exclusive", 1, 5));
        assert_eq!(st.holders.len(), 1);
        // The lease a majority still has: the 2nd longest.
        assert_eq!(st.holders[0].ttl_ms, 18_000);
    }
}

#[test]
fn a_holder_on_a_minority_does_not_hold() {
    let masters = [free("k"), free("k"), held("k", vec![holder("t", 5, 9_000)])];
    let st = status_on_majority("k", &refs(&masters), 2);
    assert!(!st.held && st.holders.is_empty(), "{st:?}");
    assert_eq!((st.kind.as_str(), st.limit), ("", 0));
    // Two holders, each on a minority of 5: nobody holds.
    let masters = [
        held("k", vec![holder("a", 5, 9_000)]),
        held("k", vec![holder("a", 5, 9_000)]),
        held("k", vec![holder("b", 6, 9_000)]),
        held("k", vec![holder("b", 6, 9_000)]),
        free("k"),
    ];
    assert!(!status_on_majority("k", &refs(&masters), 3).held);
}

#[test]
fn holders_are_told_apart_by_token_not_by_fence() {
    // The master outside the granting majority gave the same token another
    // fence: the token still holds on all three, at the majority's fence.
    let mut odd = holder("t", 3, 9_000);
    odd.count = 2;
    let masters = [
        held("k", vec![odd]),
        held("k", vec![holder("t", 8, 9_000)]),
        held("k", vec![holder("t", 8, 9_000)]),
    ];
    let st = status_on_majority("k", &refs(&masters), 2);
    assert_eq!(st.holders.len(), 1);
    assert_eq!((st.holders[0].fence, st.holders[0].count), (8, 2));
    // The same fence for two tokens (counters apart) is two holders, and
    // neither has a majority.
    let masters = [
        held("k", vec![holder("a", 8, 9_000)]),
        held("k", vec![holder("b", 8, 9_000)]),
        free("k"),
    ];
    assert!(!status_on_majority("k", &refs(&masters), 2).held);
}

#[test]
fn figures_are_what_a_majority_reports_at_least() {
    let mut a = free("k");
    a.waiters = 3;
    a.fence = 10;
    let mut b = free("k");
    b.waiters = 1;
    b.fence = 9;
    b.kind = "exclusive".into();
    b.limit = 1;
    b.oldest_wait_since_ms = Some(500);
    let c = free("k");
    let st = status_on_majority("k", &[&a, &b, &c], 2);
    assert_eq!((st.waiters, st.fence), (1, 9));
    assert_eq!(st.oldest_wait_since_ms, Some(500));
    assert_eq!(st.kind, "exclusive");
}

#[test]
fn list_takes_the_union_and_decides_each_lock() {
    let answers = vec![
        vec![held("a", vec![holder("x", 1, 9_000)])],
        vec![
            held("a", vec![holder("x", 1, 9_000)]),
            held("b", vec![holder("y", 1, 9_000)]),
        ],
        vec![
            held("b", vec![holder("y", 1, 9_000)]),
            held("c", vec![holder("z", 1, 9_000)]),
        ],
    ];
    let keys: Vec<String> = list_on_majority(&answers, 2)
        .into_iter()
        .map(|s| s.key)
        .collect();
    // c is on one master only.
    assert_eq!(keys, ["a", "b"]);
    // A master that did not answer is not there at all: with two answers
    // of three, a lock one of them lists is on no majority.
    assert!(list_on_majority(&answers[..2], 2)[0].key == "a");
    assert_eq!(list_on_majority(&answers[1..2], 2).len(), 0);
}

fn event(event: &str, at: u64, pid: u32, fence: Option<u64>) -> Event {
    Event {
        event: event.into(),
        at,
        holder: Some(HolderInfo {
            host: "h".into(),
            pid,
            ..HolderInfo::default()
        }),
        fence,
        ..Event::default()
    }
}

fn view(status: Status, grants: u64, last: Option<Event>) -> LockView {
    LockView {
        status,
        now_ms: 100_000,
        oldest_wait: None,
        grants_last_minute: grants,
        last_event: last,
        counters: Counters {
            grants,
            ..Counters::default()
        },
        renewed_ms: None,
    }
}

#[test]
fn the_overview_decides_each_lock_and_its_figures() {
    let hold = || held("k", vec![holder("t", 4, 9_000)]);
    let answers = vec![
        // Master 1 missed the grant, and had an attempt of its own given back.
        vec![view(
            held("k", vec![holder("u", 9, 9_000)]),
            5,
            Some(event("granted", 99_000, 8, Some(9))),
        )],
        vec![view(hold(), 2, Some(event("granted", 90_000, 7, Some(4))))],
        vec![view(hold(), 1, Some(event("granted", 90_001, 7, Some(4))))],
    ];
    let v = overview_on_majority(&answers, 2, false);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].status.holders.len(), 1);
    assert_eq!(v[0].status.holders[0].token_digest, "t");
    assert_eq!((v[0].grants_last_minute, v[0].counters.grants), (2, 2));
    assert_eq!(v[0].last_event.as_ref().unwrap().at, 90_001);
    // Held by nobody on a majority, waited for by nobody: not in use.
    let answers = vec![
        vec![view(held("k", vec![holder("t", 4, 9_000)]), 1, None)],
        vec![],
        vec![],
    ];
    assert!(overview_on_majority(&answers, 2, false).is_empty());
    // For metrics, an idle lock stays, with the counters a majority has.
    let idle = |grants| vec![view(held("k", vec![]), grants, None)];
    let answers = vec![idle(3), idle(2), vec![]];
    let v = overview_on_majority(&answers, 2, true);
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].counters.grants, v[0].status.holders.len()), (2, 0));
}

#[test]
fn history_shows_the_events_a_majority_has() {
    let answers = vec![
        // Master 1: an attempt it alone granted and gave back.
        vec![
            event("granted", 5_000, 8, Some(9)),
            event("released", 5_010, 8, Some(9)),
        ],
        vec![
            event("granted", 1_000, 7, Some(4)),
            event("released", 9_000, 7, Some(4)),
        ],
        vec![
            event("granted", 1_002, 7, Some(4)),
            // Recorded without its grant's record (fence unknown here).
            event("released", 9_001, 7, None),
        ],
    ];
    let h = history_on_majority(&answers, 2, 10);
    let got: Vec<(&str, u64, Option<u64>)> = h
        .iter()
        .map(|e| (e.event.as_str(), e.at, e.fence))
        .collect();
    assert_eq!(
        got,
        [("granted", 1_000, Some(4)), ("released", 9_000, Some(4))]
    );
    // The last `limit` only.
    assert_eq!(history_on_majority(&answers, 2, 1)[0].event, "released");
}

#[test]
fn history_keeps_repeated_events_apart() {
    // One waiter timed out twice in a row (a kind without a fence): each
    // master's two records are two events, not one.
    let e = |at| event("timeout", at, 7, None);
    let answers = vec![
        vec![e(1_000), e(1_500)],
        vec![e(1_003), e(1_502)],
        vec![e(1_001)],
    ];
    let at: Vec<u64> = history_on_majority(&answers, 2, 10)
        .iter()
        .map(|e| e.at)
        .collect();
    assert_eq!(at, [1_001, 1_500]);
    // Records further apart than SAME_EVENT are different events.
    let far = crate::duration::millis(SAME_EVENT) + 1;
    let answers = vec![vec![e(1_000)], vec![e(1_000 + far)], vec![]];
    assert!(history_on_majority(&answers, 2, 10).is_empty());
}

#[test]
fn a_break_by_fence_names_the_majority_holder_on_every_master() {
    let masters = [
        held("k", vec![holder("t", 3, 9_000)]),
        held("k", vec![holder("t", 8, 9_000)]),
        held("k", vec![holder("t", 8, 9_000)]),
    ];
    // By the majority's fence or by the odd one: the token either way.
    for f in [8, 3] {
        let (who, named) = named_holders(&refs(&masters), &[f], 2);
        assert_eq!((who, named), (vec!["t".to_string()], vec![f]));
    }
    // A holder on a minority is no holder to break.
    let masters = [held("k", vec![holder("u", 3, 9_000)]), free("k"), free("k")];
    let (who, named) = named_holders(&refs(&masters), &[3], 2);
    assert!(who.is_empty() && named.is_empty());
}

/// A break marked on a majority shows, whichever master answers first
/// (found in review: the first record, from the master that missed the
/// break, hid it); on a minority it does not.
#[test]
fn a_break_shows_where_a_majority_carries_its_mark() {
    let mark = Some(crate::lock::Breaking {
        by: "ops@h".into(),
        reason: "r".into(),
        since_ms: 5,
    });
    let marked = |b: bool| HolderStatus {
        breaking: if b { mark.clone() } else { None },
        ..holder("t", 7, 1000)
    };
    let a = held("k", vec![marked(false)]);
    let b = held("k", vec![marked(true)]);
    let c = held("k", vec![marked(true)]);
    let hs = holders_on_majority(&[&a, &b, &c], 2);
    assert_eq!(hs[0].breaking, mark);
    let hs = holders_on_majority(&[&a, &a, &c], 2);
    assert_eq!(hs[0].breaking, None);
}

/// A waiter told apart by `token`, with its priority and join time.
fn w(token: &str, priority: i64, since_ms: u64) -> WaiterStatus {
    WaiterStatus {
        host: "h".into(),
        priority,
        since_ms,
        token_digest: token.into(),
        ..WaiterStatus::default()
    }
}

/// A free lock's status on a master that lists `ws` as its waiters.
fn queued(ws: Vec<WaiterStatus>) -> Status {
    Status {
        waiters: ws.len() as u64,
        queue: ws,
        ..free("k")
    }
}

/// A waiter shows when a majority of masters lists it, in queue order.
#[test]
fn waiters_show_where_a_majority_lists_them() {
    let a = queued(vec![w("x", 0, 5), w("y", 0, 6), w("z", 0, 7)]);
    let b = queued(vec![w("y", 0, 6), w("x", 0, 5), w("hi", 3, 8)]);
    let c = queued(vec![w("hi", 3, 8), w("z", 0, 7)]);
    let order: Vec<String> = waiters_on_majority(&[&a, &b, &c], 2)
        .into_iter()
        .map(|w| w.token_digest)
        .collect();
    assert_eq!(order, ["hi", "x", "y", "z"]);
    assert!(waiters_on_majority(&[&a, &free("k"), &free("k")], 2).is_empty());
}

/// Each master counts a waiter's wait from its own first note of it, and
/// answers arrive in any order: the earliest a master knows is the one
/// shown and ordered by, whichever answer came first.
#[test]
fn a_waiter_is_shown_since_the_earliest_any_master_knows() {
    // bob joined first (10), eve later (20); master a noted bob late (30).
    let a = queued(vec![w("eve", 0, 20), w("bob", 0, 30)]);
    let b = queued(vec![w("bob", 0, 10), w("eve", 0, 21)]);
    let c = queued(vec![w("bob", 0, 0), w("eve", 0, 0)]);
    for answers in [[&a, &b, &c], [&c, &a, &b], [&b, &c, &a]] {
        let shown: Vec<(String, u64)> = waiters_on_majority(&answers, 2)
            .into_iter()
            .map(|w| (w.token_digest, w.since_ms))
            .collect();
        assert_eq!(shown, [("bob".into(), 10), ("eve".into(), 20)]);
    }
}

/// RedLock's noted waiters (lua/redlock_wait.lua), as each master lists
/// them: priority 0, told apart by their waiter ids' digests.
fn noted(ids: &[(&str, u64)]) -> Status {
    let queue: Vec<WaiterStatus> = ids
        .iter()
        .map(|(id, since_ms)| WaiterStatus {
            host: format!("host-{id}"),
            pid: 7,
            since_ms: *since_ms,
            token_digest: (*id).into(),
            ..WaiterStatus::default()
        })
        .collect();
    Status {
        waiters: queue.len() as u64,
        oldest_wait_since_ms: queue.iter().map(|w| w.since_ms).min(),
        queue,
        ..held("k", vec![holder("t", 5, 9_000)])
    }
}

#[test]
fn waiting_counts_the_noted_waiters_a_majority_lists() {
    // "old" is still listed by one master of three (its note there
    // outlived its wait): it is not shown, and its earlier wait is not
    // the oldest. Each master counts 2, and the one majority waiter "a"
    // is all that waits.
    let masters = [
        noted(&[("a", 1_000), ("old", 10)]),
        noted(&[("a", 1_002), ("b", 2_000)]),
        noted(&[("a", 1_001), ("c", 3_000)]),
    ];
    let st = status_on_majority("k", &refs(&masters), 2);
    let shown: Vec<&str> = st.queue.iter().map(|w| w.token_digest.as_str()).collect();
    assert_eq!(shown, ["a"]);
    assert_eq!(st.waiters, 1);
    assert_eq!(st.oldest_wait_since_ms, Some(1_000));
    assert_eq!(st.queue[0].host, "host-a");

    // Two waiters on a majority of 5, one master silent about both.
    let masters = [
        noted(&[("a", 1_000), ("b", 2_000)]),
        noted(&[("b", 2_001), ("a", 1_001)]),
        noted(&[("a", 1_002), ("b", 2_002)]),
        noted(&[]),
        noted(&[("x", 5)]),
    ];
    let st = status_on_majority("k", &refs(&masters), 3);
    let shown: Vec<&str> = st.queue.iter().map(|w| w.token_digest.as_str()).collect();
    assert_eq!(shown, ["a", "b"]);
    assert_eq!((st.waiters, st.oldest_wait_since_ms), (2, Some(1_000)));

    // Nobody a majority lists: nobody waits, no oldest wait.
    let masters = [noted(&[("a", 1_000)]), noted(&[("b", 2_000)]), noted(&[])];
    let st = status_on_majority("k", &refs(&masters), 2);
    assert!(st.queue.is_empty());
    assert_eq!((st.waiters, st.oldest_wait_since_ms), (0, None));
    // `list` leaves out a lock nobody holds or waits for on a majority.
    let idle = |ids: &[(&str, u64)]| Status {
        held: false,
        holders: Vec::new(),
        ..noted(ids)
    };
    let answers = [
        vec![idle(&[("a", 1_000)])],
        vec![idle(&[("b", 2_000)])],
        vec![idle(&[])],
    ];
    assert!(list_on_majority(&answers, 2).is_empty());
    let answers = [
        vec![idle(&[("a", 1_000)])],
        vec![idle(&[("a", 1_001)])],
        vec![idle(&[])],
    ];
    let l = list_on_majority(&answers, 2);
    assert_eq!((l.len(), l[0].waiters), (1, 1));
}

#[test]
fn a_cut_list_leaves_the_count_to_the_figures() {
    // A master that lists fewer waiters than it counts (QUEUE_SHOWN of
    // them): the count is what a majority reports at least.
    let mut a = noted(&[("a", 1_000)]);
    a.waiters = 150;
    let mut b = noted(&[("a", 1_000)]);
    b.waiters = 120;
    let c = noted(&[]);
    let st = status_on_majority("k", &[&a, &b, &c], 2);
    assert_eq!(st.waiters, 120);
    assert_eq!(st.queue.len(), 1);
}
