//! Waiting for a busy lock: cancellation, outages, backoff.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use super::keys::WAKE_TTL_MS;
use super::types::backoff;
use super::types::{Busy, Wait};
use crate::conn::Server;
use crate::{Error, Result};

/// A wait with no deadline rides out this much Redis outage (a restart, a
/// failover) before it gives up; a wait with a deadline rides out any
/// outage until its deadline.
pub const OUTAGE_LIMIT: Duration = Duration::from_secs(30);

/// Late grants in a row an acquire gives back before it gives up.
pub(super) const MAX_FAILURES: u32 = 3;
/// Cap on any wait, so that deadlines never overflow.
pub(super) const MAX_WAIT: Duration = crate::duration::MAX;
/// Lets another thread (a signal handler thread) stop a waiting acquire at
/// once: it sets a flag and pushes to the waiter's wake-up list, so the
/// blocked BLPOP returns and the waiter leaves the queue itself.
#[derive(Default)]
pub struct Cancel {
    flag: AtomicBool,
    signal: AtomicI32,
    target: Mutex<Option<(Server, String)>>,
}

impl Cancel {
    /// A handle that has not been cancelled.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Ask the waiting acquire to stop; `signal` is reported in the error.
    pub fn cancel(&self, signal: i32) {
        self.signal.store(signal, Ordering::SeqCst);
        self.flag.store(true, Ordering::SeqCst);
        let target = self
            .target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some((server, key)) = target
            && let Ok(mut c) = server.connect()
        {
            // One script call (lua/wake.lua): a push and its expiry in two
            // commands would leave a list that never expires if we died
            // between them. EVAL, not EVALSHA: this runs once, at a Ctrl-C.
            let _: redis::RedisResult<i64> = redis::cmd("EVAL")
                .arg(super::script::WAKE.code)
                .arg(1)
                .arg(&key)
                .arg(WAKE_TTL_MS)
                .query(&mut c);
        }
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The error a cancelled acquire returns: [`Error::Interrupted`] with
    /// the signal given to [`Cancel::cancel`].
    pub fn interrupted(&self) -> Error {
        Error::Interrupted(self.signal.load(Ordering::SeqCst))
    }

    pub(super) fn watch(&self, server: &Server, key: &str) {
        *self.target.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((server.clone(), key.to_string()));
    }
}

/// A Redis outage seen by a waiting acquire.
#[derive(Default)]
pub(crate) struct Outage {
    since: Option<Instant>,
    tries: u32,
}

impl Outage {
    /// After a failure: should the wait go on? Yes for a waiting acquire
    /// (not -n) while Redis is unreachable, until its deadline or, without
    /// one, for [`OUTAGE_LIMIT`]; it sleeps a backoff first.
    /// `passing`: whether this kind of failure can pass (see `resendable`).
    pub(crate) fn ride_out(
        &mut self,
        passing: bool,
        queue: bool,
        deadline: Option<Instant>,
    ) -> bool {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        self.tries += 1;
        let pause = backoff(self.tries);
        let go_on = queue
            && passing
            && match deadline {
                Some(d) => now + pause < d,
                None => now - since < OUTAGE_LIMIT,
            };
        if go_on {
            std::thread::sleep(pause);
        }
        go_on
    }

    /// Redis answered again.
    pub(crate) fn over(&mut self) {
        self.since = None;
        self.tries = 0;
    }
}

/// One acquire's wait, as the single-Redis loop (`Node::acquire_new`) and
/// the RedLock loop (`crate::quorum`) share it: the deadline, whether to wait
/// at all, cancellation, reporting each busy observation, and the error
/// that ends a wait on a lock that stays busy.
pub(crate) struct Waiting<'a> {
    key: &'a str,
    cancel: Option<&'a Cancel>,
    started: Instant,
    deadline: Option<Instant>,
    waits: bool,
}

impl<'a> Waiting<'a> {
    pub(crate) fn new(key: &'a str, wait: Wait, cancel: Option<&'a Cancel>) -> Waiting<'a> {
        let started = Instant::now();
        Waiting {
            key,
            cancel,
            started,
            deadline: match wait {
                Wait::For(d) => Some(started.checked_add(d).unwrap_or(started + MAX_WAIT)),
                Wait::No | Wait::Forever => None,
            },
            waits: !matches!(wait, Wait::No | Wait::For(Duration::ZERO)),
        }
    }

    /// Whether a busy lock is waited for at all (not -n, not a zero wait).
    pub(crate) fn waits(&self) -> bool {
        self.waits
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left until the deadline (None: no deadline).
    pub(crate) fn left(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.is_some_and(Cancel::is_cancelled)
    }

    /// The error for a cancelled wait.
    pub(crate) fn interrupted(&self) -> Error {
        self.cancel
            .map_or(Error::Interrupted(0), Cancel::interrupted)
    }

    /// The lock is busy (`busy`: who holds it, when known). Either the
    /// error that ends the wait ([`Error::Busy`] when not waiting,
    /// [`Error::Timeout`] past the deadline), or the observation is
    /// reported through `on_wait` (see [`Waiting::observe`]).
    pub(crate) fn busy(
        &mut self,
        busy: Option<&Busy>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<()> {
        let holder = busy.and_then(|b| b.holder.as_ref().map(|_| b.to_string()));
        if !self.waits {
            return Err(Error::Busy {
                key: self.key.to_string(),
                holder,
            });
        }
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            return Err(Error::Timeout {
                key: self.key.to_string(),
                waited: now - self.started,
                holder,
            });
        }
        if let Some(b) = busy {
            self.observe(&mut b.clone(), on_wait);
        }
        Ok(())
    }

    /// Report a busy observation (an attempt, or a heartbeat that refreshed
    /// it) through `on_wait`, with the time waited so far filled in. The
    /// caller of an acquire sees every one: the first announces the wait,
    /// later ones keep a progress display current. They come at most once
    /// per attempt or heartbeat ([`crate::lock::HEARTBEAT`]), and cost
    /// nothing when `on_wait` does nothing.
    pub(crate) fn observe(&self, busy: &mut Busy, on_wait: &mut dyn FnMut(&Busy)) {
        busy.waited = self.started.elapsed();
        on_wait(busy);
    }
}
