//! Giving holds back, and [`Backend`] for one server.

use std::time::Duration;

use redis::Value;

use super::Node;
use super::transport::Call;
use crate::clock::BootTime;
use crate::conn::Conn;
use crate::duration::millis;
use crate::lock::backend::{Backend, First, Watch};
use crate::lock::breaking::{Break, Broken, Holders};
use crate::lock::decode::{self, NextInLine};
use crate::lock::keys::{LockName, WAKE_TTL_MS, escape_glob, request_id};
use crate::lock::script::*;
use crate::lock::*;
use crate::{Error, Result};

/// How a release ends a hold, for the history (lua/release.lua, ARGV[7..10]).
#[derive(Clone, Copy, Default)]
pub(crate) enum Ending<'a> {
    /// Released (or overran), as the note says.
    #[default]
    Plain,
    Noted(&'a ReleaseNote),
    /// A waiter gave up (with its holder info JSON and how long, ms, it waited).
    TimedOut(&'a str, u64),
}

/// lua/release.lua's ARGV: give back one hold of `token` (every hold with
/// `all`) as request `id`; `min_hold` as [`Backend::release`] takes it;
/// `ending` for the history, whose limits are `server`'s; `hint` the
/// waiters the grant named next in line (their wake-up lists follow the
/// keys: [`release_keys`]), sent only when there is one, so that a release
/// without waiters carries no more than it did.
#[allow(clippy::too_many_arguments)]
fn release_args(
    token: &Token,
    all: bool,
    id: &str,
    min_hold: Option<Duration>,
    timeout: Duration,
    history: &HistoryLimits,
    ending: Ending,
    hint: Option<&NextInLine>,
) -> Vec<String> {
    let (how, exit, info, waited) = match ending {
        Ending::Plain => ("", String::new(), "", 0),
        Ending::Noted(n) => (
            if n.overran { "overran" } else { "" },
            n.exit_code.map(|c| c.to_string()).unwrap_or_default(),
            "",
            0,
        ),
        Ending::TimedOut(info, waited) => ("timeout", String::new(), info, waited),
    };
    let [cap, retention] = history.args();
    let mut args = vec![
        token.as_str().to_string(),
        if all { "1" } else { "0" }.to_string(),
        id.to_string(),
        millis(min_hold.unwrap_or_default()).to_string(),
        if min_hold.is_some() { "1" } else { "0" }.to_string(),
        record_ms(timeout),
        how.to_string(),
        exit,
        info.to_string(),
        waited.to_string(),
    ];
    if let Some(h) = hint {
        args.extend([
            WAKE_TTL_MS.to_string(),
            h.next.clone(),
            h.scout.clone().unwrap_or_default(),
        ]);
    }
    args.extend([cap, retention]);
    args
}

/// lua/release.lua's KEYS for a release by `token` as request `id`, with
/// the wake-up lists of `hint`'s waiters (KEYS[12], KEYS[13]).
fn release_keys(
    lock: &LockName,
    token: &Token,
    id: &str,
    hint: Option<&NextInLine>,
) -> Vec<String> {
    let mut keys = lock.release_keys(token, id);
    if let Some(h) = hint {
        keys.push(lock.wake_key_of(&h.next));
        if let Some(scout) = &h.scout {
            keys.push(lock.wake_key_of(scout));
        }
    }
    keys
}
impl Node {
    /// Leave the wait queue and drop every hold of `token`, at once (a
    /// give-up: one timeout's worth of resends, no min-hold).
    pub(crate) fn abandon(&mut self, lock: &LockName, token: &Token) -> Result<i64> {
        let timeout = self.server.timeout;
        self.release_script(lock, token, true, None, timeout, Ending::Plain)
            .map(|(n, _, _)| n)
    }

    /// [`Node::abandon`] by a waiter that gave up after `waited`: the
    /// history records a `timeout` if it was still queued.
    pub(super) fn abandon_timed_out(
        &mut self,
        lock: &LockName,
        token: &Token,
        req: &Request,
        waited: Duration,
    ) -> Result<i64> {
        let info = serde_json::to_string(&req.info).map_err(|e| Error::Protocol(e.to_string()))?;
        let timeout = self.server.timeout;
        let ending = Ending::TimedOut(&info, millis(waited));
        self.release_script(lock, token, true, None, timeout, ending)
            .map(|(n, _, _)| n)
    }

    /// [`Node::abandon`] after an acquire call that failed (`call`: how
    /// far it got), without a second wait where the first got no answer.
    /// If the call was never sent (connecting failed), nothing was granted.
    /// If it went unanswered on a connection that is still open (a server
    /// that accepted it and is silent: frozen, overloaded, or not Redis),
    /// the give-back is queued behind it on that very connection, and not
    /// waited for: Redis runs a connection's commands in order, so if the
    /// acquire ever runs, the give-back runs right after it. Otherwise (the
    /// connection dropped), as [`Node::abandon`].
    pub(super) fn abandon_unanswered(&mut self, lock: &LockName, token: &Token, call: Call) {
        if let Call::NotSent = call {
            return;
        }
        if let Call::Silent(silent) = call
            && let Conn::One(mut conn) = *silent
        {
            let id = request_id();
            let keys = lock.release_keys(token, &id);
            let args = release_args(
                token,
                true,
                &id,
                None,
                self.server.timeout,
                &self.history,
                Ending::Plain,
                None,
            );
            let mut c = redis::cmd("EVAL");
            c.arg(RELEASE.code)
                .arg(keys.len())
                .arg(&keys)
                .arg(&args[..]);
            if conn.send_packed_command(&c.get_packed_command()).is_ok() {
                return; // closed now, after the give-back
            }
        }
        let _ = self.abandon(lock, token);
    }

    /// One run of the release script (see lua/release.lua for the reply):
    /// its count or reply code, a broken hold's notice, and whether it was
    /// sent more than once. The grant's hint goes with it, and is kept
    /// while the token still holds.
    fn release_script(
        &mut self,
        lock: &LockName,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        resend_for: Duration,
        ending: Ending,
    ) -> Result<(i64, Option<String>, bool)> {
        let id = request_id();
        let hint = self.hints.take(lock, token);
        let args = release_args(
            token,
            all,
            &id,
            min_hold,
            self.server.timeout,
            &self.history,
            ending,
            hint.as_ref(),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // A min-hold given here may park the lock for longer than its
        // index entry was touched for (a grant's touch covers its lease and
        // the grant's own min-hold): the entry must last the whole park,
        // which ends by now + min-hold. The touch follows the script, as
        // an acquire's; a release that parked nothing leaves an entry that
        // `list` removes (see index.rs).
        if let Some(hold) = min_hold.filter(|d| !d.is_zero()) {
            self.refresh_next(lock, hold);
        }
        let (reply, resent): (Vec<Value>, _) = self
            .eval_traced(
                &RELEASE,
                &release_keys(lock, token, &id, hint.as_ref()),
                &args,
                || format!("release {:?}", lock.name()),
                resend_for,
            )
            .map_err(|f| f.error)?;
        let (n, notice, wake) = decode::release(&reply)?;
        if let Some(hint) = hint
            && n > 0
        {
            self.hints.keep(lock, token, hint);
        }
        self.wake(lock, wake);
        Ok((n, notice, resent))
    }
}

impl Backend for Node {
    fn detached(&self) -> Box<dyn Backend> {
        let mut node = Node::new(self.server.clone(), &self.prefix);
        node.resend_cap = self.resend_cap;
        node.answered = self.answered;
        node.history = self.history;
        Box::new(node)
    }

    fn timeout(&self) -> Duration {
        self.server.timeout
    }

    fn set_timeout(&mut self, timeout: Duration) {
        self.server.timeout = timeout;
        self.conn = None;
    }

    fn prefix(&self) -> &str {
        &self.prefix
    }

    fn acquire(&mut self, key: &str, req: &Request, watch: Watch<'_>) -> Result<Lease> {
        let lock = self.name(key)?;
        if let Some(token) = &req.reenter
            && let Some(lease) = self.reenter(key, &lock, token, req)?
        {
            return Ok(lease);
        }
        self.acquire_new(key, &lock, req, watch.cancel, watch.on_wait)
    }

    fn acquire_first(&mut self, key: &str, req: &Request) -> Result<First> {
        // `--supersede` acts when its acquire joins the queue: it gets the
        // full acquire from the start.
        if req.supersede {
            return Ok(First::Wait(req.clone()));
        }
        let waits = !matches!(req.wait, Wait::No | Wait::For(Duration::ZERO));
        let once = Request {
            wait: Wait::No,
            ..req.clone()
        };
        let watch = Watch {
            cancel: None,
            on_wait: &mut |_| {},
        };
        match self.acquire(key, &once, watch) {
            Ok(lease) => Ok(First::Granted(lease)),
            // Busy means a re-entry was tried and found the token holding
            // nothing, which it cannot come to: not again.
            Err(Error::Busy { .. }) if waits => Ok(First::Wait(Request {
                reenter: None,
                ..req.clone()
            })),
            // A failure after Redis answered is an outage a waiting
            // acquire rides out.
            Err(_) if waits && self.answered => Ok(First::Wait(req.clone())),
            Err(e) => Err(e),
        }
    }

    fn takes_token(&self) -> bool {
        true
    }

    fn release(&mut self, key: &str, token: &Token, how: &Release) -> Result<Released> {
        let lock = self.name(key)?;
        let ending = Ending::Noted(&how.note);
        let full = self.server.timeout;
        let resend_for = match how.within {
            None => RESEND_WINDOW,
            // Sent once, never again: connecting and the reply are each
            // waited for at most `within` (and the timeout).
            Some(within) => {
                self.bound_replies(full.min(within).max(Duration::from_millis(1)));
                Duration::ZERO
            }
        };
        let res = self.release_script(&lock, token, how.all, how.min_hold, resend_for, ending);
        if how.within.is_some() {
            self.bound_replies(full);
        }
        let (n, notice, resent) = res?;
        decode::released(n, notice.as_deref(), resent, key)
    }

    fn renew(&mut self, key: &str, token: &Token, renewal: &Renewal) -> Result<BootTime> {
        let lock = self.name(key)?;
        let ttl = renewal.ttl();
        let pid = renewal.cmd_pid().map(|p| p.to_string()).unwrap_or_default();
        let sent = BootTime::now();
        let timeout = self.server.timeout;
        // Naturally idempotent (it sets the lease end to at least now +
        // TTL), and validity counts from the first send: resend freely.
        let [cap, retention] = self.history.args();
        let n: Value = self.eval(
            &RENEW,
            &lock.noticed_keys(),
            &[
                token.as_str(),
                &millis(ttl).to_string(),
                &pid,
                &cap,
                &retention,
            ],
            || format!("renew {key:?}"),
            timeout,
        )?;
        let left = decode::renewed(&n, key)?;
        // A long hold keeps its index entry (rarely: see index.rs).
        self.refresh_now(&lock, ttl);
        // With --min-replicas a renewal counts only once replicas have it,
        // so a failover cannot roll it back unnoticed.
        if self.server.min_replicas > 0 {
            self.wait_replicas(&format!("renew {key:?}"), "renewal")?;
        }
        Ok(valid_until(sent, left))
    }

    fn check(&mut self, key: &str, token: &Token) -> Result<Held> {
        let lock = self.name(key)?;
        let [cap, retention] = self.history.args();
        let reply: Vec<Value> = self.eval(
            &CHECK,
            &lock.noticed_keys(),
            &[token.as_str(), &cap, &retention],
            || format!("check {key:?}"),
            RESEND_WINDOW,
        )?;
        decode::held(&reply, key)
    }

    fn break_lock(&mut self, key: &str, order: &Break) -> Result<Broken> {
        let lock = self.name(key)?;
        let (fences, resend_for) = match order.holders() {
            // Not resent: had the first send run, a resend would break
            // whoever took the lock since (the waiter it woke).
            Holders::All => (String::new(), Duration::ZERO),
            // A resend finds the fences it broke gone: it breaks nothing
            // more (each grant has a fence of its own).
            Holders::Fences(f) if f.is_empty() => return Ok(Broken::default()),
            Holders::Fences(f) => (
                f.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
                RESEND_WINDOW,
            ),
        };
        let [cap, retention] = self.history.args();
        let reply: Vec<Value> = self
            .eval(
                &BREAK,
                &lock.break_keys(),
                &[&fences, order.by(), order.reason(), &cap, &retention],
                || format!("break {key:?}"),
                resend_for,
            )
            .map_err(crate::lock::breaking::refused)?;
        let (broken, wake) = decode::broken(&reply)?;
        self.wake(&lock, wake);
        Ok(broken)
    }

    fn status(&mut self, key: &str) -> Result<Status> {
        let lock = self.name(key)?;
        let keys = lock.status_keys();
        let reply: Vec<Value> = self.eval(
            &STATUS,
            &keys,
            &[],
            || format!("status {key:?}"),
            RESEND_WINDOW,
        )?;
        decode::status(key, reply)
    }

    fn set_history(&mut self, limits: HistoryLimits) {
        self.history = limits;
    }

    fn history(&mut self, key: &str, limit: usize) -> Result<Vec<Event>> {
        let lock = self.name(key)?;
        let [cap, retention] = self.history.args();
        let reply: Value = self.eval(
            &HISTORY,
            &lock.keys(None),
            &[&limit.to_string(), &cap, &retention],
            || format!("history {key:?}"),
            RESEND_WINDOW,
        )?;
        self.settled(key, limit, reply)
    }

    fn histories(&mut self, keys: &[String], limit: usize) -> Result<Vec<Vec<Event>>> {
        self.histories_of(keys, limit)
    }

    fn record_lost(&mut self, key: &str, token: &Token, loss: &Loss) -> Result<()> {
        let lock = self.name(key)?;
        let info = serde_json::to_string(&loss.info).map_err(|e| Error::Protocol(e.to_string()))?;
        let [cap, retention] = self.history.args();
        let _: i64 = self.eval(
            &LOST,
            &lock.keys(None),
            &[token.as_str(), &info, &loss.reason, &cap, &retention],
            || format!("record the loss of {key:?}"),
            Duration::ZERO,
        )?;
        Ok(())
    }

    fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        if !self.scan_asked(pattern)? {
            return self.list_indexed(pattern);
        }
        let mut out = Vec::new();
        for n in self.scanned_names(pattern, "")? {
            // Skip hashes that merely look like ours (an empty name, a
            // foreign key under the prefix).
            let s = match self.status(&n) {
                Ok(s) => s,
                Err(Error::Invalid(_) | Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            };
            if s.held || s.waiters > 0 {
                out.push(s);
            }
        }
        Ok(out)
    }

    fn overview(&mut self, pattern: &str) -> Result<Vec<crate::lock::LockView>> {
        self.overview_of(pattern, false)
    }

    fn known(&mut self, pattern: &str) -> Result<Vec<crate::lock::LockView>> {
        self.overview_of(pattern, true)
    }

    fn known_names(&mut self, pattern: &str) -> Result<Vec<String>> {
        let mut names = self.lock_names(pattern)?;
        names.extend(self.history_names(pattern)?);
        names.sort();
        names.dedup();
        Ok(names)
    }
}

impl Node {
    /// The names of the locks whose key matches `pattern`, sorted: those
    /// in use, and maybe some that were (`overview` reads each one's
    /// state). Through the index, as [`Backend::list`].
    pub(in crate::lock) fn lock_names(&mut self, pattern: &str) -> Result<Vec<String>> {
        if self.scan_asked(pattern)? {
            return self.scanned_names(pattern, "");
        }
        Ok(self
            .index_entries(pattern)?
            .into_iter()
            .map(|(n, _, _)| n)
            .collect())
    }

    /// The names of the locks matching `pattern` with history kept,
    /// sorted: from the list of locks with history (lua/index.lua), or,
    /// with [`Index::scan`](crate::conn::Index::scan), by scanning for
    /// their counters (`P{K}:n`). Some may have none any more.
    pub(in crate::lock) fn history_names(&mut self, pattern: &str) -> Result<Vec<String>> {
        if !self.scan_asked(pattern)? {
            let shards = crate::lock::keys::known_shard_keys(&self.prefix);
            return Ok(self
                .shard_entries(&shards, pattern)?
                .into_iter()
                .map(|(n, _, _)| n)
                .collect());
        }
        self.scanned_names(pattern, ":n")
    }

    /// Check `pattern`, and say whether to find locks by scanning the whole
    /// keyspace rather than through the index of locks in use (see
    /// index.rs): only when asked, [`Index::scan`](crate::conn::Index::scan)
    /// (locks taken by an rlock older than the index are in no index).
    fn scan_asked(&self, pattern: &str) -> Result<bool> {
        crate::lock::overview::check_pattern(pattern)?;
        Ok(self.server.index.scan)
    }

    /// The lock names as rlock found them before the index: SCAN every
    /// key under the prefix (on every master of a cluster), O(keys in
    /// Redis), for the hashes `P{name}` then `tail` ("": the locks' state;
    /// ":n": their history counters), sorted.
    fn scanned_names(&mut self, pattern: &str, tail: &str) -> Result<Vec<String>> {
        let glob = format!("{}{{{pattern}}}{tail}", escape_glob(&self.prefix));
        let res = self.conn()?.scan(&glob, "hash");
        self.used();
        let keys = res.map_err(|e| self.fail(e, "list locks".into()))?;
        let start = self.prefix.len() + 1;
        let end = format!("}}{tail}");
        let mut names: Vec<String> = keys
            .into_iter()
            .filter(|k| k.len() > start + tail.len() && k.ends_with(&end))
            .map(|k| k[start..k.len() - end.len()].to_string())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }
}
