//! The public lock handle: one Redis, or RedLock over several independent
//! masters when several URLs are given.

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use crate::clock::BootTime;
use crate::conn::{ConnectOptions, Server};
use crate::lock::quorum::Quorum;
use crate::lock::{Backend, LockView, Node, Renewal, Watch};
use crate::{Busy, Cancel, Event, Lease, Release, Released, Request, Result, Token};

/// Lock operations against one Redis, or against several with RedLock.
///
/// The operations are stated once, on [`Backend`], which this handle
/// dereferences to. It holds a `Box<dyn Backend>` rather than an enum: the
/// two backends share no code but the contract, a locker is made once per
/// process, and one dynamic call per round trip to Redis costs nothing
/// worth a `match` in every method. Its own calls that take plain values
/// check them, then call the backend's: `renew` (a TTL), `history` and
/// `histories` (a limit), `overview`, `known` and `known_names` (a
/// pattern); `acquire`, `release` and `release_with` only spell the
/// backend's call. The input types are checked when they are made
/// ([`Request`], [`Release`], [`HistoryLimits`](crate::HistoryLimits),
/// [`Renewal`], [`Break`](crate::lock::Break)), so nothing here checks
/// them again.
pub struct Locker(Box<dyn Backend>);

impl Deref for Locker {
    type Target = dyn Backend;
    fn deref(&self) -> &(dyn Backend + 'static) {
        &*self.0
    }
}

impl DerefMut for Locker {
    fn deref_mut(&mut self) -> &mut (dyn Backend + 'static) {
        &mut *self.0
    }
}

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

    /// [`Backend::acquire`], watched by `cancel` and `on_wait`.
    pub fn acquire(
        &mut self,
        key: &str,
        req: &Request,
        cancel: Option<&Cancel>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease> {
        self.0.acquire(key, req, Watch { cancel, on_wait })
    }

    /// Release one hold of `token` on `key` (honouring a min-hold given at
    /// the grant): [`Release::default`].
    pub fn release(&mut self, key: &str, token: &Token) -> Result<Released> {
        self.0.release(key, token, &Release::default())
    }

    /// [`Backend::release`] (which [`Locker::release`] hides).
    pub fn release_with(&mut self, key: &str, token: &Token, how: &Release) -> Result<Released> {
        self.0.release(key, token, how)
    }

    /// [`Backend::history`], once `limit` is in range.
    pub fn history(&mut self, key: &str, limit: usize) -> Result<Vec<Event>> {
        check_history_limit(limit)?;
        self.0.history(key, limit)
    }

    /// [`Backend::histories`], once `limit` is in range.
    pub fn histories(&mut self, keys: &[String], limit: usize) -> Result<Vec<Vec<Event>>> {
        check_history_limit(limit)?;
        self.0.histories(keys, limit)
    }

    /// [`Backend::renew`] for `ttl` with no command pid, once `ttl` is in
    /// range (as [`Renewal::new`]); a [`Renewal`] made already is renewed
    /// with [`Locker::renew_with`].
    pub fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        self.0.renew(key, token, &Renewal::new(ttl)?)
    }

    /// [`Backend::renew`] (which [`Locker::renew`] hides).
    pub fn renew_with(&mut self, key: &str, token: &Token, renewal: &Renewal) -> Result<BootTime> {
        self.0.renew(key, token, renewal)
    }

    /// [`Backend::overview`], once `pattern` is checked: every live lock
    /// matching it with its history's counters, most contended first
    /// ([`crate::lock::overview::rank`]). Read-only.
    pub fn overview(&mut self, pattern: &str) -> Result<Vec<LockView>> {
        crate::lock::overview::check_pattern(pattern)?;
        self.0.overview(pattern)
    }

    /// [`Backend::known`], once `pattern` is checked: every lock matching
    /// it in use or with history counters kept, for `metrics`. Read-only.
    pub fn known(&mut self, pattern: &str) -> Result<Vec<LockView>> {
        crate::lock::overview::check_pattern(pattern)?;
        self.0.known(pattern)
    }

    /// [`Backend::known_names`], once `pattern` is checked (for `history
    /// --all`).
    pub fn known_names(&mut self, pattern: &str) -> Result<Vec<String>> {
        crate::lock::overview::check_pattern(pattern)?;
        self.0.known_names(pattern)
    }
}

/// Refuse a history limit out of range.
fn check_history_limit(limit: usize) -> Result<()> {
    if limit == 0 || limit > crate::lock::MAX_HISTORY_EVENTS as usize {
        return Err(crate::Error::invalid(format!(
            "history limit {limit} is out of range: use 1 to {}",
            crate::lock::MAX_HISTORY_EVENTS
        )));
    }
    Ok(())
}
