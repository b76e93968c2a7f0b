//! The renewer: extends the lease every TTL/3 on a connection of its own,
//! publishes each confirmed validity deadline to the supervisor, and moves
//! the guard's kill deadline with it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use crate::clock::BootTime;
use crate::{Error, Lease, Locker};

use super::Msg;
use super::guard::Guard;

/// Everything the renewer shares with the supervisor.
pub(crate) struct Renewal<'a> {
    pub lease: &'a Lease,
    /// Last confirmed validity deadline.
    pub valid_until: &'a Mutex<BootTime>,
    /// Set when the lock is lost or given back: renew no more.
    pub stop: &'a AtomicBool,
    /// Where to move the kill deadline; None under `--on-lost ignore`.
    pub guard: Option<&'a Guard>,
}

/// Extend the lease every TTL/3 until stopped. Reports a definite loss
/// (gone, or another owner); transient failures are retried quickly and
/// left to the supervisor's deadline (and the guard's).
pub(crate) fn renew_loop(locker: &mut Locker, r: Renewal, tx: Sender<Msg>) {
    let every = r.lease.ttl / 3;
    let retry = (every / 4).clamp(Duration::from_millis(20), Duration::from_millis(500));
    // From the grant's request, as the validity deadline counts: the
    // command's start may have taken a while.
    let sent = r.lease.valid_until - (r.lease.ttl - crate::lock::drift(r.lease.ttl));
    let mut next = sent + every;
    loop {
        while !r.stop.load(Ordering::SeqCst) && !next.passed() {
            std::thread::park_timeout(next.remaining());
        }
        if r.stop.load(Ordering::SeqCst) {
            return;
        }
        let sent = BootTime::now();
        match locker.renew(&r.lease.key, &r.lease.token, r.lease.ttl) {
            Ok(valid) => {
                // A renewal that completes after a loss was declared must
                // not move the deadline back out.
                if r.stop.load(Ordering::SeqCst) {
                    return;
                }
                *r.valid_until.lock().unwrap_or_else(|e| e.into_inner()) = valid;
                if let Some(g) = r.guard {
                    g.deadline(Some(super::kill_point(valid, r.lease.ttl)));
                }
                next = sent + every;
            }
            Err(Error::Lost { .. }) => {
                let _ = tx.send(Msg::Lost("it expired or was deleted".into()));
                return;
            }
            Err(Error::NotOwner { .. }) => {
                let _ = tx.send(Msg::Lost("another owner holds it now".into()));
                return;
            }
            Err(_) => next = BootTime::now() + retry,
        }
    }
}
