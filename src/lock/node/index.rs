//! The index of locks in use (docs/internals.md, "The index of locks in
//! use"): the touch that follows a lock's script, its refresh by long
//! holders and waiters, and `list` through the index.
//!
//! Why `list` never shows a stale entry, and never loses a live one for
//! good:
//! - every acquire (granted, queued or busy, re-entries too) touches the
//!   lock's entry (lua/part/touch.lua): inside the acquire script on one
//!   server (Sentinel, a RedLock master), after its writes; on a cluster
//!   by lua/index.lua sent right after its reply (the shard may live on
//!   another node). Either way the touch runs after the acquire script's
//!   effect;
//! - an entry's score is a "keep until" deadline covering the lease (or
//!   waiter lease) that touched it plus keep ([`Index::keep`](crate::conn::Index::keep), an hour);
//!   a holder's renewals and a waiter's heartbeats touch it again once
//!   half of keep has passed
//!   since this process last did, or when they ask for a longer lease than
//!   that touch covered: so between two touches no lease can outrun the
//!   deadline (a lease set at r < t + keep/2 ends before t + lease + keep);
//!   a grant's touch covers its --min-hold, and a release with a min-hold
//!   of its own (which may park the lock until then) touches for it, as a
//!   renewal would;
//! - `list` reads the shards, asks each named lock's state (status.lua) and
//!   shows only locks someone holds or waits for; an entry whose lock has
//!   no state is removed with lua/index_drop.lua, only if its score is
//!   still the one `list` read. A touch moves the score strictly up, and
//!   comes after its acquire's effect: if the lock was taken after `list`
//!   looked at its state, either the touch ran before the removal (the
//!   score changed: nothing removed) or after it (the entry is back).
//!
//! What is left: a touch that fails (a Redis at maxmemory refuses its
//! ZADD; a dropped connection) leaves the lock out of `list` until its next
//! refresh (at most keep/2 later), or its next acquire. The lock itself is
//! not affected: the index is never read to decide who holds a lock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::{FromRedisValue, Value};

use super::Node;
use crate::conn::Conn;
use crate::duration::millis;
use crate::lock::Status;
use crate::lock::decode;
use crate::lock::keys::{LockName, index_shard_keys, slot};
use crate::lock::script::*;
use crate::{Error, Result};

/// Calls per pipeline in `list`.
const BATCH: usize = 500;

/// Locks per lua/overview.lua call in `list` (a call costs the server
/// more than one lock's reads: see BENCHMARKS.md, section 17).
const LIST_CALL: usize = 100;

/// Calls per cluster pipeline (all masters together) in `list` and
/// `overview`.
#[cfg(feature = "cluster")]
const CLUSTER_BATCH: usize = 2_000;

/// A touch of one lock's index entry, sent behind the next script call
/// (see `Node::eval`).
pub(crate) struct Touch {
    key: String,
    /// The same shard's list of locks with history (lua/index.lua).
    known: String,
    /// The history's retention: how long the known entry outlives the
    /// index entry.
    retention: Duration,
    name: String,
    /// The lease it covers.
    lease: Duration,
    /// Where `Node::touched` notes it.
    base: String,
    /// How long the entry outlives the lease ([`Index::keep`](crate::conn::Index::keep)).
    keep: Duration,
}

impl Touch {
    /// The shard and its list of locks with history (KEYS), the lock's
    /// name and how long its entry lasts in ms (ARGV), as a script that
    /// touches takes them.
    pub(super) fn keys_args(&self) -> ([String; 2], [String; 2]) {
        (
            [self.key.clone(), self.known.clone()],
            [
                self.name.clone(),
                millis(self.lease + self.keep).to_string(),
            ],
        )
    }

    pub(crate) fn cmd(&self, verb: &str) -> redis::Cmd {
        let body = if verb == "EVAL" {
            INDEX.code
        } else {
            INDEX.sha()
        };
        let mut c = redis::cmd(verb);
        c.arg(body)
            .arg(2)
            .arg(&self.key)
            .arg(&self.known)
            .arg(&self.name)
            .arg(millis(self.lease + self.keep).to_string())
            .arg(millis(self.retention).to_string());
        c
    }
}

/// When this process last touched each lock's entry, and for which lease.
#[derive(Default)]
pub(crate) struct Touched(HashMap<String, (Instant, Duration)>);

