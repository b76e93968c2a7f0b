//! Waiting for a busy lock: cancellation, outages, backoff.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use super::backoff;
use super::keys::WAKE_TTL_MS;
use super::{Busy, Wait};
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
    /// Since when Redis has not answered (monotonic, and wall clock to
    /// name it).
    since: Option<(Instant, SystemTime)>,
    tries: u32,
}

impl Outage {
    /// After a failure: should the wait go on? Yes for a waiting acquire
    /// (not -n) while Redis is unreachable, until its deadline or, without
    /// one, for [`OUTAGE_LIMIT`]; it sleeps a backoff first, cut short at
    /// the deadline, so that the last try comes at the deadline itself.
    /// `passing`: whether this kind of failure can pass (see `resendable`).
    /// `silent`: how long the failed call had gone unanswered when it
    /// failed (a timeout's; zero for a refused or dropped connection).
    pub(crate) fn ride_out(
        &mut self,
        passing: bool,
        queue: bool,
        deadline: Option<Instant>,
        silent: Duration,
    ) -> bool {
        match self.pause(passing, queue, deadline, silent) {
            Some(pause) => {
                std::thread::sleep(pause);
                true
            }
            None => false,
        }
    }

    /// [`Outage::ride_out`] without the sleep: the pause before the next
    /// try, or None when the wait does not go on. For a caller with more
    /// to do before it sleeps (RedLock gives back what its attempt may
    /// have left, and sleeps watching for a cancellation).
    pub(crate) fn pause(
        &mut self,
        passing: bool,
        queue: bool,
        deadline: Option<Instant>,
        silent: Duration,
    ) -> Option<Duration> {
        let now = Instant::now();
        let since = self.began(silent);
        self.tries += 1;
        let pause = backoff(self.tries);
        if !(queue && passing) {
            return None;
        }
        match deadline {
            Some(d) => (now < d).then(|| pause.min(d.saturating_duration_since(now))),
            None => (now - since < OUTAGE_LIMIT).then_some(pause),
        }
    }

    /// A failure that had gone unanswered for `silent`: the outage began
    /// then, unless it had begun already. Since when (monotonic).
    pub(crate) fn began(&mut self, silent: Duration) -> Instant {
        let now = Instant::now();
        let (since, _) = *self.since.get_or_insert_with(|| {
            let wall = SystemTime::now();
            (
                now.checked_sub(silent).unwrap_or(now),
                wall.checked_sub(silent).unwrap_or(wall),
            )
        });
        since
    }

    /// Whether an outage has begun and is not over.
    pub(crate) fn ongoing(&self) -> bool {
        self.since.is_some()
    }

    /// Whether an outage was ridden out: a retry at least.
    pub(crate) fn ridden_out(&self) -> bool {
        self.since.is_some() && self.tries > 1
    }

    /// "Redis at LABEL has not answered since TIME (FOR)", during an
    /// outage.
    pub(crate) fn unanswered(&self, label: &str) -> Option<String> {
        self.since
            .map(|(at, wall)| unanswered(label, wall, at.elapsed()))
    }

    /// The error that ends the wait: after an outage ridden out (one retry
    /// at least), an [`Error::Unavailable`] says since when Redis at
    /// `label` has not answered; anything else is returned as it is.
    pub(crate) fn ended(&self, e: Error, label: &str) -> Error {
        match (e, self.unanswered(label)) {
            (Error::Unavailable { cause, .. }, Some(context)) if self.ridden_out() => {
                Error::Unavailable {
                    context: context.into(),
                    cause,
                    since: self.since.map(|(_, wall)| wall),
                }
            }
            (e, _) => e,
        }
    }

    /// Redis answered again.
    pub(crate) fn over(&mut self) {
        self.since = None;
        self.tries = 0;
    }
}

/// "Redis at LABEL has not answered since TIME (FOR)".
fn unanswered(label: &str, since: SystemTime, lasted: Duration) -> String {
    format!(
        "Redis at {label} has not answered since {} ({})",
        humantime::format_rfc3339_seconds(since),
        crate::duration::human(lasted)
    )
}

