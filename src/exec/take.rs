//! Taking exec's lock before the command starts: one attempt without a
//! thread where that can do, then the waiting acquire with a thread that
//! lets INT/TERM/HUP/QUIT end the wait.

use std::time::Duration;

use crate::{Busy, Cancel, Error, Lease, Locker, Request, Result, Wait};

/// Acquire as `req` says; INT/TERM/HUP/QUIT received meanwhile end the
/// wait (nothing held or queued), USR1/USR2 are dropped.
///
/// On one server, one attempt is made first without a thread: it is
/// bounded (no queueing, no riding out an outage: see `Node::acquire`),
/// and its signals wait in `signals` until it returns. Only if the lock is
/// busy (or Redis failed after answering, which a waiting acquire rides
/// out) does the full, waiting acquire run, with a thread taking signals
/// and cancelling the wait at once. The uncontended case so starts no
/// thread at all; a waiter pays one extra non-queued attempt. Not for
/// `--supersede` (it acts when it joins the queue) nor RedLock.
pub(super) fn acquire(
    locker: &mut Locker,
    key: &str,
    req: &Request,
    signals: &crate::signals::Blocked,
    on_wait: &mut dyn FnMut(&Busy),
) -> Result<Lease> {
    let waits = !matches!(req.wait, Wait::No | Wait::For(Duration::ZERO));
    // `--supersede` acts when its acquire joins the queue: it gets the
    // full acquire from the start.
    let mut rest = req.clone();
    let first = if locker.is_single() && !req.supersede {
        let mut once = req.clone();
        once.wait = Wait::No;
        match locker.acquire(key, &once, None, &mut |_| {}) {
            Ok(lease) => Some(lease),
            Err(Error::Busy { .. }) if waits => {
                // Busy means a re-entry was tried and found the token
                // holding nothing, which it cannot come to: not again.
                rest.reenter = None;
                None
            }
            Err(_) if waits && locker.answered() => None,
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let lease = match first {
        Some(lease) => lease,
        None => {
            let cancel = Cancel::new();
            let lease = std::thread::scope(|s| {
                let _watcher = signals.watch(s, |sig| {
                    if crate::signals::ENDS_WAIT.contains(&sig) {
                        cancel.cancel(sig);
                    }
                })?;
                locker.acquire(key, &rest, Some(&cancel), on_wait)
            })?;
            if cancel.is_cancelled() {
                let _ = locker.release_with(key, &lease.token, lease.count == 1, None);
                return Err(cancel.interrupted());
            }
            lease
        }
    };
    // A signal taken meanwhile: `run` looks right after, before the spawn.
    Ok(lease)
}

/// Take every pending signal; the first that ends a wait, if any (the
/// others are dropped, as while waiting).
pub(super) fn ends_wait(signals: &crate::signals::Blocked) -> Option<i32> {
    let mut first = None;
    while let Some(sig) = signals.take() {
        if crate::signals::ENDS_WAIT.contains(&sig) {
            first = first.or(Some(sig));
        }
    }
    first
}
