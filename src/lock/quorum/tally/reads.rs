//! The reads under RedLock, decided by majority as the grant is: what
//! `status`, `list`, `top`, `metrics`, `history` and `break` show is what
//! a majority of the masters that answered agree on. Pure: each function
//! takes the answers of the masters that answered (at least a majority of
//! them; the caller refuses fewer) and `m`, the majority of all masters.
//!
//! - A holder is told apart by its token's digest
//!   ([`HolderStatus::token_digest`]), the same on every master (its fence
//!   may differ on a master outside the majority that granted it). It
//!   holds when a majority reports it holding with a lease left: for as
//!   long as the m-th longest lease, at the fence most of them report.
//! - A figure (waiters, the last fence, grants in the last minute, each
//!   history counter) is the m-th largest: a majority reports at least it.
//!   A master that does not list a lock counts as reporting nothing.
//! - A waiter is told apart by its digest (under RedLock that of its
//!   waiter id, lua/redlock_wait.lua: one per waiting acquire, noted on
//!   every master): it is shown when a majority lists it, and when every
//!   master listed all its waiters, `waiters` counts those shown and the
//!   oldest wait is theirs.
//! - A history event is shown when a majority has it: the same event
//!   (kind, holder's host and pid, fence; a missing fence matches any)
//!   within [`SAME_EVENT`] of each other, at most once per master. An
//!   event a minority has (an attempt a minority granted and gave back,
//!   one a master out of reach missed) is left out.

use std::time::Duration;

use crate::lock::overview::{Counters, LockView, rank};
use crate::lock::{Breaking, Event, HolderStatus, QUEUE_SHOWN, Status, WaiterStatus};

/// How far apart (by the masters' clocks) one event's records on several
/// masters may be: enough for the calls of one operation to reach each
/// master and for their clocks to differ a little.
pub(in crate::lock::quorum) const SAME_EVENT: Duration = Duration::from_secs(5);

/// The m-th largest of `values`, counting missing ones (fewer than `m`
/// given) as 0: the most a majority reports at least.
fn on_majority(mut values: Vec<u64>, m: usize) -> u64 {
    values.sort_unstable_by(|a, b| b.cmp(a));
    values.get(m - 1).copied().unwrap_or(0)
}

/// The holders a majority of `answers` reports, in the order they first
/// appear: each as the first record of it at the agreed fence, with the
/// m-th longest lease and the deepest re-entry any master reports.
pub(in crate::lock::quorum) fn holders_on_majority(
    answers: &[&Status],
    m: usize,
) -> Vec<HolderStatus> {
    let mut ids: Vec<&str> = Vec::new();
    for h in answers.iter().flat_map(|st| &st.holders) {
        if !ids.contains(&h.token_digest.as_str()) {
            ids.push(&h.token_digest);
        }
    }
    let mut out = Vec::new();
    for id in ids {
        // At most one record per master (a master lists a token once).
        let seen: Vec<&HolderStatus> = answers
            .iter()
            .filter_map(|st| st.holders.iter().find(|h| h.token_digest == id))
            .collect();
        if seen.len() < m {
            continue;
        }
        let ttl = on_majority(seen.iter().map(|h| h.ttl_ms).collect(), m);
        let fence = super::most_reported(seen.iter().map(|h| h.fence).collect());
        let Some(first) = seen.iter().find(|h| h.fence == fence) else {
            continue;
        };
        let mut h = (*first).clone();
        h.ttl_ms = ttl;
        h.count = seen.iter().map(|h| h.count).max().unwrap_or(1);
        // Being broken where a majority carries the mark (lua/break.lua),
        // whatever the first record says.
        let marks: Vec<&Breaking> = seen.iter().filter_map(|h| h.breaking.as_ref()).collect();
        h.breaking = (marks.len() >= m).then(|| marks[0].clone());
        out.push(h);
    }
    out
}

/// The waiters a majority of `answers` lists (a waiter queues on every
/// master with one token; under RedLock it is noted on every master with
/// one waiter id): each as its first record, joined since the earliest
/// any master knows (each master counts from its own first note, and the
/// answers come in whatever order they arrived), in queue order (higher
/// priority first, then the earlier join).
pub(in crate::lock::quorum) fn waiters_on_majority(
    answers: &[&Status],
    m: usize,
) -> Vec<WaiterStatus> {
    let mut out: Vec<WaiterStatus> = Vec::new();
    for w in answers.iter().flat_map(|st| &st.queue) {
        if out.iter().any(|o| o.token_digest == w.token_digest) {
            continue;
        }
        let records: Vec<&WaiterStatus> = answers
            .iter()
            .filter_map(|st| st.queue.iter().find(|x| x.token_digest == w.token_digest))
            .collect();
        if records.len() >= m {
            let mut first = w.clone();
            // 0: a master that does not know since when.
            if let Some(since) = records.iter().map(|r| r.since_ms).filter(|&s| s > 0).min() {
                first.since_ms = since;
            }
            out.push(first);
        }
    }
    out.sort_by_key(|w| (std::cmp::Reverse(w.priority), w.since_ms));
    out
}

