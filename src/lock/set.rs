//! Several locks at once (`rlock exec a b -- cmd`), without deadlock.
//!
//! Built above the per-lock operations: each lock of a set is acquired,
//! renewed, checked and released exactly as a lock taken alone (its own
//! token, lease, fence, queue and history); this module only chooses the
//! order, shares the wait's deadline and undoes a partial set.
//!
//! # Why no deadlock can form
//!
//! Every set is taken in one canonical order, [`canonical`]: by name,
//! bytewise, whatever order the user named them in. A caller holds only
//! locks that sort *before* the one it waits for, and waits for one lock at
//! a time. Suppose a cycle of waits: caller C1 holds L1 and waits for L2
//! held by C2, which waits for L3 ... held by Cn, which waits for L1. Each
//! caller waits for a lock that sorts after every lock it holds, so L1 < L2
//! < ... < Ln < L1: impossible. So among the callers that wait, the one
//! waiting for the greatest lock waits for a holder that waits for nothing
//! (its own set is complete, or it waits for an even greater lock, which
//! contradicts the choice): that holder runs its command and releases,
//! and (FIFO queues, leases bounded by their TTL when a holder dies) every
//! waiter is served in finite time. Holding some while queued for the next
//! is therefore safe; what would break it is a lock taken outside the set
//! meanwhile, such as `rlock exec b -- rlock exec a -- ...` (nesting in
//! the opposite order), which this module cannot see: name both in one
//! exec instead.
//!
//! The argument needs nothing from the servers but per-lock mutual
//! exclusion: it holds on one Redis, on a Cluster (each lock in its own
//! slot, on whichever master; nothing is atomic across them, nor needs to
//! be) and under RedLock (each lock a quorum lock of its own).
//!
//! # -n and -w apply to the set
//!
//! `--wait D` is one deadline for the whole set: each lock gets what is
//! left of it. When a lock is busy (`-n`) or its wait times out or is
//! interrupted, its own acquire has left its queue (as for one lock), and
//! the locks taken before it are released here, in reverse order: nothing
//! of the set is left held or queued.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::clock::BootTime;

use crate::{Busy, Cancel, Error, Lease, Locker, Request, Result, Wait};

/// The most locks one call may take together.
pub const MAX_KEYS: usize = 16;

/// Refuse an empty set, a duplicate name, more than [`MAX_KEYS`]: a usage
/// error (exit 64), before anything is sent to Redis.
pub fn check_keys(keys: &[String]) -> Result<()> {
    if keys.is_empty() {
        return Err(Error::invalid("no lock name given"));
    }
    if keys.len() > MAX_KEYS {
        return Err(Error::invalid(format!(
            "{} locks named: at most {MAX_KEYS} can be taken together",
            keys.len()
        )));
    }
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].contains(k) {
            return Err(Error::invalid(format!(
                "lock {k:?} is named twice: name each lock of a set once"
            )));
        }
    }
    Ok(())
}

/// The order every set is taken in: by name, bytewise (see the module
/// doc). Indices into `keys`.
pub fn canonical(keys: &[String]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| keys[a].as_bytes().cmp(keys[b].as_bytes()));
    order
}

/// The other names of the set, sorted: what a lock's holder info records
/// in `set` (empty for a lock taken alone).
pub fn others(keys: &[String], key: &str) -> Vec<String> {
    if keys.len() < 2 {
        return Vec::new();
    }
    let mut v: Vec<String> = keys.iter().filter(|k| *k != key).cloned().collect();
    v.sort();
    v
}

/// The wait left for the next lock of a set whose wait started at `start`.
pub(crate) fn wait_left(wait: Wait, start: Instant) -> Wait {
    match wait {
        Wait::For(d) => Wait::For(d.saturating_sub(start.elapsed())),
        w => w,
    }
}

/// Take every lock of `keys` with `take` (one lock's acquire, which ends
/// its wait when the [`Cancel`] it is given is cancelled), in the
/// canonical order, one deadline for the set; on a failure, release what
/// was taken (reverse order) and return that failure. The leases come back
/// in the order `keys` names them. Each lock's holder info gets the set's
/// other names. `cancel`: the caller's, handed to every `take` (else each
/// gets one of its own).
pub(crate) fn take_all(
    locker: &mut Locker,
    keys: &[String],
    req: &Request,
    cancel: Option<&Cancel>,
    take: &mut dyn FnMut(&mut Locker, &str, &Request, &Cancel) -> Result<Lease>,
) -> Result<Vec<Lease>> {
    check_keys(keys)?;
    let start = Instant::now();
    let mut taken: Vec<(usize, Lease)> = Vec::with_capacity(keys.len());
    for i in canonical(keys) {
        let mut one = req.waiting(wait_left(req.wait, start));
        one.info.set = others(keys, &keys[i]);
        let own = Cancel::new();
        let cancel = cancel.unwrap_or(&own);
        // While this lock is waited for, the ones taken before it are
        // renewed by a thread of their own: a long wait must not let them
        // expire under us. A loss it finds (a break, above all) ends the
        // wait through `cancel`: the set can no longer be completed.
        let got = if taken.is_empty() {
            take(locker, &keys[i], &one, cancel)
        } else {
            let mut side = locker.detached();
            let stop = AtomicBool::new(false);
            let mut leases: Vec<Lease> = taken.iter().map(|(_, l)| l.clone()).collect();
            let (got, lost) = std::thread::scope(|s| {
                let h = s.spawn(|| keep_alive(&mut side, &mut leases, &stop, cancel));
                let got = take(locker, &keys[i], &one, cancel);
                stop.store(true, Ordering::SeqCst);
                h.thread().unpark();
                (got, h.join().unwrap_or(None))
            });
            for ((_, l), renewed) in taken.iter_mut().zip(leases) {
                l.valid_until = renewed.valid_until;
            }
            match (got, lost) {
                // The loss is the cause (the wait it cancelled says
                // "interrupted"), and what the caller must report.
                (Ok(lease), Some(e)) => {
                    taken.push((i, lease));
                    Err(e)
                }
                (Err(_), Some(e)) => Err(e),
                (got, None) => got,
            }
        };
        match got {
            Ok(lease) => taken.push((i, lease)),
            Err(e) => {
                release_taken(locker, taken.into_iter().map(|(_, l)| l).rev());
                return Err(e);
            }
        }
    }
    // Every lease must still be valid together: the earliest deadline is
    // the set's (callers use the minimum).
    if let Some(l) = taken.iter().find(|(_, l)| l.valid_until.passed()) {
        let key = l.1.key.clone();
        release_taken(locker, taken.into_iter().map(|(_, l)| l).rev());
        return Err(Error::Lost {
            key,
            why: "its lease ran out while the rest of the set was taken".into(),
        });
    }
    taken.sort_by_key(|(i, _)| *i);
    Ok(taken.into_iter().map(|(_, l)| l).collect())
}