impl Touched {
    fn due(&self, base: &str, lease: Duration, keep: Duration) -> bool {
        self.0
            .get(base)
            .is_none_or(|&(at, covered)| at.elapsed() >= keep / 2 || lease > covered)
    }

    fn note(&mut self, base: String, at: Instant, lease: Duration, keep: Duration) {
        // A long-lived process that takes many locks: forget touches too
        // old to matter (they are due anyway).
        if self.0.len() >= 4096 {
            self.0.retain(|_, (t, _)| t.elapsed() < keep / 2);
        }
        self.0.insert(base, (at, lease));
    }
}

impl Node {
    /// Touch `lock`'s index entry right after the next script call, for a
    /// lease (or waiter lease) of `lease`.
    pub(super) fn touch_next(&mut self, lock: &LockName, lease: Duration) {
        self.then = Some(self.touch(lock, lease));
    }

    /// The touch of `lock`'s index entry for a lease of `lease`.
    fn touch(&self, lock: &LockName, lease: Duration) -> Touch {
        Touch {
            key: lock.index_key(),
            known: lock.known_key(),
            retention: self.history.retention,
            name: lock.name().to_string(),
            lease,
            base: lock.redis_key().to_string(),
            keep: self.server.index.keep(),
        }
    }

    /// The touch of `lock`'s entry for a lease of `lease` as the acquire
    /// script's own (its KEYS[11..12] and ARGV[16..17], lua/acquire.lua),
    /// where the shard can share the script's call: one server, Sentinel,
    /// a RedLock master. None on a Cluster: there [`Node::touch_next`].
    pub(super) fn touch_inline(&self, lock: &LockName, lease: Duration) -> Option<Touch> {
        (!self.server.is_cluster()).then(|| self.touch(lock, lease))
    }

    /// A touch made inside a script call sent at `sent` that answered.
    pub(super) fn touched_inline(&mut self, touch: Touch, sent: Instant) {
        self.touched.note(touch.base, sent, touch.lease, touch.keep);
    }

    /// [`Node::touch_next`] if this process has not touched the entry for
    /// half of keep ([`Index::keep`](crate::conn::Index::keep)), or for a lease as long.
    pub(super) fn refresh_next(&mut self, lock: &LockName, lease: Duration) {
        if self
            .touched
            .due(lock.redis_key(), lease, self.server.index.keep())
        {
            self.touch_next(lock, lease);
        }
    }

    /// Touch `lock`'s entry now, on the connection the last call used, if
    /// due as for [`Node::refresh_next`]: after a renewal that succeeded
    /// (one that failed must not leave an entry for a lock nobody holds).
    pub(super) fn refresh_now(&mut self, lock: &LockName, lease: Duration) {
        if self
            .touched
            .due(lock.redis_key(), lease, self.server.index.keep())
        {
            let touch = self.touch(lock, lease);
            self.finish_touch(touch, Instant::now(), None);
        }
    }

    /// After the script call a touch followed: `reply` is its answer when
    /// it went in the same pipeline (one server); otherwise (a cluster, or
    /// the script went again alone after NOSCRIPT) it is sent now, on the
    /// same connection. Best effort: a failure only keeps the lock out of
    /// `list` until its next touch.
    pub(crate) fn finish_touch(&mut self, touch: Touch, sent: Instant, reply: Option<Value>) {
        let ok = match reply {
            Some(Value::ServerError(e)) if e.code() == "NOSCRIPT" => {
                self.send_touch(&touch, "EVAL")
            }
            Some(Value::ServerError(_)) => false,
            Some(_) => true,
            None => self.send_touch(&touch, "EVALSHA"),
        };
        if ok {
            self.touched.note(touch.base, sent, touch.lease, touch.keep);
        }
    }

