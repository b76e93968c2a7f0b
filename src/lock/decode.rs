//! The scripts' replies (lua/*.lua, each header lists them), decoded into
//! the library's types: one function per script, pure, so that every reply
//! code is tested without a server. What a node does about an answer
//! (waking waiters, waiting for replicas, giving a late grant back) stays
//! in `node`.

use std::time::Duration;

use redis::{FromRedisValue, Value};

use super::breaking::{Broken, lost_why};
use super::node::Outcome;
use super::script::reply;
use super::{
    Busy, Event, Held, HolderInfo, HolderStatus, Released, Status, WaiterStatus, format_ms,
    priority_of_score,
};
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
) -> (Result<Outcome>, &'r [Value]) {
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

/// The waiters a grant named next in line (lua/acquire.lua, "Next in
/// line"): the queue's head, and the one behind it (the scout a release
/// would signal). Tokens of other waiters: never printed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct NextInLine {
    pub(super) next: String,
    pub(super) scout: Option<String>,
}

/// Is this entry of a grant's reply a hint ('^' .. token), not a token to
/// wake?
pub(super) fn is_hint(t: &str) -> bool {
    t.starts_with('^')
}

/// The hints at the end of a grant's reply (`wake`, as [`acquire`] gives
/// it), if any: '^' .. token the next in line, '^~' .. token the one
/// behind it.
pub(super) fn next_in_line(wake: &[Value]) -> Option<NextInLine> {
    let (mut next, mut scout) = (None, None);
    for v in wake {
        let Ok(t) = String::from_redis_value(v.clone()) else {
            continue;
        };
        let Some(s) = t.strip_prefix('^') else {
            continue;
        };
        match s.strip_prefix('~') {
            Some(s) if !s.is_empty() => scout = Some(s.to_string()),
            None if !s.is_empty() => next = Some(s.to_string()),
            _ => {}
        }
    }
    next.map(|next| NextInLine { next, scout })
}

/// The integer at `i` of `what`'s reply.
fn int(reply: &[Value], i: usize, what: &str) -> Result<i64> {
    reply
        .get(i)
        .and_then(|v| i64::from_redis_value(v.clone()).ok())
        .ok_or_else(|| Error::Protocol(format!("{what} returned {reply:?}")))
}

