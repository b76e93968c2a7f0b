//! Acquire on one server: one run of the acquire script, and the loop
//! around it (re-entry, late grants, outages, waiting for a busy lock).

use std::time::{Duration, Instant};

use redis::Value;

use super::transport::Failed;
use super::{Attempt, CLAIM, Node, Outcome, SCOUT};
use crate::clock::BootTime;
use crate::duration::millis;
use crate::lock::backend::Backend;
use crate::lock::decode::{self, Beat};
use crate::lock::keys::{LockName, request_id};
use crate::lock::lease::late_grant;
use crate::lock::script::*;
use crate::lock::wait::*;
use crate::lock::*;
use crate::{Busy, Cancel, Error, Result};

impl Node {
    /// Note a RedLock waiter on this master for `keep` from now (`None`:
    /// drop it), with `info` (JSON) as its acquire sends it: only what
    /// `status` shows of who waits (lua/redlock_wait.lua), no place in
    /// line. `waiter` is the wait's own random id, not a token. Sent once,
    /// without resends: a note that fails is made again at the next
    /// round, or goes with its deadline.
    pub(crate) fn note_waiter(
        &mut self,
        lock: &LockName,
        waiter: &str,
        keep: Option<Duration>,
        info: &str,
    ) -> Result<i64> {
        let keep = keep.map_or(0, |k| millis(k).max(1)).to_string();
        self.eval(
            &REDLOCK_WAIT,
            &[lock.waiters_key()],
            &[waiter, &keep, info],
            || format!("note a waiter of {:?}", lock.name()),
            Duration::ZERO,
        )
    }

