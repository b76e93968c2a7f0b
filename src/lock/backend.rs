//! The lock contract, stated once: one Redis server (`Node`) and RedLock
//! over several (`quorum::Quorum`) each implement it, and
//! [`crate::Locker`] holds one.

use std::time::Duration;

use super::breaking::{Break, Broken};
use super::history::{Event, HistoryLimits, Loss};
use super::keys::LockName;
use super::lease::{Held, Lease, Released};
use super::overview::LockView;
use super::request::{Release, Renewal, Request, Token};
use super::status::{Busy, Status};
use super::wait::Cancel;
use crate::Result;
use crate::clock::BootTime;

/// What a bounded first try of an acquire found (see
/// [`Backend::acquire_first`]).
#[derive(Debug)]
pub enum First {
    /// Granted at once.
    Granted(Lease),
    /// Not granted at once: acquire with this request, the wait included
    /// (a cancellable one: the caller may now start a thread to cancel it).
    Wait(Request),
}

/// How a caller follows an acquire's wait (see [`Backend::acquire`]).
pub struct Watch<'a> {
    /// Lets another thread stop the wait at once.
    pub cancel: Option<&'a Cancel>,
    /// Hears every busy observation while we wait.
    pub on_wait: &'a mut dyn FnMut(&Busy),
}

/// What a lock handle does, against one Redis (or one Sentinel-watched
/// master, or one Cluster) or against several with RedLock. Reached
/// through [`crate::Locker`], which refuses a bad TTL, history limit or
/// pattern before any of these is called; a [`Request`], a [`Release`], a
/// [`HistoryLimits`], a [`Renewal`] and a [`Break`] are checked when they
/// are made ([`crate::RequestBuilder::build`], [`Release::holds`],
/// [`HistoryLimits::new`], [`Renewal::new`], [`Break::new`]), so none can
/// reach a backend invalid. The calls it makes no check for (`check`,
/// `status`, `list`, `record_lost`, `break_lock`, the timeout) it passes
/// through as they are.
pub trait Backend: Send {
    /// Another backend for the same servers and prefix, with connections
    /// of its own (opened on first use). A RedLock copy shares what the
    /// original learns about the masters (who they are, the fence floor).
    fn detached(&self) -> Box<dyn Backend>;

    /// Bound on connecting and on each reply (but blocking waits); under
    /// RedLock, per master, and short.
    fn timeout(&self) -> Duration;

    /// Change that bound. A quorum takes it only before its first call (it
    /// waits for each node to be free).
    fn set_timeout(&mut self, timeout: Duration);

    /// The prefix every key of this backend's locks starts with.
    fn prefix(&self) -> &str;

    /// Check a lock name and place it under the prefix.
    fn name(&self, key: &str) -> Result<LockName> {
        LockName::new(self.prefix(), key)
    }

