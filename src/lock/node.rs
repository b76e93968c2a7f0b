//! One Redis server and a connection to it, with the lock operations.

use std::time::{Duration, Instant};

use redis::{FromRedisValue, Value};

use super::backend::Backend;
use super::decode::{self, Beat};
use super::keys::{LockName, WAKE_TTL_MS, escape_glob, request_id};
use super::script::*;
use super::types::*;
use super::wait::*;
use crate::clock::BootTime;
use crate::conn::{Conn, IDLE_RECONNECT, Server};
use crate::duration::{human, millis};
use crate::{Busy, Cancel, Error, Result};

/// lua/release.lua's ARGV: give back one hold of `token` (every hold with
/// `all`) as request `id`; `min_hold` as [`Backend::release`] takes it.
fn release_args(
    token: &Token,
    all: bool,
    id: &str,
    min_hold: Option<Duration>,
    timeout: Duration,
) -> [String; 6] {
    [
        token.as_str().to_string(),
        if all { "1" } else { "0" }.to_string(),
        id.to_string(),
        millis(min_hold.unwrap_or_default()).to_string(),
        if min_hold.is_some() { "1" } else { "0" }.to_string(),
        record_ms(timeout),
    ]
}

pub(crate) enum Attempt {
    Granted {
        fence: u64,
        count: u64,
    },
    /// Busy, the lock's fencing counter on that server, and the first
    /// holder's fingerprint (see lua/wait.lua; "" when nobody holds it).
    Busy(Busy, u64, String),
    NotHeld,
}

/// One Redis server and a connection to it, with the lock operations.
pub(crate) struct Node {
    pub(super) server: Server,
    pub(super) conn: Option<Conn>,
    pub(super) last_used: Instant,
    pub(super) prefix: String,
    /// Upper bound on any call's resend window.
    pub(super) resend_cap: Duration,
    /// The server has answered this process before: only then is a failure
    /// an outage worth riding out (a wrong or silent address fails at once).
    pub(super) answered: bool,
    /// The last script call was sent more than once (see `eval`).
    pub(super) resent: bool,
    /// The last script call was sent (it may have run): false when it
    /// failed before, connecting.
    pub(super) sent: bool,
    /// The connection the last script call went unanswered on (a timeout),
    /// still open: only ever used to queue a give-back behind that call
    /// (see [`Node::abandon_unanswered`]), never to read from.
    pub(super) silent: Option<Conn>,
}

impl Node {
    /// A node for `server`; it connects on first use.
    pub(crate) fn new(server: Server, prefix: &str) -> Node {
        Node {
            server,
            conn: None,
            last_used: Instant::now(),
            prefix: prefix.to_string(),
            resend_cap: RESEND_WINDOW,
            answered: false,
            resent: false,
            sent: false,
            silent: None,
        }
    }

    /// Send each call once, never again after a failure: for RedLock, whose
    /// masters each get one short attempt and whose retries are its own.
    pub(crate) fn without_resends(mut self) -> Node {
        self.resend_cap = Duration::ZERO;
        self
    }

    /// Connect now, to report an unusable server at once.
    pub(crate) fn connect(&mut self) -> Result<()> {
        self.conn = Some(self.server.connect()?);
        // A cluster connection has read the slot map from a node.
        self.answered |= self.server.is_cluster();
        self.last_used = Instant::now();
        Ok(())
    }

