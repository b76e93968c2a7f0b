//! RedLock over N independent Redis masters (seed article 003, after
//! antirez's algorithm), used when several `--url` are given.
//!
//! - Acquire sends the same acquire script, with one fresh token, to every
//!   master at once, each on its own thread with a short timeout, and
//!   succeeds only when a majority granted it while the validity window
//!   (TTL − elapsed − drift, on CLOCK_BOOTTIME, saturating) is still open.
//!   The answer is taken as soon as the outcome is decided, so one frozen
//!   master does not slow anyone down.
//! - On failure it releases on every master (a master that did not answer
//!   may still have granted), then retries after a random delay: there is
//!   no shared queue across masters, so waiting is polling here, with
//!   jitter against lockstep.
//! - Renewal (exec's thread) must be confirmed by a majority; the lease is
//!   then valid until the latest instant a majority still holds it.
//! - Fencing: the maximum of the granting majority's counters. Each master
//!   keeps its own counter, so values are strictly increasing only as long
//!   as a majority of masters keep their counters (persistence on, no
//!   restart from an empty data set); treat them as a best effort under
//!   RedLock.
//! - Read-write locks and `--limit` need one Redis and are refused here.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::clock::BootTime;
use crate::conn::Server;
use crate::lock::{Attempt, LockName, Node, valid_until};
use crate::{Busy, Cancel, Error, Lease, Mode, Released, Request, Result, Status, Token, Wait};

/// Longest wait for one master's answer (connect and reply each).
const NODE_TIMEOUT: Duration = Duration::from_millis(500);
/// Attempts in a row without a majority answering before a wait gives up.
const MAX_UNREACHABLE: u32 = 3;
/// Retry delays after a failed attempt: uniform in this range.
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_millis(250);

type Answers<T> = Vec<Option<Result<T>>>;

/// What a call does about a master still busy with an earlier call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Turn {
    Skip,
    Queue,
}

pub(crate) struct Quorum {
    nodes: Vec<Arc<Mutex<Node>>>,
    /// The same servers, to make new nodes without touching busy ones.
    servers: Vec<Server>,
    prefix: String,
    /// Per-master timeout (kept here: asking a node would wait for its lock).
    timeout: Duration,
}

fn lock(node: &Mutex<Node>) -> MutexGuard<'_, Node> {
    node.lock().unwrap_or_else(|e| e.into_inner())
}

fn no_answer(what: &str, answered: usize, total: usize, need: usize) -> Error {
    Error::Unavailable {
        context: format!(
            "{what}: {answered} of {total} Redis masters answered, RedLock needs {need}"
        ),
        cause: redis::RedisError::from((redis::ErrorKind::Io, "no majority answered in time")),
    }
}

impl Quorum {
    pub(crate) fn new(servers: Vec<Server>, prefix: &str) -> Quorum {
        let timeout = servers
            .iter()
            .map(|s| s.timeout)
            .min()
            .unwrap_or(NODE_TIMEOUT);
        Quorum::with_timeout(servers, prefix, timeout)
    }