    /// One run of the acquire script, as `a` asks. A failure says how far
    /// the call got (see [`Node::abandon_unanswered`]).
    pub(crate) fn attempt(&mut self, a: &Attempt) -> std::result::Result<Outcome, Failed> {
        let Attempt {
            lock,
            token,
            req,
            queue,
            reenter_only,
            floor,
            until,
            later,
            waited,
        } = *a;
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
        let waited = millis(waited).to_string();
        let priority = req.priority.to_string();
        let [cap, retention] = self.history.args();
        let resend_for = until.map_or(RESEND_WINDOW, |u| {
            u.saturating_duration_since(Instant::now())
                .min(RESEND_WINDOW)
        });
        // Every acquire call notes the lock in the index of locks in use
        // (granted, queued or busy: in use either way; see index.rs): in
        // the script itself where the shard can share its call, else
        // right after it. The lease covers a waiter's lease too, and a
        // --min-hold that keeps the lock past its TTL.
        let cover = req.ttl.max(req.min_hold);
        let inline = self.touch_inline(lock, cover);
        let mut keys = lock.request_keys(token, &id);
        let [name, ms] = match &inline {
            Some(t) => {
                let (k, a) = t.keys_args();
                keys.extend(k);
                a
            }
            None => {
                self.touch_next(lock, cover);
                [String::new(), "0".to_string()]
            }
        };
        let sent = Instant::now();
        let (reply, _): (Vec<Value>, _) = self.eval_traced(
            &ACQUIRE,
            &keys,
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
                &waited,
                &priority,
                &name,
                &ms,
                &cap,
                &retention,
            ],
            || format!("acquire {:?}", lock.name()),
            req.ttl.min(resend_for),
        )?;
        if let Some(t) = inline {
            self.touched_inline(t, sent);
        }
        // Waiters the script says may now take the lock follow the answer.
        let (attempt, wake) = decode::acquire(&reply, lock.name(), req.limit);
        self.wake(lock, wake);
        let outcome = attempt?;
        // A new grant made while others wait names the next in line: its
        // release wakes them in the same call (lua/acquire.lua).
        if let Outcome::Granted { count: 1, .. } = outcome
            && let Some(hint) = decode::next_in_line(wake)
        {
            self.hints.keep(lock, token, hint);
        }
        if let Outcome::Granted { count: 1, .. } = outcome
            && self.server.min_replicas > 0
        {
            self.confirm_replicas(lock, token)?;
        }
        Ok(outcome)
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
    /// After a failure of a waiting acquire: ride it out (see
    /// [`Outage::ride_out`]) if this server has answered before and the
    /// failure may pass. Err: the error that ends the wait (after an outage,
    /// one that says since when Redis has not answered: [`Outage::ended`]).
    fn ride_out(&self, e: Error, outage: &mut Outage, w: &Waiting) -> Result<()> {
        let silent = match &e {
            Error::Unavailable { cause, .. } if cause.is_timeout() => self.server.timeout,
            _ => Duration::ZERO,
        };
        let passing = self.passing(&e);
        if self.answered && outage.ride_out(passing, w.waits(), w.deadline(), silent) {
            return Ok(());
        }
        Err(match passing {
            true => outage.ended(e, &self.server.label),
            false => e,
        })
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

    /// Block on our wake-up list for at most `nap`. The signal we were
    /// woken with ("1", or [`SCOUT`]), or None.
    fn nap(&mut self, wake_key: &str, nap: Duration) -> Result<Option<String>> {
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
        res.map(|r| r.map(|(_, signal)| signal))
            .map_err(|e| self.fail(e, "wait for the lock".into()))
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
        // A long wait keeps its index entry (rarely: see index.rs).
        self.refresh_next(lock, req.ttl);
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

    /// Re-enter with `token` (`req.reenter`): the lease of the hold it
    /// added, or None when the token holds nothing here (then the lock is
    /// taken anew, see [`Node::acquire_new`]).
    pub(super) fn reenter(
        &mut self,
        key: &str,
        lock: &LockName,
        token: &Token,
        req: &Request,
    ) -> Result<Option<Lease>> {
        let mut late = 0;
        loop {
            let sent = BootTime::now();
            let once = Attempt {
                reenter_only: true,
                ..Attempt::new(lock, token, req)
            };
            let Outcome::Granted { fence, count } = self.attempt(&once).map_err(|f| f.error)?
            else {
                return Ok(None);
            };
            let lease = Lease::granted(key, token.clone(), fence, count, req.ttl, sent);
            if !lease.valid_until.passed() {
                return Ok(Some(lease));
            }
            // The re-entry's reply came after its validity deadline: the
            // same path to two holders as a late fresh grant (the lease may
            // have run out on the server and another client taken the lock
            // meanwhile; docs/internals.md, "A grant that arrives late").
            // Give back the hold it added (release one) and re-enter again;
            // if that release fails, stop rather than pile up holds nobody
            // releases (they end with the TTL).
            let took = sent.elapsed();
            late += 1;
            let released = self.release(key, token, &Release::at_once());
            if late >= MAX_FAILURES || released.is_err() {
                return Err(late_grant(key, took, req.ttl));
            }
            std::thread::sleep(backoff(late));
        }
    }

    /// Take the lock with a new token, waiting as `req.wait` says (see
    /// [`Backend::acquire`]).
    pub(super) fn acquire_new(
        &mut self,
        key: &str,
        lock: &LockName,
        req: &Request,
        cancel: Option<&Cancel>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease> {
        let began = Instant::now();
        let mut w = Waiting::new(key, req.wait, cancel);
        let heartbeat = heartbeat(req.ttl);
        // The caller's, if it named one (a token nobody else has: see
        // `Request::with_token`); a late grant below changes it.
        let mut token = req.token.clone().unwrap_or_else(Token::generate);
        let mut failures = 0;
        let mut outage = Outage::default();
        // This token has called (and may have queued) before.
        let mut later = false;
        loop {
            if w.cancelled() {
                return Err(self.give_up(lock, &token, &w));
            }
            let sent = BootTime::now();
            let attempt = self.attempt(&Attempt {
                queue: w.waits(),
                until: w.deadline(),
                later,
                waited: began.elapsed(),
                ..Attempt::new(lock, &token, req)
            });
            later = true;
            let (mut busy, mut holder_id) = match attempt {
                Ok(Outcome::Granted { fence, count }) => {
                    if w.cancelled() {
                        return Err(self.give_up(lock, &token, &w));
                    }
                    let lease = Lease::granted(key, token, fence, count, req.ttl, sent);
                    if !lease.valid_until.passed() {
                        return Ok(lease);
                    }
                    // A grant that arrived after its validity deadline may
                    // have ended on the server and let a waiter in: never
                    // used, given back, retried with a new token as a
                    // transient failure (docs/internals.md, "A grant that
                    // arrives late").
                    let took = sent.elapsed();
                    let _ = self.abandon(lock, &lease.token);
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
                Ok(Outcome::Busy(b, _, id)) => (b, id),
                Ok(Outcome::NotHeld) => {
                    return Err(Error::Protocol("acquire: unexpected re-entry reply".into()));
                }
                Err(Failed { error: e, call }) => {
                    // Resent for a while already (see eval). Going on, the
                    // same token asks again: if one of the lost replies was
                    // a grant, the script hands that grant back (a fresh
                    // acquire's token holds nothing else), so no grant is
                    // left orphaned. Giving up, the token is given back.
                    if w.cancelled() {
                        return Err(self.give_up(lock, &token, &w));
                    }
                    if let Err(e) = self.ride_out(e, &mut outage, &w) {
                        if matches!(e, Error::Unavailable { .. }) {
                            self.abandon_unanswered(lock, &token, call);
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
                    // A waiter that gives up: the history says `timeout`.
                    let _ = self.abandon_timed_out(lock, &token, req, began.elapsed());
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
                return Err(self.give_up(lock, &token, &w));
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
                    Ok(Some(signal)) if signal == SCOUT && !w.cancelled() => {
                        // The waiter ahead was woken to take the lock, with
                        // a claim (lua/common.lua, to_wake): if it is dead,
                        // the claim lapses, and a look then finds the lock
                        // free and prunes it. Not woken ourselves: block on.
                        quiet = CLAIM;
                        continue;
                    }
                    Ok(None) if w.left() != Some(Duration::ZERO) && !w.cancelled() => {
                        // With several holders the first by lease end may
                        // change at every renewal: do not ask then.
                        let known = if busy.holders == 1 { &*holder_id } else { "" };
                        self.heartbeat(lock, &token, req, known)
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
                            return Err(self.give_up(lock, &token, &w));
                        }
                        if let Err(e) = self.ride_out(e, &mut outage, &w) {
                            let _ = self.abandon(lock, &token);
                            return Err(e);
                        }
                        break;
                    }
                }
            }
        }
    }
}
