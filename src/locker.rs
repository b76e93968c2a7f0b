//! The public lock handle: one Redis, or RedLock over several independent
//! masters when several URLs are given.

use std::time::Duration;

use crate::clock::BootTime;
use crate::conn::{ConnectOptions, Server};
use crate::lock::quorum::Quorum;
use crate::lock::{Backend, Broken, Holders, LockName, Node};
use crate::lock::{Event, HistoryLimits, HolderInfo, ReleaseNote};
use crate::{Busy, Cancel, Lease, Released, Request, Result, Status, Token};

/// Lock operations against one Redis, or against several with RedLock.
///
/// The operations are stated once, in `lock::Backend`; this handle checks
/// the caller's input and forwards to its backend.
pub struct Locker(Box<dyn Backend>);

impl Locker {
    /// Check the options and connect. With one URL, the connection is made
    /// now so an unusable server is reported at once; with several
    /// (RedLock), each node connects on first use.
    pub fn connect(opts: &ConnectOptions, prefix: &str) -> Result<Locker> {
        let mut servers = Server::open_all(opts)?;
        if servers.len() == 1 {
            let mut node = Node::new(servers.remove(0), prefix);
            node.connect()?;
            return Ok(Locker(Box::new(node)));
        }
        Ok(Locker(Box::new(Quorum::new(servers, prefix))))
    }

    /// Another locker for the same servers and prefix, with connections of
    /// its own (opened on first use).
    pub fn detached(&self) -> Locker {
        Locker(self.0.detached())
    }

    /// One server (or one cluster), not RedLock.
    pub(crate) fn is_single(&self) -> bool {
        self.0.is_single()
    }

    /// Has a server answered this locker (RedLock: assumed)? Until then,
    /// an acquire's failed first attempt is final whether it waits or not.
    pub(crate) fn answered(&self) -> bool {
        self.0.answered()
    }

    /// Bound on connecting and on each reply (but blocking waits).
    pub fn timeout(&self) -> Duration {
        self.0.timeout()
    }