/// Renew `leases` every TTL/3 until `stop`, by the hold core's one
/// renewal step ([`crate::hold::Renewals`]); a definite loss (gone, another
/// owner, or being broken) ends it with that error, once the lost lease is
/// given back and `cancel` ends the wait for the next lock. Transient
/// failures are retried quickly; a lease that runs out meanwhile is caught
/// by the caller.
///
/// Giving the lost lease back at once is what lets a break pass the lock
/// on: a hold being broken stays held until its holder releases it or its
/// lease ends (lua/break.lua), and nothing runs for this set yet.
fn keep_alive(
    locker: &mut Locker,
    leases: &mut [Lease],
    stop: &AtomicBool,
    cancel: &Cancel,
) -> Option<Error> {
    let first = leases.iter().min_by_key(|l| l.valid_until)?;
    let mut renewals = crate::hold::Renewals::new(first.valid_until, first.ttl);
    let stopped = || stop.load(Ordering::SeqCst);
    let mut valid: Vec<Option<BootTime>> = vec![None; leases.len()];
    loop {
        while !stopped() && !renewals.due() {
            std::thread::park_timeout(renewals.next.remaining());
        }
        if stopped() {
            return None;
        }
        let held: Vec<crate::hold::Held> = leases
            .iter()
            .map(|l| crate::hold::Held {
                key: &l.key,
                token: &l.token,
                ttl: l.ttl,
            })
            .collect();
        let round = renewals.round(locker, &held, None, &stopped, &mut |i, v| {
            valid[i] = Some(v);
        });
        for (l, v) in leases.iter_mut().zip(&mut valid) {
            if let Some(v) = v.take() {
                l.valid_until = v;
            }
        }
        if let crate::hold::Round::Lost { key, error, .. } = round {
            let lost = leases.iter().filter(|l| l.key == key).cloned();
            release_taken(locker, lost);
            cancel.cancel(0);
            return Some(error);
        }
    }
}

/// Give back leases of a set that could not be completed, or whose command
/// never ran: every hold of a fresh grant, one of a re-entry.
pub(crate) fn release_taken(locker: &mut Locker, leases: impl Iterator<Item = Lease>) {
    for l in leases {
        let how = crate::Release {
            all: l.count == 1,
            ..crate::Release::at_once()
        };
        let _ = locker.release_with(&l.key, &l.token, &how);
    }
}

/// Acquire every lock of `keys` together, as [`Locker::acquire`] acquires
/// one: in the canonical order, `req.wait` for the whole set; busy, timed
/// out or cancelled leaves nothing held or queued. `req.reenter` is tried
/// on every lock. Leases in the order `keys` names them.
pub fn acquire(
    locker: &mut Locker,
    keys: &[String],
    req: &Request,
    cancel: Option<&Cancel>,
    on_wait: &mut dyn FnMut(&Busy),
) -> Result<Vec<Lease>> {
    take_all(locker, keys, req, cancel, &mut |l, k, r, c| {
        l.acquire(k, r, Some(c), &mut *on_wait)
    })
}

/// `RLOCK_FENCES` for a command run under a set: `key=fence` for each lock,
/// space-separated, in the order the keys were named.
pub fn fences_env(leases: &[Lease]) -> String {
    leases
        .iter()
        .map(|l| format!("{}={}", l.key, l.fence))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_order_is_by_name_whatever_order_they_are_named_in() {
        let k = keys(&["staging-db", "app", "b"]);
        let o: Vec<&str> = canonical(&k).into_iter().map(|i| k[i].as_str()).collect();
        assert_eq!(o, ["app", "b", "staging-db"]);
        let k2 = keys(&["b", "staging-db", "app"]);
        let o2: Vec<&str> = canonical(&k2).into_iter().map(|i| k2[i].as_str()).collect();
        assert_eq!(o, o2);
    }

    #[test]
    fn duplicates_too_many_and_none_are_refused() {
        assert!(check_keys(&keys(&["a", "a"])).is_err());
        assert!(check_keys(&[]).is_err());
        let many: Vec<String> = (0..=MAX_KEYS).map(|i| format!("k{i}")).collect();
        assert!(check_keys(&many).is_err());
        assert!(check_keys(&many[..MAX_KEYS]).is_ok());
        assert_eq!(others(&keys(&["c", "a", "b"]), "c"), ["a", "b"]);
        assert!(others(&keys(&["a"]), "a").is_empty());
    }
}