/// One lock's status from the masters that report it (for `list`, a
/// master that answered without it counts as reporting it free).
pub(in crate::lock::quorum) fn status_on_majority(
    key: &str,
    answers: &[&Status],
    m: usize,
) -> Status {
    let holders = holders_on_majority(answers, m);
    let figure = |f: fn(&Status) -> u64| on_majority(answers.iter().map(|s| f(s)).collect(), m);
    let queue = waiters_on_majority(answers, m);
    // Every master listed every waiter it counts: who waits is known, and
    // a waiter only a minority lists (noted there before it ended, or
    // missed by the others' notes) counts for nothing. Else (a list cut
    // at QUEUE_SHOWN) the figure.
    let listed = answers
        .iter()
        .all(|s| s.queue.len() as u64 >= s.waiters && s.queue.len() < QUEUE_SHOWN);
    let waiters = if listed {
        queue.len() as u64
    } else {
        figure(|s| s.waiters)
    };
    let fence = figure(|s| s.fence).max(holders.iter().map(|h| h.fence).max().unwrap_or(0));
    let in_use = !holders.is_empty() || waiters > 0;
    let (kind, limit) = answers
        .iter()
        .find(|s| in_use && !s.kind.is_empty())
        .map_or((String::new(), 0), |s| (s.kind.clone(), s.limit));
    Status {
        key: key.to_string(),
        kind,
        held: !holders.is_empty(),
        limit,
        fence,
        waiters,
        waiting_writers: figure(|s| s.waiting_writers),
        last_lost: answers
            .iter()
            .filter_map(|s| s.last_lost.clone())
            .max_by_key(|l| l.when_ms),
        oldest_wait_since_ms: if listed {
            queue.iter().map(|w| w.since_ms).filter(|&ms| ms > 0).min()
        } else {
            answers
                .iter()
                .filter_map(|s| s.oldest_wait_since_ms)
                .min()
                .filter(|_| waiters > 0)
        },
        // Remains on any master are worth the warning (break clears them
        // on every master).
        damaged: {
            let mut d: Vec<String> = answers.iter().flat_map(|s| s.damaged.clone()).collect();
            d.sort_unstable();
            d.dedup();
            d
        },
        holders,
        queue,
    }
}