    /// Change the bound on connecting and on each reply (see [`Locker::timeout`]).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.0.set_timeout(timeout)
    }

    /// Check a lock name and place it under this locker's prefix.
    pub fn name(&self, key: &str) -> Result<LockName> {
        self.0.name(key)
    }

    /// Acquire `key`, waiting as `req.wait` says. `cancel`, if given, lets
    /// another thread stop the wait at once.
    ///
    /// `on_wait` is called at every busy observation while we wait: first
    /// when an attempt finds the lock busy and we are going to wait (the
    /// announcement: [`Busy::waited`] is then about zero), then after every
    /// later attempt and every heartbeat ([`crate::lock::HEARTBEAT`], or a
    /// RedLock retry), with the holder, the queue position, the holder's
    /// lease time left and the time waited as last seen. A caller that
    /// wants one line counts the calls; one that shows live progress
    /// redraws from the latest. Not called when the lock is busy and we do
    /// not wait (-n), nor once the wait ends.
    pub fn acquire(
        &mut self,
        key: &str,
        req: &Request,
        cancel: Option<&Cancel>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease> {
        req.check()?;
        self.0.acquire(key, req, cancel, on_wait)
    }

    /// Release one hold of `token` on `key` (honouring a min-hold given at
    /// the grant).
    pub fn release(&mut self, key: &str, token: &Token) -> Result<Released> {
        self.release_with(key, token, false, Some(Duration::ZERO))
    }

    /// Release every hold of `token` on `key` at once, re-entries included:
    /// what the outermost holder does, so that a nested holder that died
    /// without releasing cannot keep the lock held.
    pub fn release_all(&mut self, key: &str, token: &Token) -> Result<Released> {
        self.release_with(key, token, true, Some(Duration::ZERO))
    }

    /// Release one hold of `token` (every hold with `all`). `min_hold`:
    /// Some(d) keeps the lock taken (nobody renewing it) until d, or the
    /// min-hold given at the grant, after the grant, if that is later than
    /// now; None frees it at once whatever min-hold was asked.
    pub fn release_with(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
    ) -> Result<Released> {
        if min_hold.is_some_and(|d| d > crate::lock::MAX_TTL) {
            return Err(crate::Error::Usage(format!(
                "release_with's min_hold is too long: at most {}",
                crate::duration::human(crate::lock::MAX_TTL)
            )));
        }
        self.0.release(key, token, all, min_hold)
    }

    /// [`Locker::release_with`], telling the lock's history how the hold
    /// ended: the exit code of the command run under it, or that it was
    /// stopped for holding too long (`overran` instead of `released`).
    pub fn release_noted(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        note: &ReleaseNote,
    ) -> Result<Released> {
        if min_hold.is_some_and(|d| d > crate::lock::MAX_TTL) {
            return Err(crate::Error::Usage(format!(
                "release_with's min_hold is too long: at most {}",
                crate::duration::human(crate::lock::MAX_TTL)
            )));
        }
        self.0.release_noted(key, token, all, min_hold, note)
    }

    /// How much history each lock keeps from now on (events, retention):
    /// [`HistoryLimits::default`] unless set. Refused (a usage error) out
    /// of range.
    pub fn set_history(&mut self, limits: HistoryLimits) -> Result<()> {
        limits.check()?;
        self.0.set_history(limits);
        Ok(())
    }

    /// The last `limit` events of `key` (1 to 100,000), oldest first.
    /// Leases that ran out with nobody releasing them are recorded as
    /// `expired` first. Under RedLock, the events a majority of the
    /// masters has (the same event within 5 s on each, see
    /// docs/deployments.md).
    pub fn history(&mut self, key: &str, limit: usize) -> Result<Vec<Event>> {
        if limit == 0 || limit > crate::lock::MAX_HISTORY_EVENTS as usize {
            return Err(crate::Error::Usage(format!(
                "history limit {limit} is out of range: use 1 to {}",
                crate::lock::MAX_HISTORY_EVENTS
            )));
        }
        self.0.history(key, limit)
    }

    /// Record in `key`'s history that the holder with `token` found the
    /// lock gone at a renewal, and why (`lost`). `info` names the holder
    /// if the grant's own record is gone.
    pub fn record_lost(
        &mut self,
        key: &str,
        token: &Token,
        info: &HolderInfo,
        reason: &str,
    ) -> Result<()> {
        self.0.record_lost(key, token, info, reason)
    }

    /// [`Locker::release_with`], sent once and given up after `within`
    /// (connecting and the reply are each waited for at most that long,
    /// and never resent): for a release that can only free what is left of
    /// a lease, such as after the lease was lost. RedLock's per-master
    /// timeouts are short already: it releases as
    /// [`Locker::release_with`] does.
    pub fn release_within(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        within: Duration,
    ) -> Result<Released> {
        self.0.release_within(key, token, all, min_hold, within)
    }

    /// Extend the lease of `token` to at least `ttl` from now. Returns the
    /// point (CLOCK_BOOTTIME) until which the lease is safe to rely on.
    pub fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        crate::lock::check_ttl(ttl)?;
        self.0.renew(key, token, ttl)
    }

    /// [`Locker::renew`], noting for `status` the pid of the command the
    /// holder runs (`cmd_pid` in [`crate::lock::HolderStatus`]); the first
    /// pid noted for a hold stays.
    pub fn renew_noted(
        &mut self,
        key: &str,
        token: &Token,
        ttl: Duration,
        cmd_pid: Option<u32>,
    ) -> Result<BootTime> {
        crate::lock::check_ttl(ttl)?;
        self.0.renew_noted(key, token, ttl, cmd_pid)
    }

    /// Does `token` hold `key` now (under RedLock: on a majority)? Its time
    /// left and fence; [`crate::Error::Lost`] if it holds nothing,
    /// [`crate::Error::NotOwner`] if another owner holds it.
    pub fn check(&mut self, key: &str, token: &Token) -> Result<crate::lock::Held> {
        self.0.check(key, token)
    }

    /// Break `key` by force, as an operator does with a stuck lock: end the
    /// holds `holders` names (every holder's, or those granted with the
    /// given fences: see [`crate::lock::breaking::matching`]), parked
    /// min-holds included, and wake the waiters that may now take it.
    /// Waiters stay queued. Each broken holder's next renewal fails with
    /// [`crate::Error::Lost`] saying that `by` (user@host, see
    /// [`crate::lock::breaking::operator`]) broke it, and `reason`. A free
    /// lock, or fences that match nobody, break nothing (an empty
    /// [`Broken::fences`]). Under RedLock, on every master.
    pub fn break_lock(
        &mut self,
        key: &str,
        holders: &Holders,
        by: &str,
        reason: &str,
    ) -> Result<Broken> {
        crate::lock::breaking::check(by, reason)?;
        self.0.name(key)?;
        self.0.break_lock(key, holders, by, reason)
    }

    /// Who holds `key`, how long they keep it, who waits. Under RedLock,
    /// as a majority of the masters sees it: a holder whose token a
    /// majority reports holding (fewer than a majority answering is
    /// [`crate::Error::Unavailable`]).
    pub fn status(&mut self, key: &str) -> Result<Status> {
        self.0.status(key)
    }

    /// Every live lock whose key matches the glob `pattern`. Under RedLock,
    /// the locks any master lists, each as a majority sees it.
    pub fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        self.0.list(pattern)
    }

    /// Every live lock whose key matches the glob `pattern`, with its
    /// history's counters, last event and grants in the last minute, most
    /// contended first ([`crate::lock::overview::rank`]). Read-only. Under
    /// RedLock, the locks any master shows, each as a majority sees it.
    pub fn overview(&mut self, pattern: &str) -> Result<Vec<crate::lock::LockView>> {
        crate::lock::overview::check_pattern(pattern)?;
        self.0.overview(pattern)
    }
}