    /// Remove the entry a touch set to `score`, unless touched since
    /// (after a script that refused: it leaves nothing written), and the
    /// entry it set in the list of locks with history, unless moved
    /// since (lua/index_drop.lua).
    pub(crate) fn untouch(&mut self, touch: &Touch, score: i64) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let score = score.to_string();
        let drop = |verb: &str| {
            let mut c = redis::cmd(verb);
            c.arg(if verb == "EVAL" {
                INDEX_DROP.code
            } else {
                INDEX_DROP.sha()
            })
            .arg(2)
            .arg(&touch.key)
            .arg(&touch.known)
            .arg(&touch.name)
            .arg(&score)
            .arg(millis(touch.retention).to_string());
            c
        };
        let res: redis::RedisResult<i64> = drop("EVALSHA").query(conn);
        if matches!(&res, Err(e) if crate::error::code(e) == Some("NOSCRIPT")) {
            let _: redis::RedisResult<i64> = drop("EVAL").query(conn);
        }
        self.used();
    }

    fn send_touch(&mut self, touch: &Touch, verb: &str) -> bool {
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let res: redis::RedisResult<i64> = touch.cmd(verb).query(conn);
        self.used();
        match res {
            Ok(_) => true,
            Err(e) if verb == "EVALSHA" && crate::error::code(&e) == Some("NOSCRIPT") => {
                self.send_touch(touch, "EVAL")
            }
            Err(e) => {
                if crate::error::is_unavailable(&e) {
                    self.conn = None;
                }
                false
            }
        }
    }

    /// `cmds` on this node's connection: one pipeline per [`BATCH`] on one
    /// server; on a cluster, one redis-rs cluster pipeline per
    /// [`CLUSTER_BATCH`], which writes each master its share before reading
    /// any reply, so the masters run their shares at the same time. A
    /// server's error answer is that command's `Err`; a failure of the
    /// connection is the whole call's.
    pub(in crate::lock) fn batch(
        &mut self,
        cmds: &[redis::Cmd],
    ) -> redis::RedisResult<Vec<redis::RedisResult<Value>>> {
        let conn = match self.conn() {
            Ok(c) => c,
            Err(_) => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "could not connect",
                )));
            }
        };
        let mut out = Vec::with_capacity(cmds.len());
        match conn {
            Conn::One(c) => {
                for chunk in cmds.chunks(BATCH) {
                    let mut packed = Vec::new();
                    for cmd in chunk {
                        cmd.write_packed_command(&mut packed);
                    }
                    // Replies read one by one: the first failure to read
                    // (a timeout, a peer that is not Redis) ends the call,
                    // where redis-rs' pipeline would wait for each reply.
                    c.send_packed_command(&packed)?;
                    for _ in chunk {
                        out.push(c.recv_response()?.extract_error());
                    }
                }
            }
            #[cfg(feature = "cluster")]
            Conn::Cluster(_) => {
                for chunk in cmds.chunks(CLUSTER_BATCH) {
                    out.extend(cluster_batch(conn, chunk)?);
                }
            }
        }
        self.used();
        Ok(out)
    }

    /// A batch that failed part-way: its connection's replies may be out
    /// of step, never reuse it.
    pub(in crate::lock) fn batch_failed(&mut self, e: redis::RedisError, what: String) -> Error {
        self.conn = None;
        self.fail(e, what)
    }

    /// The index's entries whose lock name matches the glob `pattern`:
    /// (name, shard, score as read), sorted by name, each name once. Some
    /// may name locks no longer in use (see the module's comment).
    pub(super) fn index_entries(&mut self, pattern: &str) -> Result<Vec<(String, usize, String)>> {
        let shards = index_shard_keys(&self.prefix);
        self.shard_entries(&shards, pattern)
    }

    /// The entries of the ZSETs `shards` (the index's, or the list of
    /// locks with history's) whose name matches `pattern`, as
    /// [`Node::index_entries`].
    pub(super) fn shard_entries(
        &mut self,
        shards: &[String],
        pattern: &str,
    ) -> Result<Vec<(String, usize, String)>> {
        // name -> (shard, score as read)
        let mut entries: Vec<(String, usize, String)> = Vec::new();
        let mut cursors: Vec<(usize, String)> =
            (0..shards.len()).map(|i| (i, "0".to_string())).collect();
        while !cursors.is_empty() {
            let cmds: Vec<redis::Cmd> = cursors
                .iter()
                .map(|(i, cursor)| {
                    let mut c = redis::cmd("ZSCAN");
                    c.arg(&shards[*i])
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(pattern)
                        .arg("COUNT")
                        .arg(1000);
                    c
                })
                .collect();
            let replies = self
                .batch(&cmds)
                .map_err(|e| self.batch_failed(e, "list locks".into()))?;
            let mut next = Vec::new();
            for ((i, _), reply) in cursors.iter().zip(replies) {
                let reply = reply.map_err(|e| self.fail(e, "list locks".into()))?;
                let (cursor, items): (String, Vec<String>) =
                    FromRedisValue::from_redis_value(reply)
                        .map_err(|e| Error::Protocol(format!("list locks: {e}")))?;
                for pair in items.chunks_exact(2) {
                    entries.push((pair[0].clone(), *i, pair[1].clone()));
                }
                if cursor != "0" {
                    next.push((*i, cursor));
                }
            }
            cursors = next;
        }
        entries.sort();
        entries.dedup_by(|a, b| a.0 == b.0);
        Ok(entries)
    }

    /// Every lock in use whose name matches the glob `pattern`, through
    /// the index (see the module's comment). Each named lock's state comes
    /// from lua/overview.lua's list mode, status.lua's reply for up to
    /// [`LIST_CALL`] locks a call (on a cluster, locks whose keys share a
    /// slot), all pipelined ([`Node::batch`]); a call Redis refuses
    /// (data rlock did not write) is made again lock by lock with
    /// status.lua, which tells that lock apart.
    pub(super) fn list_indexed(&mut self, pattern: &str) -> Result<Vec<Status>> {
        let shards = index_shard_keys(&self.prefix);
        let entries = self.index_entries(pattern)?;
        let mut named = Vec::new();
        let mut stale: Vec<Vec<String>> = vec![Vec::new(); shards.len()];
        for (name, shard, score) in entries {
            match LockName::new(&self.prefix, &name) {
                Ok(lock) => named.push((lock, shard, score)),
                Err(_) => stale[shard].extend([name, score]),
            }
        }
        let groups = call_groups(
            named.iter().map(|(lock, _, _)| lock.redis_key()),
            self.server.is_cluster(),
        );
        let keys: Vec<Vec<String>> = groups
            .iter()
            .map(|g| g.iter().flat_map(|&i| named[i].0.list_keys()).collect())
            .collect();
        let cmds: Vec<redis::Cmd> = keys
            .iter()
            .map(|k| {
                let mut c = self.script_cmd(&OVERVIEW);
                c.arg(k.len()).arg(k).arg(0).arg("list");
                c
            })
            .collect();
        let replies = self
            .batch(&cmds)
            .map_err(|e| self.batch_failed(e, "list locks".into()))?;
        // Each named lock's state, in `named`'s order (None: not in use).
        let mut states: Vec<Result<Option<Status>>> = (0..named.len()).map(|_| Ok(None)).collect();
        for ((group, k), reply) in groups.iter().zip(&keys).zip(replies) {
            let reply = match reply {
                Ok(v) => Ok(v),
                // The script went (SCRIPT FLUSH, a restart), or Redis 6.2
                // has no EVALSHA_RO: this call again alone, once.
                Err(e) if super::transport::retry_alone(&e) => self.eval::<Value>(
                    &OVERVIEW,
                    k,
                    &["0", "list"],
                    || "list locks".into(),
                    crate::lock::script::RESEND_WINDOW,
                ),
                Err(e) => Err(self.fail(e, "list locks".into())),
            };
            let lone = match reply {
                Ok(Value::Array(v)) if v.len() == group.len() => {
                    for (&i, entry) in group.iter().zip(v) {
                        states[i] = match entry {
                            Value::Array(r) if r.is_empty() => Ok(None),
                            Value::Array(r) => decode::status(named[i].0.name(), r).map(Some),
                            v => Err(Error::Protocol(format!("list returned {v:?}"))),
                        };
                    }
                    false
                }
                Ok(v) => return Err(Error::Protocol(format!("list returned {v:?}"))),
                // A key of another type somewhere in the call.
                Err(Error::Invalid(_) | Error::Conflict(_)) => true,
                Err(e) => return Err(e),
            };
            if lone {
                for &i in group {
                    let name = named[i].0.name().to_string();
                    states[i] = crate::lock::backend::Backend::status(self, &name).map(Some);
                }
            }
        }
        let mut out = Vec::new();
        for ((lock, shard, score), status) in named.into_iter().zip(states) {
            match status {
                Ok(Some(s)) if s.held || s.waiters > 0 => out.push(s),
                // No state, or data rlock did not write: not a lock in use.
                Ok(_) | Err(Error::Invalid(_) | Error::Conflict(_)) => {
                    stale[shard].extend([lock.name().to_string(), score]);
                }
                Err(e) => return Err(e),
            }
        }
        for (shard, pairs) in stale.iter().enumerate() {
            // Tidying only, by a user that may write: a failure leaves the
            // entries for the next list, and a user refused the write (a
            // monitor user: NOPERM) leaves them to the touches, which drop
            // entries past their deadline (lua/part/touch.lua), and to the
            // shard's expiry.
            if pairs.is_empty() || self.read_only {
                continue;
            }
            let args: Vec<&str> = pairs.iter().map(String::as_str).collect();
            let res: Result<i64> = self.eval(
                &INDEX_DROP,
                std::slice::from_ref(&shards[shard]),
                &args,
                || "tidy the index of locks".into(),
                std::time::Duration::ZERO,
            );
            self.note_refused(&res);
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

/// The locks named by `keys` (their state hash keys), as groups of
/// indexes into `keys`, one group a script call: up to [`LIST_CALL`] in a
/// row; on a cluster (`cluster`), up to as many whose keys share a slot,
/// each group in the order of its first lock.
pub(in crate::lock) fn call_groups<'a>(
    keys: impl Iterator<Item = &'a str>,
    cluster: bool,
) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    // slot -> the group still filling for it
    let mut open: HashMap<u16, usize> = HashMap::new();
    for (i, key) in keys.enumerate() {
        let slot = if cluster { slot(key) } else { 0 };
        match open.get(&slot) {
            Some(&g) if groups[g].len() < LIST_CALL => groups[g].push(i),
            _ => {
                open.insert(slot, groups.len());
                groups.push(vec![i]);
            }
        }
    }
    groups
}

