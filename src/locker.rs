//! The public lock handle: one Redis, or RedLock over several independent
//! masters when several URLs are given.

use std::time::Duration;

use crate::clock::BootTime;
use crate::conn::{ConnectOptions, Server};
use crate::lock::{LockName, Node};
use crate::quorum::Quorum;
use crate::{Busy, Cancel, Lease, Released, Request, Result, Status, Token};

/// Lock operations against one Redis, or against several with RedLock.
pub struct Locker(Inner);

// One is the common case, and a Locker lives as long as the command: not
// worth a box.
#[allow(clippy::large_enum_variant)]
enum Inner {
    One(Node),
    Many(Quorum),
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
            return Ok(Locker(Inner::One(node)));
        }
        Ok(Locker(Inner::Many(Quorum::new(servers, prefix))))
    }

    /// Another locker for the same servers and prefix, with connections of
    /// its own (opened on first use).
    pub fn detached(&self) -> Locker {
        Locker(match &self.0 {
            Inner::One(n) => Inner::One(n.detached()),
            Inner::Many(q) => Inner::Many(q.detached()),
        })
    }

    /// One server (or one cluster), not RedLock.
    pub(crate) fn is_single(&self) -> bool {
        matches!(self.0, Inner::One(_))
    }

    /// Has a server answered this locker (RedLock: assumed)? Until then,
    /// an acquire's failed first attempt is final whether it waits or not.
    pub(crate) fn answered(&self) -> bool {
        match &self.0 {
            Inner::One(n) => n.answered(),
            Inner::Many(_) => true,
        }
    }

    /// Bound on connecting and on each reply (but blocking waits).
    pub fn timeout(&self) -> Duration {
        match &self.0 {
            Inner::One(n) => n.timeout(),
            Inner::Many(q) => q.timeout(),
        }
    }

    /// Change the bound on connecting and on each reply (see [`Locker::timeout`]).
    pub fn set_timeout(&mut self, timeout: Duration) {
        match &mut self.0 {
            Inner::One(n) => n.set_timeout(timeout),
            Inner::Many(q) => q.set_timeout(timeout),
        }
    }

    /// Check a lock name and place it under this locker's prefix.
    pub fn name(&self, key: &str) -> Result<LockName> {
        match &self.0 {
            Inner::One(n) => n.name(key),
            Inner::Many(q) => q.name(key),
        }
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
        match &mut self.0 {
            Inner::One(n) => n.acquire(key, req, cancel, on_wait),
            Inner::Many(q) => q.acquire(key, req, cancel, on_wait),
        }
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
                "--min-hold is too long: at most {}",
                crate::duration::human(crate::lock::MAX_TTL)
            )));
        }
        match &mut self.0 {
            Inner::One(n) => n.release(key, token, all, min_hold),
            Inner::Many(q) => q.release(key, token, all, min_hold),
        }
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
        match &mut self.0 {
            Inner::One(n) => n.release_within(key, token, all, min_hold, within),
            Inner::Many(_) => self.release_with(key, token, all, min_hold),
        }
    }

    /// Extend the lease of `token` to at least `ttl` from now. Returns the
    /// point (CLOCK_BOOTTIME) until which the lease is safe to rely on.
    pub fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        crate::lock::check_ttl(ttl)?;
        match &mut self.0 {
            Inner::One(n) => n.renew(key, token, ttl),
            Inner::Many(q) => q.renew(key, token, ttl),
        }
    }

    /// Does `token` hold `key` now (under RedLock: on a majority)? Its time
    /// left and fence; [`crate::Error::Lost`] if it holds nothing,
    /// [`crate::Error::NotOwner`] if another owner holds it.
    pub fn check(&mut self, key: &str, token: &Token) -> Result<crate::lock::Held> {
        match &mut self.0 {
            Inner::One(n) => n.check(key, token),
            Inner::Many(q) => q.check(key, token),
        }
    }

    /// Who holds `key`, how long they keep it, who waits. Under RedLock,
    /// as the first server that answers sees it.
    pub fn status(&mut self, key: &str) -> Result<Status> {
        match &mut self.0 {
            Inner::One(n) => n.status(key),
            Inner::Many(q) => q.status(key),
        }
    }

    /// Every live lock whose key matches the glob `pattern`. Under RedLock,
    /// as the first server that answers sees them.
    pub fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        match &mut self.0 {
            Inner::One(n) => n.list(pattern),
            Inner::Many(q) => q.list(pattern),
        }
    }
}