/// One acquire's wait, as the single-Redis loop (`Node::acquire_new`) and
/// the RedLock loop (`crate::lock::quorum`) share it: the deadline, whether to wait
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

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> Error {
        Error::unavailable(
            "cannot use Redis at h:1",
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
        )
    }

    #[test]
    fn a_deadline_is_ridden_out_to_its_end_not_one_backoff_short() {
        // One backoff (100 ms or more) is longer than the whole wait: a
        // wait that stopped where the next backoff would overrun the
        // deadline gave up at once.
        let deadline = Instant::now() + Duration::from_millis(60);
        let mut o = Outage::default();
        let mut tries = 0;
        while o.ride_out(true, true, Some(deadline), Duration::ZERO) {
            tries += 1;
            assert!(tries < 100, "never gave up");
        }
        assert!(Instant::now() >= deadline, "gave up before the deadline");
        assert!(tries >= 1);
    }

    #[test]
    fn a_pause_is_a_backoff_cut_at_the_deadline_and_none_past_it() {
        let ms = Duration::from_millis;
        let mut o = Outage::default();
        assert_eq!(o.pause(true, true, None, Duration::ZERO), Some(ms(100)));
        assert_eq!(o.pause(true, true, None, Duration::ZERO), Some(ms(200)));
        assert!(o.ridden_out());
        let soon = Instant::now() + ms(50);
        let cut = Outage::default().pause(true, true, Some(soon), Duration::ZERO);
        assert!(cut.is_some_and(|p| p <= ms(50)), "{cut:?}");
        let past = Some(Instant::now() - ms(1));
        assert_eq!(
            Outage::default().pause(true, true, past, Duration::ZERO),
            None
        );
        // No deadline: OUTAGE_LIMIT after the outage began.
        let long = OUTAGE_LIMIT + ms(1);
        assert_eq!(Outage::default().pause(true, true, None, long), None);
        // A first failure only: not ridden out.
        let mut once = Outage::default();
        assert_eq!(once.pause(true, false, None, Duration::ZERO), None);
        assert!(!once.ridden_out());
    }

    #[test]
    fn an_outage_began_once_and_is_named_until_it_is_over() {
        let mut o = Outage::default();
        assert_eq!(o.unanswered("h:1"), None);
        let first = o.began(Duration::from_secs(2));
        assert_eq!(o.began(Duration::ZERO), first, "began again");
        let text = o.unanswered("h:1").unwrap_or_default();
        assert!(
            text.starts_with("Redis at h:1 has not answered since 20"),
            "{text}"
        );
        assert!(text.ends_with("Z (2s)") || text.contains("Z (2."), "{text}");
        o.over();
        assert_eq!(o.unanswered("h:1"), None);
    }

    #[test]
    fn no_wait_and_failures_that_do_not_pass_are_not_ridden_out() {
        let later = Some(Instant::now() + Duration::from_secs(60));
        assert!(!Outage::default().ride_out(false, true, later, Duration::ZERO));
        assert!(!Outage::default().ride_out(true, false, later, Duration::ZERO));
    }

    #[test]
    fn a_wait_that_outage_ended_says_since_when() {
        let mut o = Outage::default();
        let later = Some(Instant::now() + Duration::from_millis(1));
        // A first failure that does not go on: no outage was ridden out.
        let mut once = Outage::default();
        assert!(!once.ride_out(true, false, later, Duration::ZERO));
        let e = once.ended(refused(), "h:1");
        assert!(
            e.to_string().starts_with("cannot use Redis at h:1: "),
            "{e}"
        );
        while o.ride_out(true, true, later, Duration::from_secs(2)) {}
        let e = o.ended(refused(), "h:1");
        let text = e.to_string();
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
        assert!(
            text.starts_with("Redis at h:1 has not answered since 20"),
            "{text}"
        );
        // Since the failed call began: 2 s before it timed out.
        assert!(
            text.contains("Z (2s): ") || text.contains("Z (2."),
            "{text}"
        );
        // Anything else is left as it is.
        let other = o.ended(Error::invalid("x"), "h:1");
        assert!(matches!(other, Error::Invalid(_)));
        o.over();
        assert!(
            o.ended(refused(), "h:1")
                .to_string()
                .starts_with("cannot use")
        );
    }

    #[test]
    fn unanswered_names_the_server_the_time_and_how_long() {
        let at = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            unanswered("h:1", at, Duration::from_millis(4500)),
            "Redis at h:1 has not answered since 2023-11-14T22:13:20Z (4.5s)"
        );
    }
}