/// `cmds` in one cluster pipeline (see [`Node::batch`]). redis-rs reads
/// every reply of it, then fails it whole when any is an error answer
/// (a key rlock did not write, NOSCRIPT after a restart, MOVED while slots
/// move): those calls are sent again one by one, as before pipelines, so
/// that each gets its own answer (redirects followed) and the caller its
/// own fallback (EVAL after NOSCRIPT).
#[cfg(feature = "cluster")]
fn cluster_batch(
    conn: &mut Conn,
    cmds: &[redis::Cmd],
) -> redis::RedisResult<Vec<redis::RedisResult<Value>>> {
    let Conn::Cluster(c) = conn else {
        return one_by_one(conn, cmds);
    };
    let mut pipe = redis::cluster::cluster_pipe();
    for cmd in cmds {
        pipe.add_command(cmd.clone());
    }
    match c.run(|c| pipe.query::<Vec<Value>>(c)) {
        Ok(replies) if replies.len() == cmds.len() => Ok(replies.into_iter().map(Ok).collect()),
        Ok(replies) => Err(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "cluster pipeline",
            format!("{} replies to {} calls", replies.len(), cmds.len()),
        ))),
        Err(e) if crate::error::is_unavailable(&e) => Err(e),
        Err(_) => one_by_one(conn, cmds),
    }
}