    pub(super) fn conn(&mut self) -> Result<&mut Conn> {
        if self.resend_cap.is_zero() && self.last_used.elapsed() > IDLE_RECONNECT {
            self.conn = None;
        }
        self.last_used = Instant::now();
        if self.conn.is_none() {
            self.conn = Some(self.server.connect()?);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// Note that a command just finished, so the connection is fresh.
    pub(super) fn used(&mut self) {
        self.last_used = Instant::now();
    }

    pub(super) fn fail(&mut self, err: redis::RedisError, what: String) -> Error {
        // After an I/O error or timeout the reply stream may be out of step:
        // never reuse that connection.
        if crate::error::is_unavailable(&err) {
            self.conn = None;
        }
        // A timeout names the server itself (see `no_answer`).
        let what = if (crate::error::is_unavailable(&err) && !err.is_timeout())
            || crate::error::is_oom(&err)
        {
            format!("{what} on Redis at {}", self.server.label)
        } else {
            what
        };
        let err = crate::error::no_answer(err, &self.server.label, self.server.timeout);
        Error::from_redis(err, &what)
    }
    /// One run of the acquire script. A new grant's fence is at least
    /// `floor` + 1 (RedLock; 0 for one Redis). `later`: this token has
    /// called before (it may have queued; see `--supersede`).
    // The script's own arguments, each with its reason; a struct would only
    // rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attempt(
        &mut self,
        lock: &LockName,
        token: &Token,
        req: &Request,
        queue: bool,
        reenter_only: bool,
        floor: u64,
        until: Option<Instant>,
        later: bool,
    ) -> Result<Attempt> {
        let info = serde_json::to_string(&req.info).map_err(|e| Error::Protocol(e.to_string()))?;
        let ttl = millis(req.ttl).to_string();
        let limit = req.limit.to_string();
        let lease = millis(waiter_lease(req.ttl)).to_string();
        let flag = |b| if b { "1" } else { "0" };
        let id = request_id();
        let floor = floor.to_string();
        let min_hold = millis(req.min_hold).to_string();
        let record = record_ms(self.server.timeout);
        let supersede = match (req.supersede, later) {
            (false, _) => "0",
            (true, false) => "1",
            (true, true) => "2",
        };
        let resend_for = until.map_or(RESEND_WINDOW, |u| {
            u.saturating_duration_since(Instant::now())
                .min(RESEND_WINDOW)
        });
        let reply: Vec<Value> = self.eval(
            &ACQUIRE,
            &lock.request_keys(token, &id),
            &[
                token.as_str(),
                &ttl,
                &limit,
                &info,
                flag(queue),
                &lease,
                flag(reenter_only),
                req.mode.arg(),
                &id,
                &floor,
                &min_hold,
                &record,
                supersede,
            ],
            || format!("acquire {:?}", lock.name()),
            req.ttl.min(resend_for),
        )?;
        // Waiters the script says may now take the lock follow the answer.
        let (attempt, wake) = decode::acquire(&reply, lock.name(), req.limit);
        self.wake(lock, wake);
        let attempt = attempt?;
        if let Attempt::Granted { count: 1, .. } = attempt
            && self.server.min_replicas > 0
        {
            self.confirm_replicas(lock, token)?;
        }
        Ok(attempt)
    }

    /// The server's `run_id` (INFO server): two URLs that reach one server
    /// give the same. `None` when the server does not say (an ACL without
    /// +info, a server that is no redis-server).
    pub(crate) fn run_id(&mut self) -> Result<Option<String>> {
        let res: redis::RedisResult<String> = redis::cmd("INFO").arg("server").query(self.conn()?);
        self.used();
        match res {
            Ok(info) => Ok(info
                .lines()
                .find_map(|l| l.strip_prefix("run_id:"))
                .map(|id| id.trim().to_string())
                .filter(|id| !id.is_empty())),
            Err(e)
                if crate::error::code(&e) == Some("NOPERM")
                    || !crate::error::is_unavailable(&e) =>
            {
                Ok(None)
            }
            Err(e) => Err(self.fail(e, "INFO server".into())),
        }
    }

    /// Replication is asynchronous: a failover can lose a fresh grant. With
    /// --min-replicas N, wait until N replicas have it, or give it back.
    fn confirm_replicas(&mut self, lock: &LockName, token: &Token) -> Result<()> {
        let res = self.wait_replicas(&format!("acquire {:?}", lock.name()), "grant");
        if res.is_err() {
            // Unconfirmed is as good as refused: give the grant back.
            let _ = self.abandon(lock, token);
        }
        res
    }

    /// WAIT until `min_replicas` replicas have every write this connection
    /// made (the grant or renewal just done), within 4/5 of the timeout.
    /// WAIT is not consensus: it says the replicas received the write, not
    /// that a failover will promote one of them, nor that they keep it.
    fn wait_replicas(&mut self, what: &str, write: &str) -> Result<()> {
        let want = self.server.min_replicas;
        let within = self.server.timeout * 4 / 5;
        let res: redis::RedisResult<i64> = redis::cmd("WAIT")
            .arg(want)
            .arg(millis(within))
            .query(self.conn()?);
        self.used();
        let acked = res.map_err(|e| self.fail(e, format!("{what}: WAIT")))?;
        if acked >= i64::from(want) {
            return Ok(());
        }
        Err(Error::Unavailable {
            context: format!(
                "{what}: the {write} reached {acked} of the {want} replicas \
                 --min-replicas asks for within {}",
                human(within)
            ),
            // Not an outage: nothing to ride out or resend for.
            cause: redis::RedisError::from((redis::ErrorKind::Client, "too few replicas")),
        })
    }

    /// After a failure of a waiting acquire: ride it out (see
    /// [`Outage::ride_out`]) if this server has answered before and the
    /// failure may pass.
    fn ride_out(&self, e: &Error, outage: &mut Outage, w: &Waiting) -> bool {
        self.answered && outage.ride_out(self.passing(e), w.waits(), w.deadline())
    }

    /// Is `e` an outage that may pass (see `resendable`)?
    fn passing(&self, e: &Error) -> bool {
        matches!(e, Error::Unavailable { cause, .. }
            if resendable(cause, self.server.is_cluster(), self.server.follows_failovers()))
    }

    fn give_up(&mut self, lock: &LockName, token: &Token, w: &Waiting) -> Error {
        let _ = self.abandon(lock, token);
        w.interrupted()
    }

    /// Block on our wake-up list for at most `nap`. Whether we were woken.
    fn nap(&mut self, wake_key: &str, nap: Duration) -> Result<bool> {
        // At least 2 ms: Redis 6.2 turns a timeout of "0.001" seconds into
        // 0.999... ms, truncates that to 0, and 0 blocks for ever (Redis 7
        // rounds up); the read then timed out and the acquire failed.
        let nap = nap.max(Duration::from_millis(2));
        let timeout = self.server.timeout;
        let conn = self.conn()?;
        let _ = conn.set_read_timeout(Some(nap + timeout));
        let res: redis::RedisResult<Option<(String, String)>> = redis::cmd("BLPOP")
            .arg(wake_key)
            .arg(format!("{:.3}", nap.as_secs_f64()))
            .query(conn);
        let _ = conn.set_read_timeout(Some(timeout));
        self.used();
        res.map(|r| r.is_some())
            .map_err(|e| self.fail(e, "wait for the lock".into()))
    }

    /// Leave the wait queue and drop every hold of `token`, at once (a
    /// give-up: one timeout's worth of resends, no min-hold).
    pub(crate) fn abandon(&mut self, lock: &LockName, token: &Token) -> Result<i64> {
        let timeout = self.server.timeout;
        self.release_script(lock, token, true, None, timeout)
    }

    /// [`Node::abandon`] after an acquire call that failed, without a
    /// second wait where the first got no answer. If the call was never
    /// sent (connecting failed), nothing was granted. If it went unanswered
    /// on a connection that is still open (a server that accepted it and
    /// is silent: frozen, overloaded, or not Redis), the give-back is queued
    /// behind it on that very connection, and not waited for: Redis runs a
    /// connection's commands in order, so if the acquire ever runs, the
    /// give-back runs right after it. (On a new connection it waited for
    /// an answer as long again, so `acquire` and `exec` gave up after twice
    /// `--connect-timeout`.) Otherwise (the connection dropped), as before.
    fn abandon_unanswered(&mut self, lock: &LockName, token: &Token) {
        if !self.sent {
            return;
        }
        if let Some(Conn::One(mut conn)) = self.silent.take() {
            let id = request_id();
            let keys = lock.request_keys(token, &id);
            let args = release_args(token, true, &id, None, self.server.timeout);
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

    /// [`Backend::release`] sent once, never again: connecting and the
    /// reply are each waited for at most `within` (and the timeout).
    pub(crate) fn release_once_within(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        within: Duration,
    ) -> Result<Released> {
        let full = self.server.timeout;
        let bounded = full.min(within).max(Duration::from_millis(1));
        self.bound_replies(bounded);
        let res = self.release_for(key, token, all, min_hold, Duration::ZERO);
        self.bound_replies(full);
        res
    }

    /// Wait at most `timeout` for a connection or a reply from now on.
    fn bound_replies(&mut self, timeout: Duration) {
        self.server.timeout = timeout;
        if let Some(c) = &mut self.conn
            && (c.set_read_timeout(Some(timeout)).is_err()
                || c.set_write_timeout(Some(timeout)).is_err())
        {
            self.conn = None;
        }
    }

    fn release_for(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        resend_for: Duration,
    ) -> Result<Released> {
        let lock = self.name(key)?;
        let n = self.release_script(&lock, token, all, min_hold, resend_for)?;
        decode::released(n, self.resent, key)
    }

    /// One run of the release script (see lua/release.lua for the reply).
    fn release_script(
        &mut self,
        lock: &LockName,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        resend_for: Duration,
    ) -> Result<i64> {
        let id = request_id();
        let args = release_args(token, all, &id, min_hold, self.server.timeout);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply: Vec<Value> = self.eval(
            &RELEASE,
            &lock.request_keys(token, &id),
            &args,
            || format!("release {:?}", lock.name()),
            resend_for,
        )?;
        let (n, wake) = decode::release(&reply)?;
        self.wake(lock, wake);
        Ok(n)
    }

    /// Wake the waiters a script named (see lua/common.lua): push to each
    /// one's wake-up list, in one round trip (lua/wake.lua, so that every
    /// key is declared and a cluster routes it). Best effort, sent once: a
    /// waiter that is not woken finds out at its next heartbeat.
    fn wake(&mut self, lock: &LockName, tokens: &[Value]) {
        let keys: Vec<String> = tokens
            .iter()
            .filter_map(|t| String::from_redis_value(t.clone()).ok())
            .map(|t| lock.wake_key_of(&t))
            .collect();
        if !keys.is_empty() {
            let _: Result<i64> = self.eval(
                &WAKE,
                &keys,
                &[&WAKE_TTL_MS.to_string()],
                || format!("wake the waiters for {:?}", lock.name()),
                Duration::ZERO,
            );
        }
    }

    /// A waiter's heartbeat (lua/wait.lua): keep `token`'s place in the
    /// queue, and learn the holder's time left and, when the first holder
    /// is no longer the one whose fingerprint is `known` (unless ""), who
    /// holds it now. `None` if it must run the acquire script now (its
    /// place is gone, or a lease ended).
    fn heartbeat(
        &mut self,
        lock: &LockName,
        token: &Token,
        req: &Request,
        known: &str,
    ) -> Result<Option<Beat>> {
        let reply: Vec<Value> = self.eval(
            &WAIT,
            &lock.keys(None),
            &[
                token.as_str(),
                &millis(waiter_lease(req.ttl)).to_string(),
                known,
            ],
            || format!("wait for {:?}", lock.name()),
            RESEND_WINDOW,
        )?;
        decode::beat(&reply)
    }
}

impl Backend for Node {
    fn answered(&self) -> bool {
        self.answered
    }

    fn is_single(&self) -> bool {
        true
    }

    fn detached(&self) -> Box<dyn Backend> {
        Box::new(Node {
            server: self.server.clone(),
            conn: None,
            last_used: Instant::now(),
            prefix: self.prefix.clone(),
            resend_cap: self.resend_cap,
            answered: self.answered,
            resent: false,
            sent: false,
            silent: None,
        })
    }

    fn timeout(&self) -> Duration {
        self.server.timeout
    }

    fn set_timeout(&mut self, timeout: Duration) {
        self.server.timeout = timeout;
        self.conn = None;
    }

    fn name(&self, key: &str) -> Result<LockName> {
        LockName::new(&self.prefix, key)
    }

    fn acquire(
        &mut self,
        key: &str,
        req: &Request,
        cancel: Option<&Cancel>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease> {
        let lock = self.name(key)?;
        let lease =
            |token, fence, count, sent| Lease::granted(key, token, fence, count, req.ttl, sent);
        if let Some(token) = &req.reenter {
            let mut late = 0;
            loop {
                let sent = BootTime::now();
                let Attempt::Granted { fence, count } =
                    self.attempt(&lock, token, req, false, true, 0, None, false)?
                else {
                    break;
                };
                let lease = lease(token.clone(), fence, count, sent);
                if !lease.valid_until.passed() {
                    return Ok(lease);
                }
                // The re-entry's reply came after its validity deadline: the
                // same path to two holders as a late fresh grant (see the
                // loop below) -- the lease may have run out on the server,
                // and another client taken the lock, while the reply was on
                // its way. Give back the hold it added (release one) and
                // re-enter again; if that release fails, stop rather than
                // pile up holds nobody releases (they end with the TTL).
                let took = sent.elapsed();
                late += 1;
                let released = self.release(key, token, false, None);
                if late >= MAX_FAILURES || released.is_err() {
                    return Err(late_grant(key, took, req.ttl));
                }
                std::thread::sleep(backoff(late));
            }
        }
        let mut w = Waiting::new(key, req.wait, cancel);
        let heartbeat = heartbeat(req.ttl);
        let mut token = Token::generate();
        let mut failures = 0;
        let mut outage = Outage::default();
        // This token has called (and may have queued) before.
        let mut later = false;
        loop {
            if w.cancelled() {
                return Err(self.give_up(&lock, &token, &w));
            }
            let sent = BootTime::now();
            let attempt =
                self.attempt(&lock, &token, req, w.waits(), false, 0, w.deadline(), later);
            later = true;
            let (mut busy, mut holder_id) = match attempt {
                Ok(Attempt::Granted { fence, count }) => {
                    if w.cancelled() {
                        return Err(self.give_up(&lock, &token, &w));
                    }
                    let lease = lease(token, fence, count, sent);
                    if !lease.valid_until.passed() {
                        return Ok(lease);
                    }
                    // The grant arrived after its validity deadline (sent +
                    // TTL - drift): a stalled or paused Redis, a slow
                    // network, a starved client. The script may have run as
                    // soon as the request was sent, so the lease may already
                    // have ended on the server and a waiter taken the lock
                    // while the reply was on its way: using it would make
                    // two holders. Never use it: give it back, as after a
                    // timeout, and try again with a new token. The lock is
                    // not busy, the server was slow, so this counts as a
                    // transient failure: bounded retries, for -n too; a
                    // waiting acquire also stops at its deadline.
                    let took = sent.elapsed();
                    let _ = self.abandon(&lock, &lease.token);
                    failures += 1;
                    let out_of_time = w.waits() && w.left() == Some(Duration::ZERO);
                    if failures >= MAX_FAILURES || out_of_time {
                        return Err(late_grant(key, took, req.ttl));
                    }
                    // A new token, but the same call: with --supersede it
                    // is no newer than a waiter that queued meanwhile, so
                    // it asks as a later call ('2', lua/acquire.lua), which
                    // never replaces one and is replaced by a newer one.
                    token = Token::generate();
                    std::thread::sleep(backoff(failures));
                    continue;
                }
                Ok(Attempt::Busy(b, _, id)) => (b, id),
                Ok(Attempt::NotHeld) => {
                    return Err(Error::Protocol("acquire: unexpected re-entry reply".into()));
                }
                Err(e) => {
                    // Resent for a while already (see eval). Going on, the
                    // same token asks again: if one of the lost replies was
                    // a grant, the script hands that grant back (a fresh
                    // acquire's token holds nothing else), so no grant is
                    // left orphaned. Giving up, the token is given back.
                    if w.cancelled() {
                        return Err(self.give_up(&lock, &token, &w));
                    }
                    if !self.ride_out(&e, &mut outage, &w) {
                        if matches!(e, Error::Unavailable { .. }) {
                            self.abandon_unanswered(&lock, &token);
                        }
                        return Err(e);
                    }
                    continue;
                }
            };
            failures = 0;
            outage.over();
            if let Err(e) = w.busy(Some(&busy), on_wait) {
                if matches!(e, Error::Timeout { .. }) {
                    let _ = self.abandon(&lock, &token);
                }
                return Err(e);
            }
            // Tell a canceller where to poke us (only now: an uncontended
            // acquire never needs it), then look at the flag once more: the
            // script empties our wake-up list, which may have swallowed a
            // poke.
            if let Some(c) = cancel {
                c.watch(&self.server, &lock.wake_key(&token));
            }
            if w.cancelled() {
                return Err(self.give_up(&lock, &token, &w));
            }
            // Sleep until woken through Redis, but never past the end of
            // the first lease of a holder or another waiter (a crashed one
            // sends no wake-up) or our own deadline; in between, only check
            // in now and then to keep our place (lua/wait.lua), which costs
            // the server a few commands, not the whole acquire script.
            let mut quiet = busy.expires_in;
            loop {
                let mut nap = heartbeat;
                if quiet > Duration::ZERO {
                    nap = nap.min(quiet + Duration::from_millis(1));
                }
                if let Some(left) = w.left() {
                    nap = nap.min(left);
                }
                let checked = match self.nap(&lock.wake_key(&token), nap) {
                    Ok(false) if w.left() != Some(Duration::ZERO) && !w.cancelled() => {
                        // With several holders the first by lease end may
                        // change at every renewal: do not ask then.
                        let known = if busy.holders == 1 { &*holder_id } else { "" };
                        self.heartbeat(&lock, &token, req, known)
                    }
                    Ok(_) => break, // woken, cancelled or out of time: look
                    Err(e) => Err(e),
                };
                match checked {
                    Ok(Some(beat)) => {
                        quiet = beat.quiet;
                        busy.expires_in = beat.quiet;
                        busy.holder_ttl = beat.holder_ttl;
                        if let Some((holder, since_ms, position, holders)) = beat.changed {
                            busy.holder = holder;
                            busy.since_ms = since_ms;
                            busy.position = position;
                            busy.holders = holders;
                            holder_id = beat.holder_id;
                        }
                        w.observe(&mut busy, on_wait);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        // A signal cuts a blocking read with a socket
                        // timeout short (EINTR, never restarted), a moment
                        // before the signal thread flags the cancellation;
                        // a dropped connection may be a blip, or a
                        // failover. The connection is gone either way:
                        // look again with a new one.
                        if w.cancelled() {
                            return Err(self.give_up(&lock, &token, &w));
                        }
                        if !self.ride_out(&e, &mut outage, &w) {
                            let _ = self.abandon(&lock, &token);
                            return Err(e);
                        }
                        break;
                    }
                }
            }
        }
    }

    fn release(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
    ) -> Result<Released> {
        self.release_for(key, token, all, min_hold, RESEND_WINDOW)
    }

    fn release_within(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        within: Duration,
    ) -> Result<Released> {
        self.release_once_within(key, token, all, min_hold, within)
    }

    fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        let lock = self.name(key)?;
        let sent = BootTime::now();
        let timeout = self.server.timeout;
        // Naturally idempotent (it sets the lease end to at least now +
        // TTL), and validity counts from the first send: resend freely.
        let n: i64 = self.eval(
            &RENEW,
            &lock.keys(None),
            &[token.as_str(), &millis(ttl).to_string()],
            || format!("renew {key:?}"),
            timeout,
        )?;
        let left = decode::renewed(n, key)?;
        // With --min-replicas a renewal counts only once replicas have it,
        // so a failover cannot roll it back unnoticed.
        if self.server.min_replicas > 0 {
            self.wait_replicas(&format!("renew {key:?}"), "renewal")?;
        }
        Ok(valid_until(sent, left))
    }

    fn check(&mut self, key: &str, token: &Token) -> Result<Held> {
        let lock = self.name(key)?;
        let reply: Vec<i64> = self.eval(
            &CHECK,
            &lock.keys(None),
            &[token.as_str()],
            || format!("check {key:?}"),
            RESEND_WINDOW,
        )?;
        decode::held(&reply, key)
    }

    fn status(&mut self, key: &str) -> Result<Status> {
        let lock = self.name(key)?;
        let mut keys = lock.keys(None);
        keys.push(lock.lost_key());
        let reply: Vec<Value> = self.eval(
            &STATUS,
            &keys,
            &[],
            || format!("status {key:?}"),
            RESEND_WINDOW,
        )?;
        decode::status(key, reply)
    }

    fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        if pattern.chars().any(char::is_control) {
            return Err(Error::Usage(format!(
                "pattern {pattern:?} contains control characters"
            )));
        }
        let glob = format!("{}{{{pattern}}}", escape_glob(&self.prefix));
        let res = self.conn()?.scan(&glob, "hash");
        self.used();
        let keys = res.map_err(|e| self.fail(e, "list locks".into()))?;
        let start = self.prefix.len() + 1;
        let mut names: Vec<String> = keys
            .into_iter()
            .filter(|k| k.len() > start && k.ends_with('}'))
            .map(|k| k[start..k.len() - 1].to_string())
            .collect();
        names.sort();
        names.dedup();
        let mut out = Vec::new();
        for n in names {
            // Skip hashes that merely look like ours (an empty name, a
            // foreign key under the prefix).
            let s = match self.status(&n) {
                Ok(s) => s,
                Err(Error::Usage(_) | Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            };
            if s.held || s.waiters > 0 {
                out.push(s);
            }
        }
        Ok(out)
    }
}