/// What an acquire's reply with code `code` says.
fn attempt(reply: &[Value], code: i64, key: &str, limit: u32) -> Result<Outcome> {
    let at = |i: usize| int(reply, i, "acquire");
    let ms = |i: usize| -> Result<Duration> { Ok(Duration::from_millis(at(i)?.max(0) as u64)) };
    let count = |i: usize| -> Result<u64> { Ok(at(i)?.max(0) as u64) };
    match code {
        reply::GRANTED => Ok(Outcome::Granted {
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
            Ok(Outcome::Busy(busy, count(6)?, text(reply, 8)))
        }
        reply::SUPERSEDED => Err(Error::Superseded {
            key: key.to_string(),
            by: match serde_json::from_str::<HolderInfo>(&text(reply, 1)) {
                Ok(h) => format!("host {} pid {}", h.host, h.pid),
                Err(_) => "a newer waiter".into(),
            },
        }),
        reply::OTHER_LIMIT => Err(Error::OtherLimit {
            key: key.to_string(),
            held: u32::try_from(at(1)?).unwrap_or(u32::MAX),
            asked: limit,
        }),
        reply::NOT_HELD => Ok(Outcome::NotHeld),
        // Only semaphores and read-write locks do not mix: an exclusive
        // lock is a write lock (lua/acquire.lua).
        reply::OTHER_KIND => Err(Error::OtherKind {
            key: key.to_string(),
            key_is_rw: text(reply, 1) == "rw",
        }),
        reply::NO_UPGRADE => Err(Error::Conflict(format!(
            "lock {key:?}: this owner holds it for reading and cannot upgrade to writing \
             (that would wait for itself); release the read lock first"
        ))),
        _ => Err(Error::Protocol(format!("acquire returned {reply:?}"))),
    }
}

/// lua/release.lua's reply: the holds the token has left (or a reply
/// code), the break notice of a hold broken (`rlock break`), and the
/// waiters to wake.
pub(super) fn release(reply: &[Value]) -> Result<(i64, Option<String>, &[Value])> {
    let n = int(reply, 0, "release")?;
    if n == reply::BROKEN {
        return Ok((n, Some(text(reply, 1)), reply.get(2..).unwrap_or_default()));
    }
    Ok((n, None, &reply[1..]))
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
/// took the freed lock) mean released. A hold broken (`notice`, from
/// [`release`]) is a loss that says who broke it and why, resent or not:
/// a release that ran finds no notice.
pub(super) fn released(n: i64, notice: Option<&str>, resent: bool, key: &str) -> Result<Released> {
    if let Some(notice) = notice {
        return Err(Error::Lost {
            key: key.into(),
            why: lost_why(notice),
        });
    }
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

/// lua/check.lua's reply: the token's hold, if it has one. A hold being
/// broken, or broken and ended while its notice lasts, comes as
/// {NOT_HELD, notice}: a loss that says who broke it and why.
pub(super) fn held(reply: &[Value], key: &str) -> Result<Held> {
    let n = |i: usize| match reply.get(i) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    let notice = match reply.get(1) {
        Some(Value::BulkString(_) | Value::SimpleString(_)) => Some(text(reply, 1)),
        _ => None,
    };
    match (reply.len(), n(0), n(1), notice) {
        (2, Some(ms), Some(fence), _) if ms >= 0 => Ok(Held {
            ttl: Duration::from_millis(ms as u64),
            fence: fence as u64,
        }),
        (2, Some(reply::NOT_HELD), _, Some(notice)) => Err(Error::Lost {
            key: key.into(),
            why: lost_why(&notice),
        }),
        (1, Some(reply::NOT_HELD), ..) => Err(lost(key)),
        (1, Some(reply::OTHER_OWNER), ..) => Err(Error::NotOwner { key: key.into() }),
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
    // The remains of a damaged lock (lua/status.lua): the keys, or none.
    let damaged: Vec<String> = match reply.get(7) {
        Some(v @ Value::Array(_)) => {
            FromRedisValue::from_redis_value(v.clone()).map_err(|_| bad())?
        }
        Some(_) => return Err(bad()),
        None => Vec::new(),
    };
    let queue = match reply.get(8) {
        Some(Value::Array(q)) => q
            .iter()
            .map(|w| waiter(w, kind == "rw"))
            .collect::<Option<Vec<_>>>(),
        None => Some(Vec::new()),
        Some(_) => None,
    }
    .ok_or_else(bad)?;
    for h in reply.get(9..).unwrap_or_default() {
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
            user: info.user,
            ci: info.ci,
            cmd_pid: text(f.get(7)).parse().ok().filter(|&p: &u32| p > 0),
            since: format_ms(n(1)),
            since_ms: n(1),
            ttl_ms: n(2),
            count: n(3),
            fence: n(4),
            set: info.set,
            token_digest: text(f.get(6)),
            breaking: serde_json::from_str(&text(f.get(8))).ok(),
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
        queue,
        last_lost,
        oldest_wait_since_ms,
        damaged,
    })
}

/// One waiter of lua/status.lua's queue: {info_json, since_ms, score,
/// token_digest, writer}, of a read-write lock if `rw`; `None` if it is
/// not that.
fn waiter(v: &Value, rw: bool) -> Option<WaiterStatus> {
    let Value::Array(f) = v else { return None };
    let text = |i: usize| {
        f.get(i)
            .and_then(|v| String::from_redis_value(v.clone()).ok())
            .unwrap_or_default()
    };
    let since_ms = f
        .get(1)
        .and_then(|v| u64::from_redis_value(v.clone()).ok())
        .unwrap_or(0);
    let score: f64 = text(2).parse().ok()?;
    // A waiter queued by an rlock that kept no info shows as unknown.
    let info: HolderInfo = serde_json::from_str(&text(0)).unwrap_or_default();
    Some(WaiterStatus {
        host: info.host,
        pid: info.pid,
        user: info.user,
        priority: priority_of_score(score),
        since: if since_ms > 0 {
            format_ms(since_ms)
        } else {
            String::new()
        },
        since_ms,
        cmd: info.cmd,
        ci: info.ci,
        mode: match (rw, text(4).as_str()) {
            (false, _) => "",
            (true, "1") => "write",
            (true, _) => "read",
        }
        .to_string(),
        token_digest: text(3),
    })
}

#[cfg(test)]
mod tests;

/// lua/history.lua's reply: how many of its entries are expiries not
/// recorded yet (lua/settle.lua records them), then the entries, as
/// [`history`] reads them.
pub(super) fn history_read(reply: Value) -> Result<(u64, Vec<Event>)> {
    let bad = || Error::Protocol(format!("history returned {reply:?}"));
    let Value::Array(mut parts) = reply.clone() else {
        return Err(bad());
    };
    if parts.is_empty() {
        return Err(bad());
    }
    let Value::Int(unsettled) = parts.remove(0) else {
        return Err(bad());
    };
    let unsettled = u64::try_from(unsettled).map_err(|_| bad())?;
    Ok((unsettled, history(Value::Array(parts))?))
}

/// lua/settle.lua's reply: history entries as lua/common.lua's log_event
/// writes them (a JSON array: ms, event, fence, holder info, then field,
/// value pairs), in the order given.
pub(super) fn history(reply: Value) -> Result<Vec<Event>> {
    let entries: Vec<String> = FromRedisValue::from_redis_value(reply)
        .map_err(|e| Error::Protocol(format!("history: {e}")))?;
    entries.iter().map(|e| event(e)).collect()
}

/// One history entry (see [`history`]).
fn event(entry: &str) -> Result<Event> {
    use serde_json::Value as J;
    let bad = || Error::Protocol(format!("history: an entry rlock did not write: {entry:?}"));
    let parts: Vec<J> = serde_json::from_str(entry).map_err(|_| bad())?;
    // Numbers as Lua's cjson writes them (integers up to 14 digits, which
    // it prints whole), or as text.
    let num = |v: &J| match v {
        J::Number(n) => n.as_i64(),
        J::String(s) => s.parse().ok(),
        _ => None,
    };
    let [at, name, fence, info, rest @ ..] = &parts[..] else {
        return Err(bad());
    };
    let mut e = Event {
        at: num(at)
            .and_then(|t| u64::try_from(t).ok())
            .ok_or_else(bad)?,
        event: name.as_str().ok_or_else(bad)?.to_string(),
        fence: num(fence)
            .and_then(|f| u64::try_from(f).ok())
            .filter(|f| *f > 0),
        holder: info
            .as_str()
            .and_then(|i| serde_json::from_str::<HolderInfo>(i).ok()),
        ..Event::default()
    };
    for kv in rest.chunks(2) {
        let [J::String(k), v] = kv else { break };
        let count = || num(v).and_then(|n| u64::try_from(n).ok());
        match k.as_str() {
            "w" => e.waited_ms = count(),
            "d" => e.held_ms = count(),
            "x" => e.exit_code = num(v).and_then(|n| i32::try_from(n).ok()),
            "by" => e.by = v.as_str().filter(|b| !b.is_empty()).map(str::to_string),
            "r" => e.reason = v.as_str().map(str::to_string),
            _ => {}
        }
    }
    Ok(e)
}
