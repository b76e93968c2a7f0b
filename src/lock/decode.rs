//! The scripts' replies (lua/*.lua, each header lists them), decoded into
//! the library's types: one function per script, pure, so that every reply
//! code is tested without a server. What a node does about an answer
//! (waking waiters, waiting for replicas, giving a late grant back) stays
//! in `node`.

use std::time::Duration;

use redis::{FromRedisValue, Value};

use super::breaking::{Broken, lost_why};
use super::node::Attempt;
use super::script::reply;
use super::types::{Busy, Event, Held, HolderInfo, HolderStatus, Released, Status, format_ms};
use crate::{Error, Result};

/// What a waiter's heartbeat learnt (see lua/wait.lua).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Beat {
    /// Nothing can change for the waiter for this long unless it is woken.
    pub(super) quiet: Duration,
    /// The first holder's lease time left.
    pub(super) holder_ttl: Duration,
    /// The first holder's fingerprint.
    pub(super) holder_id: String,
    /// The first holder changed: who holds it now, since when (server ms),
    /// the waiter's place in the queue, and how many hold it.
    pub(super) changed: Option<(Option<HolderInfo>, u64, u64, u64)>,
}

/// The text at `i` of a script's reply ("" if none).
pub(super) fn text(reply: &[Value], i: usize) -> String {
    reply
        .get(i)
        .and_then(|v| String::from_redis_value(v.clone()).ok())
        .unwrap_or_default()
}

/// lua/acquire.lua's reply to an acquire of `key` with `limit` slots: the
/// outcome, and the waiters the script says may now take the lock (they
/// follow a grant's or a busy answer; the client wakes them whatever the
/// outcome).
pub(super) fn acquire<'r>(
    reply: &'r [Value],
    key: &str,
    limit: u32,
) -> (Result<Attempt>, &'r [Value]) {
    let code = match int(reply, 0, "acquire") {
        Ok(code) => code,
        Err(e) => return (Err(e), &[]),
    };
    let answer = match code {
        reply::GRANTED => 3,
        reply::BUSY => 9,
        _ => reply.len(),
    };
    let wake = reply.get(answer..).unwrap_or_default();
    (attempt(reply, code, key, limit), wake)
}

/// The integer at `i` of `what`'s reply.
fn int(reply: &[Value], i: usize, what: &str) -> Result<i64> {
    reply
        .get(i)
        .and_then(|v| i64::from_redis_value(v.clone()).ok())
        .ok_or_else(|| Error::Protocol(format!("{what} returned {reply:?}")))
}

/// What an acquire's reply with code `code` says.
fn attempt(reply: &[Value], code: i64, key: &str, limit: u32) -> Result<Attempt> {
    let at = |i: usize| int(reply, i, "acquire");
    let ms = |i: usize| -> Result<Duration> { Ok(Duration::from_millis(at(i)?.max(0) as u64)) };
    let count = |i: usize| -> Result<u64> { Ok(at(i)?.max(0) as u64) };
    match code {
        reply::GRANTED => Ok(Attempt::Granted {
            fence: at(1)? as u64,
            count: at(2)? as u64,
        }),
        reply::BUSY => {
            let busy = Busy {
                key: key.to_string(),
                holder: serde_json::from_str(&text(reply, 3)).ok(),
                expires_in: ms(1)?,
                position: count(2)?,
                since_ms: count(4)?,
                holders: count(5)?,
                holder_ttl: ms(7)?,
                waited: Duration::ZERO,
            };
            Ok(Attempt::Busy(busy, count(6)?, text(reply, 8)))
        }
        reply::SUPERSEDED => Err(Error::Superseded {
            key: key.to_string(),
            by: match serde_json::from_str::<HolderInfo>(&text(reply, 1)) {
                Ok(h) => format!("host {} pid {}", h.host, h.pid),
                Err(_) => "a newer waiter".into(),
            },
        }),
        reply::OTHER_LIMIT => Err(Error::Conflict(format!(
            "lock {key:?} is in use with Request::limit {}, not {limit}; every holder must agree",
            at(1)?
        ))),
        reply::NOT_HELD => Ok(Attempt::NotHeld),
        reply::OTHER_KIND => {
            let kind = text(reply, 1);
            // Only semaphores and read-write locks do not mix: an
            // exclusive lock is a write lock (lua/acquire.lua).
            let (rw, sem) = (
                "a read-write lock (Mode::Read or Mode::Write)",
                "a semaphore (Request::limit above 1)",
            );
            let (is, asked) = if kind == "rw" { (rw, sem) } else { (sem, rw) };
            Err(Error::Conflict(format!(
                "lock {key:?} is in use as {is}; it cannot be taken as {asked}"
            )))
        }
        reply::NO_UPGRADE => Err(Error::Conflict(format!(
            "lock {key:?}: this owner holds it for reading and cannot upgrade to writing \
             (that would wait for itself); release the read lock first"
        ))),
        _ => Err(Error::Protocol(format!("acquire returned {reply:?}"))),
    }
}