    fn with_timeout(servers: Vec<Server>, prefix: &str, timeout: Duration) -> Quorum {
        let timeout = timeout.min(NODE_TIMEOUT);
        let nodes = servers
            .iter()
            .map(|s| {
                let mut n = Node::new(s.clone(), prefix).without_resends();
                n.set_timeout(timeout);
                Arc::new(Mutex::new(n))
            })
            .collect();
        Quorum {
            nodes,
            servers,
            prefix: prefix.to_string(),
            timeout,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    fn majority(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    pub(crate) fn detached(&self) -> Quorum {
        Quorum::with_timeout(self.servers.clone(), &self.prefix, self.timeout)
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Only for a quorum no call has used yet (it waits for each node).
    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.min(NODE_TIMEOUT);
        for n in &self.nodes {
            lock(n).set_timeout(self.timeout);
        }
    }

    pub(crate) fn name(&self, key: &str) -> Result<LockName> {
        LockName::new(&self.prefix, key)
    }

    /// Run `f` on every master at once, each on its own thread, and collect
    /// answers until `decided` says the outcome is known, every master has
    /// answered, or the time a master may take has passed. A master still
    /// silent then counts as failed; its thread ends on its own, bounded by
    /// the same timeouts.
    ///
    /// A master may still be busy with an earlier call (an attempt decided
    /// without it, or a frozen server). `Turn::Skip` counts it as failed at
    /// once, so renewals and attempts never pile up behind a frozen master;
    /// `Turn::Queue` waits for it (bounded by its timeouts), so a release or
    /// clean-up always comes after the grant it undoes.
    fn on_all<T, F>(&self, turn: Turn, f: F, decided: impl Fn(&Answers<T>) -> bool) -> Answers<T>
    where
        T: Send + 'static,
        F: Fn(&mut Node) -> Result<T> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let (tx, rx) = mpsc::channel();
        for (i, node) in self.nodes.iter().enumerate() {
            let (node, f, tx) = (Arc::clone(node), Arc::clone(&f), tx.clone());
            std::thread::spawn(move || {
                let answer = match node.try_lock() {
                    Ok(mut n) => f(&mut n),
                    Err(std::sync::TryLockError::Poisoned(p)) => f(&mut p.into_inner()),
                    Err(std::sync::TryLockError::WouldBlock) if turn == Turn::Queue => {
                        f(&mut lock(&node))
                    }
                    Err(std::sync::TryLockError::WouldBlock) => Err(Error::Unavailable {
                        context: "Redis master still busy with an earlier request".into(),
                        cause: redis::RedisError::from((redis::ErrorKind::Io, "no answer yet")),
                    }),
                };
                let _ = tx.send((i, answer));
            });
        }
        drop(tx);
        // Connect and reply, each within the timeout; twice that when
        // queueing behind an earlier call.
        let rounds = if turn == Turn::Queue { 4 } else { 2 };
        let deadline = Instant::now() + self.timeout * rounds + Duration::from_millis(20);
        let mut out: Answers<T> = (0..self.nodes.len()).map(|_| None).collect();
        while !decided(&out) && out.iter().any(Option::is_none) {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok((i, answer)) => out[i] = Some(answer),
                Err(_) => break,
            }
        }
        out
    }

    fn attempt_all(
        &self,
        lock: &LockName,
        token: &Token,
        req: &Request,
        reenter_only: bool,
    ) -> Answers<Attempt> {
        let (l, t, r) = (lock.clone(), token.clone(), req.clone());
        let (n, m) = (self.len(), self.majority());
        self.on_all(
            Turn::Skip,
            move |node| node.attempt(&l, &t, &r, false, reenter_only),
            move |a| {
                let granted = a
                    .iter()
                    .filter(|x| matches!(x, Some(Ok(Attempt::Granted { .. }))))
                    .count();
                let refused = a
                    .iter()
                    .filter(|x| matches!(x, Some(r) if !matches!(r, Ok(Attempt::Granted { .. }))))
                    .count();
                granted >= m || refused > n - m
            },
        )
    }

    /// Drop every hold of `token` and leave any queue, on every master.
    fn abandon_all(&self, lock: &LockName, token: &Token) {
        let (l, t) = (lock.clone(), token.clone());
        // A majority is enough to go on; a silent master gets the abandon
        // on its thread, or lets the grant run out with its TTL.
        let m = self.majority();
        self.on_all(
            Turn::Queue,
            move |node| node.abandon(&l, &t),
            move |a| a.iter().flatten().count() >= m,
        );
    }

    /// A lease if a majority granted `token` and the validity window is open.
    fn granted(
        &self,
        answers: &Answers<Attempt>,
        key: &str,
        token: &Token,
        req: &Request,
        sent: BootTime,
    ) -> Option<Lease> {
        let grants: Vec<(u64, u64)> = answers
            .iter()
            .filter_map(|a| match a {
                Some(Ok(Attempt::Granted { fence, count })) => Some((*fence, *count)),
                _ => None,
            })
            .collect();
        let valid_until = valid_until(sent, req.ttl);
        if grants.len() < self.majority() || valid_until.passed() {
            return None;
        }
        Some(Lease {
            key: key.to_string(),
            token: token.clone(),
            fence: grants.iter().map(|g| g.0).max().unwrap_or(0),
            count: grants.iter().map(|g| g.1).max().unwrap_or(1),
            ttl: req.ttl,
            valid_until,
        })
    }

    pub(crate) fn acquire(
        &mut self,
        key: &str,
        req: &Request,
        cancel: Option<&Cancel>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease> {
        if req.mode != Mode::Exclusive || req.limit != 1 {
            return Err(Error::Usage(
                "read-write locks and --limit need one Redis; with several --url (RedLock) \
                 only exclusive locks are supported"
                    .into(),
            ));
        }
        let lock = self.name(key)?;
        let cancelled = || cancel.is_some_and(Cancel::is_cancelled);
        let interrupted = || cancel.map_or(Error::Interrupted(0), Cancel::interrupted);
        if let Some(token) = &req.reenter {
            let sent = BootTime::now();
            let answers = self.attempt_all(&lock, token, req, true);
            if let Some(lease) = self.granted(&answers, key, token, req, sent) {
                return Ok(lease);
            }
        }
        let started = Instant::now();
        let deadline = match req.wait {
            Wait::For(d) => Some(
                started
                    .checked_add(d)
                    .unwrap_or(started + crate::duration::MAX),
            ),
            Wait::No | Wait::Forever => None,
        };
        let mut announced = false;
        let mut unreachable = 0;
        loop {
            if cancelled() {
                return Err(interrupted());
            }
            let token = Token::generate();
            let sent = BootTime::now();
            let answers = self.attempt_all(&lock, &token, req, false);
            if let Some(lease) = self.granted(&answers, key, &token, req, sent) {
                if cancelled() {
                    self.abandon_all(&lock, &token);
                    return Err(interrupted());
                }
                return Ok(lease);
            }
            // A master that did not answer (or answered late) may still
            // have granted: release everywhere before trying again.
            self.abandon_all(&lock, &token);
            // A refusal that is not about reachability (a foreign key, a
            // kind mismatch) is the real answer. Otherwise: if any master
            // said busy, it is busy; if none did, too few were reachable.
            let foreign = answers
                .iter()
                .position(|a| matches!(a, Some(Err(e)) if !matches!(e, Error::Unavailable { .. })));
            if let Some(i) = foreign {
                return Err(match answers.into_iter().nth(i) {
                    Some(Some(Err(e))) => e,
                    _ => Error::Protocol("RedLock: lost an answer".into()),
                });
            }
            if !answers
                .iter()
                .any(|a| matches!(a, Some(Ok(Attempt::Busy(_)))))
            {
                // Too few masters answered in time. A caller willing to wait
                // gets a few more tries (a loaded machine, a restart); -n
                // gets the answer at once.
                unreachable += 1;
                if unreachable >= MAX_UNREACHABLE || matches!(req.wait, Wait::No) {
                    let answered = answers.iter().filter(|a| matches!(a, Some(Ok(_)))).count();
                    return Err(no_answer(
                        &format!("acquire {key:?}"),
                        answered,
                        self.len(),
                        self.majority(),
                    ));
                }
                std::thread::sleep(RETRY_MIN * unreachable);
                continue;
            }
            unreachable = 0;
            let busy = answers.into_iter().find_map(|a| match a {
                Some(Ok(Attempt::Busy(b))) => Some(b),
                _ => None,
            });
            let holder = busy
                .as_ref()
                .and_then(|b| b.holder.as_ref().map(|_| b.to_string()));
            if matches!(req.wait, Wait::No | Wait::For(Duration::ZERO)) {
                return Err(Error::Busy {
                    key: key.into(),
                    holder,
                });
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(Error::Timeout {
                    key: key.into(),
                    waited: now - started,
                    holder,
                });
            }
            if let (false, Some(b)) = (announced, &busy) {
                on_wait(b);
                announced = true;
            }
            let spread = (RETRY_MAX - RETRY_MIN).as_micros() as u64;
            let jitter = (uuid::Uuid::new_v4().as_u128() as u64) % spread.max(1);
            let mut until = now + RETRY_MIN + Duration::from_micros(jitter);
            if let Some(d) = deadline {
                until = until.min(d);
            }
            while Instant::now() < until && !cancelled() {
                std::thread::sleep(
                    until
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(10)),
                );
            }
        }
    }

    /// Release one hold of `token`, or with `all` every hold.
    pub(crate) fn release(&mut self, key: &str, token: &Token, all: bool) -> Result<Released> {
        let (k, t) = (key.to_string(), token.clone());
        let m = self.majority();
        let tally = |a: &Answers<Released>| {
            let count =
                |p: fn(&Result<Released>) -> bool| a.iter().flatten().filter(|x| p(x)).count();
            (
                count(|x| matches!(x, Ok(Released::Released | Released::StillHeld(_)))),
                count(|x| matches!(x, Ok(Released::NotHeld))),
                count(|x| matches!(x, Err(Error::NotOwner { .. }))),
            )
        };
        // Wait for every master (each within its timeout): a grant left on
        // one would sit there until its TTL.
        let answers = self.on_all(
            Turn::Queue,
            move |node| node.release(&k, &t, all),
            |_| false,
        );
        let (held, not_held, not_owner) = tally(&answers);
        // The lock was ours only if a majority still knew it.
        if held >= m {
            let still = answers
                .iter()
                .filter_map(|a| match a {
                    Some(Ok(Released::StillHeld(n))) => Some(*n),
                    _ => None,
                })
                .max();
            return Ok(still.map_or(Released::Released, Released::StillHeld));
        }
        if not_owner >= m || (not_owner > not_held && not_owner + not_held + held >= m) {
            return Err(Error::NotOwner { key: key.into() });
        }
        if not_held + not_owner + held >= m {
            return Ok(Released::NotHeld);
        }
        let error = answers.into_iter().flatten().find_map(Result::err);
        Err(error.unwrap_or_else(|| {
            no_answer(
                &format!("release {key:?}"),
                held + not_held + not_owner,
                self.len(),
                m,
            )
        }))
    }

    pub(crate) fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        let (k, t) = (key.to_string(), token.clone());
        let (n, m) = (self.len(), self.majority());
        let answers = self.on_all(
            Turn::Skip,
            move |node| node.renew(&k, &t, ttl),
            move |a| {
                let ok = a.iter().filter(|x| matches!(x, Some(Ok(_)))).count();
                let gone = a
                    .iter()
                    .filter(|x| matches!(x, Some(Err(Error::Lost { .. } | Error::NotOwner { .. }))))
                    .count();
                ok >= m || gone > n - m
            },
        );
        let mut valid: Vec<BootTime> = answers
            .iter()
            .filter_map(|a| a.as_ref()?.as_ref().ok().copied())
            .collect();
        // The lease holds while a majority holds it: until the m-th latest end.
        valid.sort_by(|a, b| b.cmp(a));
        if valid.len() >= m {
            return Ok(valid[m - 1]);
        }
        let lost = answers
            .iter()
            .filter(|a| matches!(a, Some(Err(Error::Lost { .. }))))
            .count();
        let taken = answers
            .iter()
            .filter(|a| matches!(a, Some(Err(Error::NotOwner { .. }))))
            .count();
        if lost + taken > n - m {
            return Err(if taken > lost {
                Error::NotOwner { key: key.into() }
            } else {
                Error::Lost {
                    key: key.into(),
                    why: "a majority of the Redis masters no longer hold it".into(),
                }
            });
        }
        Err(no_answer(&format!("renew {key:?}"), valid.len(), n, m))
    }

    /// The first answer any master gives.
    fn first<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Node) -> Result<T> + Send + Sync + 'static,
    ) -> Result<T> {
        let answers = self.on_all(Turn::Skip, f, |a| {
            a.iter().any(|x| matches!(x, Some(Ok(_))))
        });
        let mut error = None;
        for a in answers.into_iter().flatten() {
            match a {
                Ok(v) => return Ok(v),
                Err(e) => error = error.or(Some(e)),
            }
        }
        Err(error.unwrap_or_else(|| no_answer("status", 0, self.len(), 1)))
    }

    pub(crate) fn status(&mut self, key: &str) -> Result<Status> {
        let k = key.to_string();
        self.first(move |node| node.status(&k))
    }

    pub(crate) fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        let p = pattern.to_string();
        self.first(move |node| node.list(&p))
    }
}
