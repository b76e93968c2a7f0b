//! The renewer: extends the lease every TTL/3 on a connection of its own,
//! publishes each confirmed validity deadline to the supervisor, and moves
//! the guard's kill deadline with it.
//!
//! It runs on a thread of its own, which the supervisor starts when the
//! hold core says so (`crate::hold`): when the first renewal is due
//! (TTL/3 after the grant's request), or before it reports anything (a
//! report may block on a full stderr). A command that ends within TTL/3
//! costs no thread and no second connection.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::{Scope, Thread};

use crate::clock::BootTime;
use crate::hold;
use crate::{Error, Lease, Locker};

use super::guard::Guard;

/// Everything the renewer shares with the supervisor.
pub(crate) struct Shared<'a> {
    pub lease: &'a Lease,
    /// The other locks of a set (`rlock exec a b`), renewed with `lease`;
    /// `lease.valid_until` is already the set's earliest.
    pub others: &'a [Lease],
    /// In a set, the lock found lost and the reason, unprefixed.
    pub lost_key: &'a Mutex<Option<(String, String)>>,
    /// Last confirmed validity deadline.
    pub valid_until: &'a Mutex<BootTime>,
    /// Set when the lock is lost or given back: renew no more.
    pub stop: &'a AtomicBool,
    /// Where to move the kill deadline; None under `--on-lost ignore`.
    pub guard: Option<&'a Guard>,
    /// The command's pid once the guard reported its start (0 until then),
    /// noted in Redis by the first renewal after that (for `status`).
    pub cmd_pid: &'a AtomicI32,
}

/// The supervisor's handle on the renewer thread, which starts on demand.
pub(crate) struct Renewer<'s, 'e> {
    scope: &'s Scope<'s, 'e>,
    /// What the thread takes when it starts.
    pending: Option<(&'e mut Locker, Shared<'e>)>,
    thread: Option<Thread>,
    /// One byte per definite loss, from the thread (see [`Renewer::lost`]).
    lost: Option<std::io::PipeReader>,
}

impl<'s, 'e> Renewer<'s, 'e> {
    pub(crate) fn new(
        scope: &'s Scope<'s, 'e>,
        locker: &'e mut Locker,
        r: Shared<'e>,
    ) -> Renewer<'s, 'e> {
        Renewer {
            scope,
            pending: Some((locker, r)),
            thread: None,
            lost: None,
        }
    }

    /// Start the thread, unless it runs or renewing was stopped. If the
    /// thread cannot be created, nothing renews: the hold core declares
    /// the lock lost at TTL/3 before its end, and the guard kills at the
    /// kill deadline, as when Redis does not answer.
    pub(crate) fn start(&mut self) {
        let Some((locker, r)) = self.pending.take() else {
            return;
        };
        if r.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok((rx, tx)) = std::io::pipe() else {
            return;
        };
        if let Ok(h) = std::thread::Builder::new()
            .name("rlock-renew".into())
            .spawn_scoped(self.scope, move || renew_loop(locker, r, tx))
        {
            self.thread = Some(h.thread().clone());
            self.lost = Some(rx);
        }
    }

    /// Wake the thread (to see the stop flag).
    pub(crate) fn unpark(&self) {
        if let Some(t) = &self.thread {
            t.unpark();
        }
    }

    /// The descriptor that becomes readable when the thread found the lock
    /// gone (-1: none, poll ignores it).
    pub(crate) fn fd(&self) -> RawFd {
        self.lost.as_ref().map_or(-1, |p| p.as_raw_fd())
    }

    /// Why the lock was lost, once the thread said so.
    pub(crate) fn lost(&mut self) -> Option<String> {
        let p = self.lost.as_mut()?;
        // One byte, then for a break the notice's words; the thread ends
        // right after writing, so the read ends too. In a set, the lost
        // lock's name first: `K<name>\0`.
        let mut b = Vec::new();
        let _ = p.read_to_end(&mut b);
        let mut named = None;
        if b.first() == Some(&b'K')
            && let Some(end) = b.iter().position(|&c| c == 0)
        {
            named = Some(String::from_utf8_lossy(&b[1..end]).into_owned());
            b.drain(..=end);
        }
        let why = match b.first() {
            Some(b'O') => crate::lock::LOST_TAKEN.into(),
            Some(b'B') => String::from_utf8_lossy(&b[1..]).into_owned(),
            Some(_) => crate::lock::LOST_GONE.into(),
            // The thread ended without a word (stopped): nothing more.
            None => {
                self.lost = None;
                return None;
            }
        };
        self.lost = None;
        Some(match named {
            Some(key) => format!("{key:?}: {why}"),
            None => why,
        })
    }
}

/// Extend the lease every TTL/3 until stopped, by the hold core's one
/// renewal step ([`hold::Renewals`]). Reports a definite loss (gone, or
/// another owner) with one byte on `tx`; transient failures are retried
/// quickly and left to the supervisor's deadline (and the guard's).
fn renew_loop(locker: &mut Locker, r: Shared, mut tx: std::io::PipeWriter) {
    let mut renewals = hold::Renewals::new(r.lease.valid_until, r.lease.ttl);
    // Every lock of the set: the earliest validity is the set's; the
    // first definite loss of any is the set's loss.
    let leases: Vec<hold::Held> = std::iter::once(r.lease)
        .chain(r.others)
        .map(|l| hold::Held {
            key: &l.key,
            token: &l.token,
            ttl: l.ttl,
        })
        .collect();
    let stopped = || r.stop.load(Ordering::SeqCst);
    // Sent with each renewal until one is confirmed.
    let mut pid_noted = false;
    loop {
        while !stopped() && !renewals.due() {
            std::thread::park_timeout(renewals.next.remaining());
        }
        if stopped() {
            return;
        }
        let pid = u32::try_from(r.cmd_pid.load(Ordering::SeqCst))
            .ok()
            .filter(|&p| p > 0 && !pid_noted);
        match renewals.round(locker, &leases, pid, &stopped, &mut |_, _| {}) {
            hold::Round::Renewed(valid) => {
                // A renewal that completes after a loss was declared must
                // not move the deadline back out.
                if stopped() {
                    return;
                }
                *r.valid_until.lock().unwrap_or_else(|e| e.into_inner()) = valid;
                pid_noted |= pid.is_some();
                if let Some(g) = r.guard {
                    g.deadline(Some(super::kill_point(valid, r.lease.ttl)));
                }
            }
            hold::Round::Lost { key, why, error } => {
                if !r.others.is_empty() {
                    *r.lost_key.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((key.clone(), why.clone()));
                    let _ = tx.write_all(format!("K{key}\0").as_bytes());
                }
                let _ = match error {
                    // Broken by an operator (`rlock break`): who and why.
                    Error::Lost { .. } if why.starts_with(crate::lock::breaking::BROKEN_BY) => {
                        tx.write_all(format!("B{why}").as_bytes())
                    }
                    Error::Lost { .. } => tx.write_all(b"G"),
                    _ => tx.write_all(b"O"),
                };
                return;
            }
            hold::Round::Stopped => return,
            hold::Round::Failed => {}
        }
    }
}
