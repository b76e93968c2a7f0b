//! Every lock in use at a glance, for `rlock top` and `rlock metrics`: its
//! status (as `list` gives it), plus what its history says (lua/ keys
//! `P{K}:log`, a stream of events, and `P{K}:n`, their counters): the last
//! event, the grants in the last minute, the totals.
//!
//! The names and states come from [`Backend::list`] (one status script per
//! lock); the history is three reads per lock (HGETALL of the counters, the
//! last event, the events of the last minute), pipelined for 100 locks at
//! a time (one lock at a time on a cluster), all read-only: one refresh
//! costs the server O(locks in use), and nothing is written.
//!
//! [`Backend::list`]: super::backend::Backend::list

use std::cmp::Reverse;
use std::time::Duration;

use redis::{FromRedisValue, Value};
use serde::Serialize;

use super::node::Node;
use super::types::{Event, Status};
use crate::Result;

/// How far back [`LockView::grants_last_minute`] counts.
pub const GRANTS_WINDOW: Duration = Duration::from_secs(60);

/// A lock's history counters (`P{K}:n`): events since its history began
/// (it is kept for the history's retention after the last event).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Holds granted.
    pub grants: u64,
    /// Holds released by their holder.
    pub released: u64,
    /// Leases that ran out with nobody releasing them.
    pub expired: u64,
    /// Holds an exec or keeper found lost.
    pub losses: u64,
    /// Waiters that gave up.
    pub timeouts: u64,
    /// `--supersede` waiters replaced by a newer one.
    pub superseded: u64,
    /// Holds ended by `rlock break`.
    pub breaks: u64,
    /// Holds stopped by `--max-hold`.
    pub overruns: u64,
}

/// A lock in use, with what its history says.
#[derive(Clone, Debug, Serialize)]
pub struct LockView {
    /// Who holds it, who waits (as `list` gives it).
    pub status: Status,
    /// The server's clock when this view was read (ms since 1970): held
    /// times and waits count to it.
    pub now_ms: u64,
    /// How long the first waiter still queued has waited (None: nobody
    /// waits, or it joined before this release of rlock).
    pub oldest_wait: Option<Duration>,
    /// Grants in the last [`GRANTS_WINDOW`], by the server's clock.
    pub grants_last_minute: u64,
    /// The last event of its history.
    pub last_event: Option<Event>,
    /// Its history's counters.
    pub counters: Counters,
}

impl LockView {
    /// How long the longest current hold has lasted (zero when not held).
    pub fn held_for(&self) -> Duration {
        self.status
            .holders
            .iter()
            .map(|h| self.since(h.since_ms))
            .max()
            .unwrap_or_default()
    }

    /// Time from `ms` (server clock) to this view.
    pub fn since(&self, ms: u64) -> Duration {
        Duration::from_millis(self.now_ms.saturating_sub(ms))
    }
}

/// Most contended first: more waiters, then the longer oldest wait, then
/// more grants in the last minute, then more holders; by name among equals.
pub fn rank(views: &mut [LockView]) {
    views.sort_by(|a, b| {
        let key = |v: &LockView| {
            Reverse((
                v.status.waiters,
                v.oldest_wait.unwrap_or_default(),
                v.grants_last_minute,
                v.status.holders.len(),
            ))
        };
        key(a)
            .cmp(&key(b))
            .then_with(|| a.status.key.cmp(&b.status.key))
    });
}

/// Refuse a pattern no lock name could match (control characters).
pub fn check_pattern(pattern: &str) -> Result<()> {
    if pattern.chars().any(char::is_control) {
        return Err(crate::Error::Usage(format!(
            "pattern {pattern:?} contains control characters"
        )));
    }
    Ok(())
}


impl Node {
    /// The server's clock, ms since 1970.
    fn server_ms(&mut self) -> Result<u64> {
        let res: redis::RedisResult<(u64, u64)> = redis::cmd("TIME").query(self.conn()?);
        self.used();
        let (s, us) = res.map_err(|e| self.fail(e, "TIME".into()))?;
        Ok(s * 1000 + us / 1000)
    }

