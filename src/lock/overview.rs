//! Every lock in use at a glance, for `rlock top` and `rlock metrics`: its
//! status (as `list` gives it), plus what its history says (`P{K}:log`, a
//! list of events, and `P{K}:n`, their counters; lua/common.lua): the
//! last event, the grants in the last minute, the totals.
//!
//! The names come from the same place as `list`'s (`Node::lock_names`);
//! then lua/overview.lua, a lean read-only script, returns status.lua's
//! answer and the history's figures together for 100 locks a call (on a
//! cluster, the locks of one slot). So a refresh costs the server O(locks
//! in use) and writes nothing.

use std::cmp::Reverse;
use std::time::Duration;

use redis::{FromRedisValue, Value};
use serde::Serialize;

use super::backend::Backend;
use super::node::Node;
use super::script::{OVERVIEW, RESEND_WINDOW};
use super::{Event, Status};
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
    /// Who holds it, who waits, as `list` gives it, but for two fields
    /// `top` and `metrics` do not show and the overview does not read:
    /// `fence` is the highest of the holders' (0 when only waited for),
    /// and `last_lost` is None.
    pub status: Status,
    /// The server's clock when this view was read (ms since 1970): held
    /// times and waits count to it.
    pub now_ms: u64,
    /// How long the waiter that joined first, of those still queued, has
    /// waited (None: nobody waits, or they joined before this release of
    /// rlock).
    pub oldest_wait: Option<Duration>,
    /// Grants in the last [`GRANTS_WINDOW`], by the server's clock.
    pub grants_last_minute: u64,
    /// The last event of its history.
    pub last_event: Option<Event>,
    /// Its history's counters.
    pub counters: Counters,
    /// The stalest holder's last renewal that moved its lease, or its
    /// grant if not renewed since (server clock, ms since 1970); None
    /// when not held.
    pub renewed_ms: Option<u64>,
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

    /// The shortest lease time left among the current holders (zero
    /// when not held).
    pub fn lease_left(&self) -> Duration {
        self.status
            .holders
            .iter()
            .map(|h| Duration::from_millis(h.ttl_ms))
            .min()
            .unwrap_or_default()
    }

    /// How long ago the stalest holder last renewed (or was granted):
    /// None when not held.
    pub fn renewed_ago(&self) -> Option<Duration> {
        self.renewed_ms.map(|ms| self.since(ms))
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
        return Err(crate::Error::invalid(format!(
            "pattern {pattern:?} contains control characters"
        )));
    }
    Ok(())
}