/// The keys any answer names, sorted, each with the answers that name it.
fn union<T>(answers: &[Vec<T>], key: impl Fn(&T) -> &str) -> Vec<(&str, Vec<&T>)> {
    let mut out: Vec<(&str, Vec<&T>)> = Vec::new();
    for a in answers {
        for x in a {
            let k = key(x);
            match out.iter_mut().find(|(n, _)| *n == k) {
                Some((_, v)) => v.push(x),
                None => out.push((k, vec![x])),
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(b.0));
    out
}

/// `list`: the union of the locks the masters list, each decided by
/// majority; those a majority holds or waits for, sorted by name.
pub(in crate::lock::quorum) fn list_on_majority(answers: &[Vec<Status>], m: usize) -> Vec<Status> {
    union(answers, |s| &s.key)
        .into_iter()
        .map(|(k, seen)| status_on_majority(k, &seen, m))
        .filter(|s| s.held || s.waiters > 0)
        .collect()
}

/// `top` and `metrics`: the union of the locks the masters' overviews
/// show, each decided by majority (status as [`status_on_majority`], the
/// grants of the last minute and each counter the m-th largest, the last
/// event the m-th latest, the renewal the m-th latest), most contended
/// first. With `known`, locks nobody holds or waits for on a majority
/// stay (their counters: `metrics`).
pub(in crate::lock::quorum) fn overview_on_majority(
    answers: &[Vec<LockView>],
    m: usize,
    known: bool,
) -> Vec<LockView> {
    let mut out = Vec::new();
    for (k, seen) in union(answers, |v| &v.status.key) {
        let statuses: Vec<&Status> = seen.iter().map(|v| &v.status).collect();
        let status = status_on_majority(k, &statuses, m);
        if !known && !status.held && status.waiters == 0 {
            continue;
        }
        let count =
            |f: fn(&Counters) -> u64| on_majority(seen.iter().map(|v| f(&v.counters)).collect(), m);
        let mut last: Vec<&Event> = seen.iter().filter_map(|v| v.last_event.as_ref()).collect();
        last.sort_by_key(|e| std::cmp::Reverse(e.at));
        let now_ms = on_majority(seen.iter().map(|v| v.now_ms).collect(), m);
        out.push(LockView {
            now_ms,
            oldest_wait: status
                .oldest_wait_since_ms
                .map(|t| Duration::from_millis(now_ms.saturating_sub(t))),
            grants_last_minute: on_majority(seen.iter().map(|v| v.grants_last_minute).collect(), m),
            last_event: last.get(m - 1).map(|e| (*e).clone()),
            counters: Counters {
                grants: count(|c| c.grants),
                released: count(|c| c.released),
                expired: count(|c| c.expired),
                losses: count(|c| c.losses),
                timeouts: count(|c| c.timeouts),
                superseded: count(|c| c.superseded),
                breaks: count(|c| c.breaks),
                overruns: count(|c| c.overruns),
            },
            renewed_ms: match on_majority(
                seen.iter().map(|v| v.renewed_ms.unwrap_or(0)).collect(),
                m,
            ) {
                0 => None,
                ms => Some(ms),
            },
            status,
        });
    }
    rank(&mut out);
    out
}

/// Are two masters' records one event? Same kind, holder host and pid,
/// and fence (one without a fence matches any).
fn same_event(a: &Event, b: &Event) -> bool {
    let who = |e: &Event| e.holder.as_ref().map(|h| (h.host.clone(), h.pid));
    a.event == b.event
        && who(a) == who(b)
        && (a.fence.is_none() || b.fence.is_none() || a.fence == b.fence)
        && a.at.abs_diff(b.at) <= crate::duration::millis(SAME_EVENT)
}

/// `history`: the events a majority of the masters has (each master's
/// events oldest first), oldest first, the last `limit`. An event is
/// shown as the record of the master whose clock put it in the middle
/// (the lower middle between two), with a fence from one that has it.
pub(in crate::lock::quorum) fn history_on_majority(
    answers: &[Vec<Event>],
    m: usize,
    limit: usize,
) -> Vec<Event> {
    let mut all: Vec<(usize, &Event)> = answers
        .iter()
        .enumerate()
        .flat_map(|(i, a)| a.iter().map(move |e| (i, e)))
        .collect();
    all.sort_by_key(|(_, e)| e.at);
    // Each group: one event's records, at most one per master. A record
    // joins the latest group it matches that has none from its master yet.
    let mut groups: Vec<Vec<(usize, &Event)>> = Vec::new();
    for (i, e) in all {
        let fits = |g: &Vec<(usize, &Event)>| {
            g.iter().all(|(j, _)| *j != i) && g.iter().all(|(_, f)| same_event(e, f))
        };
        match groups.iter_mut().rev().find(|g| fits(g)) {
            Some(g) => g.push((i, e)),
            None => groups.push(vec![(i, e)]),
        }
    }
    let mut out: Vec<Event> = groups
        .into_iter()
        .filter(|g| g.len() >= m)
        .map(|g| {
            let mut e = g[(g.len() - 1) / 2].1.clone();
            e.fence = e.fence.or_else(|| g.iter().find_map(|(_, f)| f.fence));
            e
        })
        .collect();
    out.sort_by_key(|e| e.at);
    let skip = out.len().saturating_sub(limit);
    out.drain(..skip);
    out
}

/// `break` with named fences: the token digests of the holders a
/// majority reports (as `status` shows them) that any master gives one of
/// `fences`, and those of `fences` that name one. Each master then breaks
/// those holders' holds under its own fences.
pub(in crate::lock::quorum) fn named_holders(
    answers: &[&Status],
    fences: &[u64],
    m: usize,
) -> (Vec<String>, Vec<u64>) {
    let mut who = Vec::new();
    let mut named = Vec::new();
    for h in holders_on_majority(answers, m) {
        let theirs: Vec<u64> = answers
            .iter()
            .flat_map(|st| &st.holders)
            .filter(|g| g.token_digest == h.token_digest)
            .map(|g| g.fence)
            .collect();
        let hit: Vec<u64> = fences
            .iter()
            .copied()
            .filter(|f| theirs.contains(f))
            .collect();
        if !hit.is_empty() {
            who.push(h.token_digest.clone());
            for f in hit {
                if !named.contains(&f) {
                    named.push(f);
                }
            }
        }
    }
    (who, named)
}

#[cfg(test)]
mod tests;