    /// See [`super::backend::Backend::overview`].
    pub(crate) fn overview_of(&mut self, pattern: &str) -> Result<Vec<LockView>> {
        use super::backend::Backend;
        let locks = self.list(pattern)?;
        let now_ms = self.server_ms()?;
        let from = now_ms.saturating_sub(crate::duration::millis(GRANTS_WINDOW));
        // The history reads of many locks go in one pipeline: a round trip
        // costs the server more than the reads (measured: `make bench`,
        // section top). A cluster routes a pipeline by its first key, so
        // there each lock's reads are a pipeline of their own.
        let batch = if self.server.is_cluster() { 1 } else { 100 };
        let mut out = Vec::with_capacity(locks.len());
        let mut locks = locks.into_iter().peekable();
        while locks.peek().is_some() {
            let chunk: Vec<Status> = locks.by_ref().take(batch).collect();
            let mut pipe = redis::pipe();
            for status in &chunk {
                let lock = self.name(&status.key)?;
                let (log, stats) = (lock.log_key(), lock.stats_key());
                pipe.cmd("HGETALL").arg(&stats);
                pipe.cmd("XREVRANGE").arg(&log).arg("+").arg("-").arg("COUNT").arg(1);
                pipe.cmd("XREVRANGE").arg(&log).arg("+").arg(from);
            }
            let res: redis::RedisResult<Vec<Value>> = pipe.query(self.conn()?);
            self.used();
            let replies = res.map_err(|e| self.fail(e, "read the locks' history".into()))?;
            for (status, r) in chunk.into_iter().zip(replies.chunks(3)) {
                let [counts, last, recent] = r else {
                    return Err(crate::Error::Protocol(format!(
                        "history reads returned {r:?}"
                    )));
                };
                let counts: Vec<(String, String)> =
                    FromRedisValue::from_redis_value(counts.clone()).unwrap_or_default();
                let oldest_wait = status
                    .oldest_wait_since_ms
                    .map(|t| Duration::from_millis(now_ms.saturating_sub(t)));
                out.push(LockView {
                    now_ms,
                    oldest_wait,
                    grants_last_minute: events(recent)?
                        .iter()
                        .filter(|e| e.event == "granted")
                        .count() as u64,
                    last_event: events(last)?.pop(),
                    counters: counters(&counts),
                    status,
                });
            }
        }
        rank(&mut out);
        Ok(out)
    }
}

/// `P{K}:n`'s fields, decoded (unknown fields, such as other helpers'
/// one-letter-prefixed ones, are left out).
pub(crate) fn counters(fields: &[(String, String)]) -> Counters {
    let mut c = Counters::default();
    for (k, v) in fields {
        let v = v.parse().unwrap_or(0);
        match k.as_str() {
            "grants" => c.grants = v,
            "released" => c.released = v,
            "expired" => c.expired = v,
            "losses" => c.losses = v,
            "timeouts" => c.timeouts = v,
            "superseded" => c.superseded = v,
            "breaks" => c.breaks = v,
            "overruns" => c.overruns = v,
            _ => {}
        }
    }
    c
}

/// An XREVRANGE reply's entries (an absent stream: none).
fn events(reply: &Value) -> Result<Vec<Event>> {
    match reply {
        Value::Nil => Ok(Vec::new()),
        v => super::decode::history(v.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_decode_known_fields_only() {
        let f = |k: &str, v: &str| (k.to_string(), v.to_string());
        let c = counters(&[
            f("grants", "5"),
            f("breaks", "1"),
            f("b:tok", "x"),
            f("overruns", "2"),
        ]);
        assert_eq!((c.grants, c.breaks, c.overruns, c.losses), (5, 1, 2, 0));
    }
}
