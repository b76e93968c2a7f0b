//! The one renewal step of every hold: exec's renewer thread
//! (`exec/renew.rs`), the keeper (`keep/keeper.rs`) and a lock set that
//! waits for its next lock (`lock/set.rs`, `keep_alive`) run [`Renewals`]:
//! when a renewal is due, one [`Renewals::round`] over the hold's leases,
//! whose result [`Round`] each turns into the core's event
//! ([`Round::event`]): the set's earliest validity confirmed, or the lock
//! lost and why, or nothing (a failure that does not say the lock is gone:
//! retried soon, and left to the core's loss point and the guard's
//! deadline).

use std::time::Duration;

use crate::clock::BootTime;
use crate::lock::RenewalSchedule;
use crate::{Error, Locker, Renewal, Token};

/// One lease to renew.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held<'a> {
    pub key: &'a str,
    pub token: &'a Token,
    pub ttl: Duration,
}

/// What one round of renewals found.
#[derive(Debug)]
pub(crate) enum Round {
    /// Every lease confirmed; the earliest validity deadline (the set's).
    Renewed(BootTime),
    /// A renewal found this lock gone or taken: `why` as the core words it
    /// ([`crate::lock::LOST_GONE`], [`crate::lock::LOST_TAKEN`], or who
    /// broke it), and the error itself.
    Lost {
        key: String,
        why: String,
        error: Error,
    },
    /// Some renewal failed without saying the lock is gone (Redis
    /// unreachable, a timeout): tried again after the schedule's retry.
    Failed,
    /// Told to stop between two renewals.
    Stopped,
}

impl Round {
    /// The core's event for this result (None: nothing to decide).
    pub(crate) fn event(&self) -> Option<super::Event> {
        match self {
            Round::Renewed(valid) => Some(super::Event::Renewed(*valid)),
            Round::Lost { why, .. } => Some(super::Event::Lost(why.clone())),
            Round::Failed | Round::Stopped => None,
        }
    }
}

/// Why a renewal's error is a loss, in the core's words; None if it does
/// not say the lock is gone.
pub(crate) fn lost_why(e: &Error) -> Option<String> {
    match e {
        // Broken by an operator (`rlock break`): who and why.
        Error::Lost { why, .. } if why.starts_with(crate::lock::breaking::BROKEN_BY) => {
            Some(why.clone())
        }
        Error::Lost { .. } => Some(crate::lock::LOST_GONE.into()),
        Error::NotOwner { .. } => Some(crate::lock::LOST_TAKEN.into()),
        _ => None,
    }
}

/// The renewal schedule of one hold: every TTL/3 from the grant's request,
/// sooner after a failure.
#[derive(Debug)]
pub(crate) struct Renewals {
    every: Duration,
    retry: Duration,
    /// When the next round is due.
    pub next: BootTime,
}

impl Renewals {
    /// For a hold whose (earliest) lease is valid until `valid`, of `ttl`.
    pub(crate) fn new(valid: BootTime, ttl: Duration) -> Renewals {
        let RenewalSchedule {
            every,
            retry,
            first,
        } = RenewalSchedule::new(valid, ttl);
        Renewals {
            every,
            retry,
            next: first,
        }
    }

    /// A round could not run (no connection): due again after the retry.
    pub(crate) fn failed(&mut self) -> Round {
        self.next = BootTime::now() + self.retry;
        Round::Failed
    }

    /// Is a round due?
    pub(crate) fn due(&self) -> bool {
        self.next.passed()
    }

    /// Renew every lease of `leases` once (noting `cmd_pid` for `status`),
    /// stopping at the first definite loss, or when `stop` says so between
    /// two renewals; `each(i, valid)` hears every lease confirmed. The next
    /// round is due TTL/3 after this one's start, or after the retry if a
    /// renewal failed.
    pub(crate) fn round(
        &mut self,
        locker: &mut Locker,
        leases: &[Held],
        cmd_pid: Option<u32>,
        stop: &dyn Fn() -> bool,
        each: &mut dyn FnMut(usize, BootTime),
    ) -> Round {
        let sent = BootTime::now();
        self.next = sent + self.every;
        let mut earliest: Option<BootTime> = None;
        let mut failed = false;
        for (i, l) in leases.iter().enumerate() {
            if stop() {
                return Round::Stopped;
            }
            let renewal = Renewal::new(l.ttl).map(|r| r.noted(cmd_pid));
            match renewal.and_then(|r| locker.renew_with(l.key, l.token, &r)) {
                Ok(valid) => {
                    each(i, valid);
                    earliest = Some(earliest.map_or(valid, |e| e.min(valid)));
                }
                Err(error) => match lost_why(&error) {
                    Some(why) => {
                        return Round::Lost {
                            key: l.key.to_string(),
                            why,
                            error,
                        };
                    }
                    None => failed = true,
                },
            }
        }
        match earliest {
            Some(valid) if !failed => Round::Renewed(valid),
            _ => self.failed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::{LOST_GONE, LOST_TAKEN};

    fn lost(why: &str) -> Error {
        Error::Lost {
            key: "k".into(),
            why: why.into(),
        }
    }

    #[test]
    fn a_break_keeps_who_broke_it() {
        let why = format!("{}ops (reason: x)", crate::lock::breaking::BROKEN_BY);
        assert_eq!(lost_why(&lost(&why)), Some(why));
    }

    #[test]
    fn a_lock_gone_or_taken_is_worded_as_the_core_words_it() {
        assert_eq!(lost_why(&lost("expired")).as_deref(), Some(LOST_GONE));
        let taken = Error::NotOwner { key: "k".into() };
        assert_eq!(lost_why(&taken).as_deref(), Some(LOST_TAKEN));
    }

    #[test]
    fn a_failure_that_does_not_say_the_lock_is_gone_is_no_loss() {
        assert_eq!(lost_why(&Error::Protocol("x".into())), None);
    }

    #[test]
    fn only_a_confirmation_or_a_loss_is_an_event() {
        let at = BootTime::from_since_boot(Duration::from_secs(5));
        assert!(matches!(
            Round::Renewed(at).event(),
            Some(super::super::Event::Renewed(v)) if v == at
        ));
        let l = Round::Lost {
            key: "k".into(),
            why: LOST_GONE.into(),
            error: lost("x"),
        };
        assert!(matches!(l.event(), Some(super::super::Event::Lost(w)) if w == LOST_GONE));
        assert!(Round::Failed.event().is_none());
        assert!(Round::Stopped.event().is_none());
    }

    #[test]
    fn the_first_round_is_due_ttl_over_3_after_the_grant() {
        let ttl = Duration::from_secs(30);
        let valid = BootTime::from_since_boot(Duration::from_secs(100));
        let r = Renewals::new(valid, ttl);
        assert_eq!(r.next, RenewalSchedule::new(valid, ttl).first);
    }
}
