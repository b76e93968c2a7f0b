//! The lock operations, stated once: one Redis server (`Node`) and RedLock
//! over several (`crate::lock::quorum::Quorum`) each implement them, and
//! [`crate::Locker`] holds one and forwards to it.

use std::time::Duration;

use super::breaking::{Broken, Holders};
use super::keys::LockName;
use super::overview::LockView;
use super::wait::Cancel;
use super::{
    Busy, Event, Held, HistoryLimits, HolderInfo, Lease, ReleaseNote, Released, Request, Status,
    Token,
};
use crate::Result;
use crate::clock::BootTime;

/// What a lock handle does, against one Redis (or one Sentinel-watched
/// master, or one Cluster) or against several with RedLock. Bad input is
/// refused by the caller (`Locker`) before any of these is called: a
/// request is checked ([`Request::check`]), a TTL is in range.
pub(crate) trait Backend: Send {
    /// Another backend for the same servers and prefix, with connections
    /// of its own (opened on first use). A RedLock copy shares what the
    /// original learns about the masters (who they are, the fence floor).
    fn detached(&self) -> Box<dyn Backend>;

    /// One server (or one cluster), not RedLock.
    fn is_single(&self) -> bool;

    /// Has a server answered yet? Until then a failed attempt is final,
    /// for a waiting acquire too (a wrong or silent address fails at once).
    /// RedLock assumes so.
    fn answered(&self) -> bool;

    /// Bound on connecting and on each reply (but blocking waits); under
    /// RedLock, per master, and short.
    fn timeout(&self) -> Duration;

    /// Change that bound. A quorum takes it only before its first call (it
    /// waits for each node to be free).
    fn set_timeout(&mut self, timeout: Duration);

    /// Check a lock name and place it under the prefix.
    fn name(&self, key: &str) -> Result<LockName>;

    /// Acquire `key`, waiting as `req.wait` says. `on_wait` is called at
    /// every busy observation while we wait (see `Waiting::observe`);
    /// `cancel`, if given, lets another thread stop the wait at once.
    /// RedLock refuses what needs one queue or one counter: read-write
    /// locks, semaphores and `Request::supersede`.
    fn acquire(
        &mut self,
        key: &str,
        req: &Request,
        cancel: Option<&Cancel>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease>;

    /// Release one hold of `token` on `key`, or with `all` every hold
    /// (and any place in the wait queue). With `min_hold` Some(d), the last
    /// hold's lease ends no sooner than d, or the min-hold given at the
    /// grant, after the grant; None releases at once whatever was asked.
    /// Under RedLock the lock was ours only if a majority still knew it.
    fn release(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
    ) -> Result<Released> {
        self.release_noted(key, token, all, min_hold, &ReleaseNote::default())
    }

    /// [`Backend::release`], telling the history how the hold ended (exec's
    /// exit code, or `overran`; the default note is a plain release).
    fn release_noted(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        note: &ReleaseNote,
    ) -> Result<Released>;

    /// How much history the scripts keep per lock from now on (checked
    /// by the caller).
    fn set_history(&mut self, limits: HistoryLimits);

    /// The last `limit` events of `key`, oldest first, after recording
    /// leases that ran out unnoticed. Under RedLock, the events a majority
    /// of the masters has.
    fn history(&mut self, key: &str, limit: usize) -> Result<Vec<Event>>;

    /// Record that the holder with `token` (and `info`) found `key` gone,
    /// and why (a `lost` event). Sent once; under RedLock, to every master
    /// (`history` shows what a majority has).
    fn record_lost(
        &mut self,
        key: &str,
        token: &Token,
        info: &HolderInfo,
        reason: &str,
    ) -> Result<()>;

    /// [`Backend::release`], sent once and given up after `within`
    /// (connecting and the reply are each waited for at most that long,
    /// and never resent): for a release that can only free what is left of
    /// a lease, such as after the lease was lost. By default as
    /// [`Backend::release`] (RedLock's per-master timeouts are short
    /// already).
    fn release_within(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        within: Duration,
    ) -> Result<Released> {
        let _ = within;
        self.release(key, token, all, min_hold)
    }

    /// Extend the lease of `token` to at least `ttl` from now (a lease is
    /// never shortened). Returns the point (CLOCK_BOOTTIME) until which the
    /// lease is safe to rely on: under RedLock, until the latest instant a
    /// majority still holds it. [`crate::Error::Lost`] if the token holds
    /// nothing, [`crate::Error::NotOwner`] if another owner holds the lock.
    fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        self.renew_noted(key, token, ttl, None)
    }

    /// [`Backend::renew`], noting for `status` the pid of the command the
    /// holder runs (exec's), if given; the first pid noted for a hold
    /// stays.
    fn renew_noted(
        &mut self,
        key: &str,
        token: &Token,
        ttl: Duration,
        cmd_pid: Option<u32>,
    ) -> Result<BootTime>;

    /// Does `token` hold `key` now? Its lease's time left and fence if so
    /// (under RedLock: on a majority, for as long as the m-th longest
    /// lease, at the fence most of them report); [`crate::Error::Lost`] if
    /// it holds nothing, [`crate::Error::NotOwner`] if another owner holds
    /// the lock exclusively.
    fn check(&mut self, key: &str, token: &Token) -> Result<Held>;

    /// End the holds `holders` names by force (an operator's break): their
    /// holders' next renewal finds them gone, with a notice that `by`
    /// broke them for `reason`; the waiters that may now take the lock are
    /// woken. `by` and `reason` are checked by the caller. Under RedLock,
    /// on every master that answers, the holders named by fence being
    /// those a majority reports.
    fn break_lock(
        &mut self,
        key: &str,
        holders: &Holders,
        by: &str,
        reason: &str,
    ) -> Result<Broken>;

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
}