/// lua/release.lua's reply: the holds the token has left (or a reply
/// code), and the waiters to wake.
pub(super) fn release(reply: &[Value]) -> Result<(i64, &[Value])> {
    let n = int(reply, 0, "release")?;
    Ok((n, &reply[1..]))
}

/// lua/break.lua's reply: what was broken, and the waiters to wake.
pub(super) fn broken(reply: &[Value]) -> Result<(Broken, &[Value])> {
    let n = usize::try_from(int(reply, 0, "break")?)
        .map_err(|_| Error::Protocol(format!("break returned {reply:?}")))?;
    let fences = (1..=n)
        .map(|i| int(reply, i, "break").map(|f| f.max(0) as u64))
        .collect::<Result<Vec<u64>>>()?;
    let wake = reply.get(n + 1..).unwrap_or_default();
    Ok((
        Broken {
            fences,
            woken: wake.len(),
        },
        wake,
    ))
}

/// What a release of `key` that answered `n` did. `resent`: the call was
/// sent more than once, and the first send may have released it already
/// (lua/release.lua, "Resends"), so "not held" and "another owner" (who
/// took the freed lock) mean released.
pub(super) fn released(n: i64, resent: bool, key: &str) -> Result<Released> {
    match n {
        0 => Ok(Released::Released),
        reply::NOT_HELD | reply::OTHER_OWNER if resent => Ok(Released::Released),
        n if n > 0 => Ok(Released::StillHeld(n as u64)),
        reply::NOT_HELD => Ok(Released::NotHeld),
        reply::OTHER_OWNER => Err(Error::NotOwner { key: key.into() }),
        n => Err(Error::Protocol(format!("release returned {n}"))),
    }
}

/// The token holds nothing any more.
fn lost(key: &str) -> Error {
    Error::Lost {
        key: key.into(),
        why: "this token holds it no more (it expired or was released)".into(),
    }
}

/// lua/renew.lua's reply: the renewed lease's time left. A hold broken by
/// `rlock break` comes as {NOT_HELD, notice}: a loss that says who broke
/// it and why.
pub(super) fn renewed(reply: &Value, key: &str) -> Result<Duration> {
    if let Value::Array(a) = reply {
        if int(a, 0, "renew")? == reply::NOT_HELD {
            return Err(Error::Lost {
                key: key.into(),
                why: lost_why(&text(a, 1)),
            });
        }
        return Err(Error::Protocol(format!("renew returned {reply:?}")));
    }
    let n = i64::from_redis_value(reply.clone())
        .map_err(|_| Error::Protocol(format!("renew returned {reply:?}")))?;
    match n {
        n if n > 0 => Ok(Duration::from_millis(n as u64)),
        reply::NOT_HELD => Err(lost(key)),
        reply::OTHER_OWNER => Err(Error::NotOwner { key: key.into() }),
        n => Err(Error::Protocol(format!("renew returned {n}"))),
    }
}

/// lua/check.lua's reply: the token's hold, if it has one.
pub(super) fn held(reply: &[i64], key: &str) -> Result<Held> {
    match reply[..] {
        [ms, fence] if ms >= 0 => Ok(Held {
            ttl: Duration::from_millis(ms as u64),
            fence: fence as u64,
        }),
        [reply::NOT_HELD] => Err(lost(key)),
        [reply::OTHER_OWNER] => Err(Error::NotOwner { key: key.into() }),
        _ => Err(Error::Protocol(format!("check returned {reply:?}"))),
    }
}