/// `cmds` one at a time (a cluster routes each by its key).
#[cfg(feature = "cluster")]
fn one_by_one(
    conn: &mut Conn,
    cmds: &[redis::Cmd],
) -> redis::RedisResult<Vec<redis::RedisResult<Value>>> {
    let mut out = Vec::with_capacity(cmds.len());
    for cmd in cmds {
        match cmd.query::<Value>(conn) {
            Err(e) if crate::error::is_unavailable(&e) => return Err(e),
            r => out.push(r),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_calls_group_locks_by_slot_on_a_cluster_only() {
        // {a} and {x} share no slot; "rlock:{a}" and "other{a}" do.
        let keys = ["rlock:{a}", "rlock:{x}", "other{a}"];
        assert_ne!(slot(keys[0]), slot(keys[1]));
        assert_eq!(slot(keys[0]), slot(keys[2]));
        assert_eq!(call_groups(keys.into_iter(), true), [vec![0, 2], vec![1]]);
        assert_eq!(call_groups(keys.into_iter(), false), [vec![0, 1, 2]]);
        // At most LIST_CALL locks a call, in order.
        let many: Vec<String> = (0..LIST_CALL * 2 + 1).map(|_| "k{s}".to_string()).collect();
        for cluster in [false, true] {
            let groups = call_groups(many.iter().map(String::as_str), cluster);
            let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
            assert_eq!(sizes, [LIST_CALL, LIST_CALL, 1]);
            assert_eq!(groups.concat(), (0..many.len()).collect::<Vec<_>>());
        }
        assert!(call_groups(std::iter::empty(), true).is_empty());
    }
}