    /// Acquire `key`, waiting as `req.wait` says. `watch.cancel`, if given,
    /// lets another thread stop the wait at once. RedLock refuses what needs one
    /// queue or one counter: read-write locks, semaphores,
    /// `Request::supersede` and a priority.
    ///
    /// `watch.on_wait` is called at every busy observation while we wait: first
    /// when an attempt finds the lock busy and we are going to wait (the
    /// announcement: [`Busy::waited`] is then about zero), then after every
    /// later attempt and every heartbeat ([`crate::lock::HEARTBEAT`], or a
    /// RedLock retry), with the holder, the queue position, the holder's
    /// lease time left and the time waited as last seen. A caller that
    /// wants one line counts the calls; one that shows live progress
    /// redraws from the latest. Not called when the lock is busy and we do
    /// not wait (-n), nor once the wait ends.
    fn acquire(&mut self, key: &str, req: &Request, watch: Watch<'_>) -> Result<Lease>;

    /// A bounded first try of [`Backend::acquire`] (no queueing, no
    /// riding out an outage, nothing to cancel), so that an uncontended
    /// acquire needs no thread to take signals: one server tries once,
    /// unless the request supersedes (that acts when it joins the queue);
    /// RedLock, which makes no such try, answers [`First::Wait`] at once.
    fn acquire_first(&mut self, key: &str, req: &Request) -> Result<First> {
        let _ = key;
        Ok(First::Wait(req.clone()))
    }

    /// Whether a fresh acquire asks (and queues) with the token its
    /// request names, if it names one (exec's waits: see `exec::take::Told`).
    /// One server does; RedLock takes a new token at every attempt and
    /// keeps no queue, so a token named beforehand never holds there.
    fn takes_token(&self) -> bool {
        false
    }

    /// Give back holds of `token` on `key` as `how` says (see [`Release`]).
    /// Under RedLock the lock was ours only if a majority still knew it.
    fn release(&mut self, key: &str, token: &Token, how: &Release) -> Result<Released>;

    /// How much history the scripts keep per lock from now on (checked
    /// by the caller).
    fn set_history(&mut self, limits: HistoryLimits);

    /// The last `limit` events of `key` (1 to 100,000), oldest first.
    /// Leases that ran out with nobody releasing them are recorded as
    /// `expired` first. Under RedLock, the events a majority of the masters
    /// has (the same event within 5 s on each, see docs/deployments.md).
    fn history(&mut self, key: &str, limit: usize) -> Result<Vec<Event>>;

    /// [`Backend::history`] of each of `keys`, in their order (for
    /// `history --all`): one after another here; one Redis and a cluster
    /// pipeline the calls.
    fn histories(&mut self, keys: &[String], limit: usize) -> Result<Vec<Vec<Event>>> {
        keys.iter().map(|k| self.history(k, limit)).collect()
    }

    /// Record that the holder with `token` found `key` gone, and why (a
    /// `lost` event). Sent once; under RedLock, to every master (`history`
    /// shows what a majority has).
    fn record_lost(&mut self, key: &str, token: &Token, loss: &Loss) -> Result<()>;

    /// Extend the lease of `token` to at least the renewal's TTL from now
    /// (a lease is never shortened), noting for `status` the pid of the
    /// command the holder runs (exec's), if given: the first pid noted for
    /// a hold stays. Returns the point (CLOCK_BOOTTIME) until which the lease is
    /// safe to rely on: under RedLock, until the latest instant a majority
    /// still holds it. [`crate::Error::Lost`] if the token holds nothing,
    /// [`crate::Error::NotOwner`] if another owner holds the lock.
    fn renew(&mut self, key: &str, token: &Token, renewal: &Renewal) -> Result<BootTime>;

    /// Does `token` hold `key` now? Its lease's time left and fence if so
    /// (under RedLock: on a majority, for as long as the m-th longest
    /// lease, at the fence most of them report); [`crate::Error::Lost`] if
    /// it holds nothing, [`crate::Error::NotOwner`] if another owner holds
    /// the lock exclusively.
    fn check(&mut self, key: &str, token: &Token) -> Result<Held>;

    /// End the holds the order's [`Break::holders`] names by force (an
    /// operator's break: every holder's, or those granted with the given
    /// fences), parked min-holds included: their holders' next renewal
    /// fails with [`crate::Error::Lost`], saying who (user@host) broke
    /// them and why; the waiters that may now take the lock are woken, and stay
    /// queued. A free lock, or fences that match nobody, break nothing (an
    /// empty [`Broken::fences`]). Under RedLock, on every master that
    /// answers, the holders named by fence being those a majority reports.
    fn break_lock(&mut self, key: &str, order: &Break) -> Result<Broken>;

    /// Who holds `key`, how long they keep it, who waits. Under RedLock, as
    /// a majority of the masters sees it.
    fn status(&mut self, key: &str) -> Result<Status>;

    /// Every live lock whose key matches the glob `pattern`. Under RedLock,
    /// the locks any master lists, each as a majority sees it.
    fn list(&mut self, pattern: &str) -> Result<Vec<Status>>;

    /// Every live lock matching `pattern` with its history's counters,
    /// last event and recent grants, most contended first (see
    /// `super::overview`). Under RedLock, the locks any master shows, each
    /// as a majority sees it.
    fn overview(&mut self, pattern: &str) -> Result<Vec<LockView>>;

    /// As [`Backend::overview`], for `metrics`: every lock matching
    /// `pattern` in use or with history counters kept (held or idle; see
    /// [`Backend::known_names`]), in no particular order. Under RedLock,
    /// the locks any master shows, each as a majority sees it.
    fn known(&mut self, pattern: &str) -> Result<Vec<LockView>>;

    /// The names matching `pattern` of the locks in use and of those with
    /// history kept (lua/index.lua's list of locks with history; with
    /// [`Index::scan`](crate::conn::Index::scan), every history counter
    /// key), sorted; some may have neither any more. Under RedLock, any
    /// master's.
    fn known_names(&mut self, pattern: &str) -> Result<Vec<String>>;
}