/// lua/wait.lua's reply: what the heartbeat learnt, or `None` if the
/// waiter must run the acquire script now (its place is gone, or a lease
/// ended).
pub(super) fn beat(reply: &[Value]) -> Result<Option<Beat>> {
    let at = |i: usize| int(reply, i, "wait");
    let quiet = at(0)?;
    if quiet <= 0 {
        return Ok(None);
    }
    let millis = |n: i64| Duration::from_millis(n.max(0) as u64);
    let changed = if reply.len() >= 7 {
        Some((
            serde_json::from_str(&text(reply, 3)).ok(),
            at(4)?.max(0) as u64,
            at(5)?.max(0) as u64,
            at(6)?.max(0) as u64,
        ))
    } else {
        None
    };
    Ok(Some(Beat {
        quiet: millis(quiet),
        holder_ttl: millis(at(1)?),
        holder_id: text(reply, 2),
        changed,
    }))
}

/// lua/status.lua's reply: the state of lock `key`.
pub(super) fn status(key: &str, reply: Vec<Value>) -> Result<Status> {
    let bad = || Error::Protocol(format!("status returned {reply:?}"));
    let num = |v: &Value| u64::from_redis_value(v.clone()).ok();
    let text = |v: Option<&Value>| {
        v.and_then(|v| String::from_redis_value(v.clone()).ok())
            .unwrap_or_default()
    };
    let head: Vec<u64> = reply.iter().skip(1).take(4).filter_map(num).collect();
    let [limit, fence, waiters, waiting_writers] = head[..] else {
        return Err(bad());
    };
    let kind = match (text(reply.first()).as_str(), limit) {
        ("rw", _) => "rw",
        ("x", 1) => "exclusive",
        ("x", _) => "semaphore",
        _ => "",
    };
    let last_lost = serde_json::from_str(&text(reply.get(5))).ok();
    let mut holders = Vec::new();
    let oldest_wait_since_ms = reply.get(6).and_then(num).filter(|&ms| ms > 0);
    for h in reply.get(7..).unwrap_or_default() {
        let Value::Array(f) = h else {
            return Err(bad());
        };
        let info: HolderInfo = serde_json::from_str(&text(f.first())).unwrap_or_default();
        let n = |i: usize| f.get(i).and_then(num).unwrap_or(0);
        let mode = match text(f.get(5)).as_str() {
            "r" => "read",
            "w" => "write",
            _ => "exclusive",
        };
        holders.push(HolderStatus {
            mode: mode.to_string(),
            host: info.host,
            pid: info.pid,
            cmd: info.cmd,
            since: format_ms(n(1)),
            since_ms: n(1),
            ttl_ms: n(2),
            count: n(3),
            fence: n(4),
            set: info.set,
        });
    }
    Ok(Status {
        key: key.to_string(),
        kind: kind.to_string(),
        held: !holders.is_empty(),
        limit,
        fence,
        waiters,
        waiting_writers,
        holders,
        last_lost,
        oldest_wait_since_ms,
    })
}

#[cfg(test)]
mod tests;

/// lua/history.lua's reply: stream entries `{id, {field, value, ...}}`
/// (fields as in lua/common.lua, log_event), in the order given. The
/// entry id's milliseconds are the event's time.
pub(super) fn history(reply: Value) -> Result<Vec<Event>> {
    let bad = |what: &str| Error::Protocol(format!("history: {what}"));
    let entries: Vec<(String, Vec<String>)> =
        FromRedisValue::from_redis_value(reply).map_err(|e| bad(&e.to_string()))?;
    let mut out = Vec::with_capacity(entries.len());
    for (id, fields) in entries {
        let at = id
            .split('-')
            .next()
            .and_then(|ms| ms.parse().ok())
            .ok_or_else(|| bad("an entry id that is no stream id"))?;
        let mut e = Event {
            at,
            ..Event::default()
        };
        for kv in fields.chunks(2) {
            let [k, v] = kv else { break };
            match k.as_str() {
                "e" => e.event = v.clone(),
                "i" => e.holder = serde_json::from_str::<HolderInfo>(v).ok(),
                "f" => e.fence = v.parse().ok().filter(|f| *f > 0),
                "w" => e.waited_ms = v.parse().ok(),
                "d" => e.held_ms = v.parse().ok(),
                "x" => e.exit_code = v.parse().ok(),
                "by" => e.by = Some(v.clone()).filter(|b| !b.is_empty()),
                "r" => e.reason = Some(v.clone()),
                _ => {}
            }
        }
        out.push(e);
    }
    Ok(out)
}