/// Does the glob `pattern` match `name`, as Redis' MATCH does (`*`, `?`,
/// `[abc]`, `[^a-z]`, `\\` quoting the next character)? For `metrics
/// --group`, which folds the locks a pattern matches after reading them.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|i| go(&p[1..], &n[i..])),
            Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some('[') => {
                let Some(&c) = n.first() else { return false };
                let mut i = 1;
                let not = p.get(1) == Some(&'^');
                if not {
                    i += 1;
                }
                let mut hit = false;
                // (An unclosed class runs to the pattern's end, as in Redis.)
                while i < p.len() && p[i] != ']' {
                    if p[i] == '\\' && i + 1 < p.len() {
                        hit |= p[i + 1] == c;
                        i += 2;
                    } else if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
                        let (a, b) = (p[i].min(p[i + 2]), p[i].max(p[i + 2]));
                        hit |= (a..=b).contains(&c);
                        i += 3;
                    } else {
                        hit |= p[i] == c;
                        i += 1;
                    }
                }
                hit != not && go(p.get(i + 1..).unwrap_or(&[]), &n[1..])
            }
            Some('\\') if p.len() > 1 => n.first() == Some(&p[1]) && go(&p[2..], &n[1..]),
            Some(&c) => n.first() == Some(&c) && go(&p[1..], &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

impl Node {
    /// See [`super::backend::Backend::overview`]: the names from
    /// [`Node::lock_names`], then lua/overview.lua for 100 locks a call on
    /// one server (a call costs the server more than one lock's reads:
    /// measured by `make bench`, section top), the locks of one slot a
    /// call on a cluster (a call's keys share a slot), pipelined
    /// ([`Node::cluster_overview`]).
    /// With `known`, the locks with history too ([`Node::known_names`]),
    /// held or not.
    pub(crate) fn overview_of(&mut self, pattern: &str, known: bool) -> Result<Vec<LockView>> {
        let mut names = self.lock_names(pattern)?;
        if known {
            names.extend(self.known_names(pattern)?);
            names.sort();
            names.dedup();
        }
        let window = crate::duration::millis(GRANTS_WINDOW).to_string();
        let known = if known { "1" } else { "0" };
        if self.server.is_cluster() {
            let mut out = self.cluster_overview(&names, &window, known)?;
            rank(&mut out);
            return Ok(out);
        }
        let batch = 100;
        let mut out = Vec::new();
        for chunk in names.chunks(batch) {
            let keys: Vec<Vec<String>> = chunk
                .iter()
                .map(|n| Ok(self.name(n)?.overview_keys()))
                .collect::<Result<_>>()?;
            let all: Vec<String> = keys.concat();
            let replies = match self.eval::<Vec<Value>>(
                &OVERVIEW,
                &all,
                &[&window, known],
                || "overview".into(),
                RESEND_WINDOW,
            ) {
                Ok(r) if r.len() == chunk.len() => r,
                // A key of another type fails the whole call: again lock
                // by lock, skipping what rlock did not write, as `list`
                // does.
                _ if chunk.len() > 1 => {
                    let one = |(n, k): (&String, &Vec<String>)| {
                        self.overview_one(n, k, &[&window, known])
                    };
                    chunk.iter().zip(&keys).map(one).collect::<Result<_>>()?
                }
                Ok(v) => {
                    return Err(crate::Error::Protocol(format!("overview returned {v:?}")));
                }
                Err(crate::Error::Invalid(_) | crate::Error::Conflict(_)) => {
                    vec![Value::Array(Vec::new())]
                }
                Err(e) => return Err(e),
            };
            for (n, reply) in chunk.iter().zip(replies) {
                if let Some(v) = view(n, reply)? {
                    out.push(v);
                }
            }
        }
        rank(&mut out);
        Ok(out)
    }
}

impl Node {
    /// One lock's lua/overview.lua reply, read alone (after a call of
    /// several failed on a key of another type): an empty entry for a lock
    /// rlock did not write, skipped as `list` skips it.
    fn overview_one(&mut self, name: &str, keys: &[String], args: &[&str]) -> Result<Value> {
        match self.eval::<Vec<Value>>(
            &OVERVIEW,
            keys,
            args,
            || format!("overview of {name:?}"),
            RESEND_WINDOW,
        ) {
            Ok(mut v) if v.len() == 1 => Ok(v.remove(0)),
            Ok(v) => Err(crate::Error::Protocol(format!("overview returned {v:?}"))),
            Err(crate::Error::Invalid(_) | crate::Error::Conflict(_)) => {
                Ok(Value::Array(Vec::new()))
            }
            Err(e) => Err(e),
        }
    }

    /// [`Node::overview_of`] on a cluster: one lua/overview.lua call for
    /// the locks of one slot (up to 100; a call's keys must share a slot),
    /// all through [`Node::batch`] (cluster pipelines: the masters answer
    /// their shares at the same time).
    fn cluster_overview(
        &mut self,
        names: &[String],
        window: &str,
        known: &str,
    ) -> Result<Vec<LockView>> {
        let locks: Vec<_> = names.iter().map(|n| self.name(n)).collect::<Result<_>>()?;
        let groups = crate::lock::node::call_groups(locks.iter().map(|l| l.redis_key()), true);
        let keys: Vec<Vec<String>> = groups
            .iter()
            .map(|g| g.iter().flat_map(|&i| locks[i].overview_keys()).collect())
            .collect();
        let cmds: Vec<redis::Cmd> = keys
            .iter()
            .map(|k| {
                let mut c = self.script_cmd(&OVERVIEW);
                c.arg(k.len()).arg(k).arg(window).arg(known);
                c
            })
            .collect();
        let replies = self
            .batch(&cmds)
            .map_err(|e| self.batch_failed(e, "overview".into()))?;
        let mut out = Vec::new();
        for ((group, k), reply) in groups.iter().zip(&keys).zip(replies) {
            let reply = match reply {
                Ok(v) => Ok(v),
                // The script went (a restart, a failover, SCRIPT FLUSH):
                // this call again through `Node::eval`, whose EVAL loads it
                // on that master for the calls that follow (or which sends
                // EVALSHA where EVALSHA_RO is unknown: Redis 6.2).
                Err(e) if crate::lock::node::retry_alone(&e) => self.eval::<Value>(
                    &OVERVIEW,
                    k,
                    &[window, known],
                    || "overview".into(),
                    RESEND_WINDOW,
                ),
                Err(e) => Err(self.fail(e, "overview".into())),
            };
            let replies = match reply {
                Ok(Value::Array(v)) if v.len() == group.len() => v,
                Ok(v) => {
                    return Err(crate::Error::Protocol(format!("overview returned {v:?}")));
                }
                // A key rlock did not write: skipped, as `list` does (lock
                // by lock when the call had several).
                Err(crate::Error::Invalid(_) | crate::Error::Conflict(_)) if group.len() > 1 => {
                    let one = |&i: &usize| {
                        self.overview_one(&names[i], &locks[i].overview_keys(), &[window, known])
                    };
                    group.iter().map(one).collect::<Result<_>>()?
                }
                Err(crate::Error::Invalid(_) | crate::Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            };
            for (&i, reply) in group.iter().zip(replies) {
                if let Some(v) = view(&names[i], reply)? {
                    out.push(v);
                }
            }
        }
        Ok(out)
    }
}

/// lua/overview.lua's reply for lock `key`: None when it is not in use.
pub(crate) fn view(key: &str, reply: Value) -> Result<Option<LockView>> {
    let bad = |r: &Value| crate::Error::Protocol(format!("overview returned {r:?}"));
    let Value::Array(parts) = reply else {
        return Err(bad(&reply));
    };
    if parts.is_empty() {
        return Ok(None);
    }
    let [Value::Array(status), now, counts, last, grants, renewed] = &parts[..] else {
        return Err(bad(&Value::Array(parts)));
    };
    let status = super::decode::status(key, status.clone())?;
    let now_ms = u64::from_redis_value(now.clone()).map_err(|_| bad(now))?;
    let counts: Vec<(String, String)> =
        FromRedisValue::from_redis_value(counts.clone()).map_err(|_| bad(counts))?;
    Ok(Some(LockView {
        now_ms,
        oldest_wait: status
            .oldest_wait_since_ms
            .map(|t| Duration::from_millis(now_ms.saturating_sub(t))),
        grants_last_minute: u64::from_redis_value(grants.clone()).map_err(|_| bad(grants))?,
        last_event: events(last)?.pop(),
        counters: counters(&counts),
        renewed_ms: match u64::from_redis_value(renewed.clone()).map_err(|_| bad(renewed))? {
            0 => None,
            ms => Some(ms),
        },
        status,
    }))
}

/// `P{K}:n`'s fields, decoded (unknown fields, such as other helpers'
/// one-letter-prefixed ones, are left out; `unsettled`, from
/// lua/overview.lua, counts as `expired`).
pub(crate) fn counters(fields: &[(String, String)]) -> Counters {
    let mut c = Counters::default();
    for (k, v) in fields {
        let v = v.parse().unwrap_or(0);
        match k.as_str() {
            "grants" => c.grants = v,
            "released" => c.released = v,
            // Leases run out, recorded or not yet (lua/overview.lua).
            "expired" | "unsettled" => c.expired += v,
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

/// History entries (see lua/overview.lua; none: an empty list).
fn events(reply: &Value) -> Result<Vec<Event>> {
    match reply {
        Value::Nil => Ok(Vec::new()),
        v => super::decode::history(v.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn an_overview_reply_decodes() {
        assert!(view("k", Value::Array(vec![])).unwrap().is_none());
        let holder = Value::Array(vec![
            b(r#"{"host":"h","pid":7}"#),
            Value::Int(1_000),
            Value::Int(5_000),
            Value::Int(1),
            Value::Int(3),
            b(""),
        ]);
        let status = Value::Array(vec![
            b("x"),
            Value::Int(1),
            Value::Int(3),
            Value::Int(2),
            Value::Int(0),
            b(""),
            Value::Int(4_000),
            Value::Array(vec![]),
            Value::Array(vec![]),
            holder,
        ]);
        let entry = |at: u64, e: &str| b(&format!(r#"[{at},"{e}","0",""]"#));
        let reply = Value::Array(vec![
            status,
            Value::Int(10_000),
            Value::Array(vec![b("grants"), b("7"), b("timeouts"), b("2")]),
            Value::Array(vec![entry(9000, "timeout")]),
            Value::Int(2),
            Value::Int(8_500),
        ]);
        let v = view("k", reply).unwrap().unwrap();
        assert_eq!((v.status.waiters, v.status.holders.len()), (2, 1));
        assert_eq!(v.oldest_wait, Some(Duration::from_secs(6)));
        assert_eq!(v.held_for(), Duration::from_secs(9));
        assert_eq!(v.grants_last_minute, 2);
        assert_eq!(v.lease_left(), Duration::from_secs(5));
        assert_eq!(v.renewed_ago(), Some(Duration::from_millis(1_500)));
        assert_eq!((v.counters.grants, v.counters.timeouts), (7, 2));
        let last = v.last_event.unwrap();
        assert_eq!((last.event.as_str(), last.at), ("timeout", 9_000));
        assert!(view("k", Value::Array(vec![Value::Int(1)])).is_err());
    }

    fn lock(key: &str, waiters: u64, oldest_s: Option<u64>, grants: u64) -> LockView {
        LockView {
            status: Status {
                key: key.into(),
                kind: "exclusive".into(),
                held: true,
                limit: 1,
                fence: 1,
                waiters,
                waiting_writers: 0,
                holders: Vec::new(),
                last_lost: None,
                oldest_wait_since_ms: None,
                damaged: Vec::new(),
                queue: Vec::new(),
            },
            now_ms: 0,
            oldest_wait: oldest_s.map(Duration::from_secs),
            grants_last_minute: grants,
            last_event: None,
            counters: Counters::default(),
            renewed_ms: None,
        }
    }

    #[test]
    fn the_most_contended_come_first() {
        let mut v = vec![
            lock("idle", 0, None, 0),
            lock("busy-b", 0, None, 9),
            lock("busy-a", 0, None, 9),
            lock("short-wait", 2, Some(5), 0),
            lock("long-wait", 2, Some(50), 0),
            lock("most-waiters", 3, Some(1), 0),
        ];
        rank(&mut v);
        let order: Vec<&str> = v.iter().map(|v| v.status.key.as_str()).collect();
        assert_eq!(
            order,
            [
                "most-waiters",
                "long-wait",
                "short-wait",
                "busy-a",
                "busy-b",
                "idle"
            ]
        );
    }

    #[test]
    fn globs_match_as_redis_does() {
        for (p, n, yes) in [
            ("*", "", true),
            ("job:*", "job:12", true),
            ("job:*", "jobs", false),
            ("j?b", "jab", true),
            ("j?b", "jb", false),
            ("[ab]x", "bx", true),
            ("[^ab]x", "bx", false),
            ("[a-c]*", "cat", true),
            ("[c-a]*", "bat", true),
            ("[a-c]*", "dog", false),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("*:deploy", "prod:deploy", true),
            ("*:deploy", "prod:deploy2", false),
        ] {
            assert_eq!(glob_matches(p, n), yes, "{p} {n}");
        }
    }

    #[test]
    fn counters_decode_known_fields_only() {
        let f = |k: &str, v: &str| (k.to_string(), v.to_string());
        let c = counters(&[
            f("grants", "5"),
            f("breaks", "1"),
            f("b:tok", "x"),
            f("overruns", "2"),
            f("expired", "3"),
            f("unsettled", "1"),
        ]);
        assert_eq!((c.grants, c.breaks, c.overruns, c.losses), (5, 1, 2, 0));
        assert_eq!(c.expired, 4);
    }
}
