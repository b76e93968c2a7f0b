//! Acquiring under RedLock: one attempt on every master, giving back what
//! a failed attempt may have left, re-entry, and the acquire loop (random
//! retries: there is no shared queue across masters), which notes who
//! waits on every master for `status` to show.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fanout::{Answers, SLACK};
use super::masters::{Quorum, Turn, state};
use super::tally::{
    Heard, attempt_decided, busy, count, disagree, failed_reentry, grant, granted_on, heard,
    no_answer, no_answer_since, out_of_reach, refused, undo_targets,
};
use crate::clock::BootTime;
use crate::lock::{Attempt, Backend, LockName, Outage, Outcome, Release, Waiting};
use crate::{Busy, Error, Lease, Request, Result, Token, Wait};

/// Attempts in a row without a majority answering, and no outage to ride
/// out (see `out_of_reach`), before a wait gives up.
const MAX_UNREACHABLE: u32 = 3;
/// Attempts in a row whose grants disagree on the fence (others moving the
/// counters meanwhile) before that counts as contention, like a busy lock.
const MAX_DISAGREE: u32 = 3;
/// Retry delays after a failed attempt: uniform in this range.
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_millis(250);
/// The least time a note keeps a waiter in view (see [`note_keep`]).
const NOTE_MIN: Duration = Duration::from_secs(2);

/// How long a failed acquire waits for a master that had not answered its
/// attempt to take the grant back: twice what the attempt has taken so far
/// (`took`), plus [`SLACK`].
fn patience(took: Duration) -> Duration {
    took * 2 + SLACK
}

/// The pause before retrying a busy lock: uniform in [`RETRY_MIN`,
/// `RETRY_MAX`) by `random`, against lockstep with other clients, and no
/// longer than the wait has `left`.
fn retry_delay(random: u64, left: Option<Duration>) -> Duration {
    let spread = u64::try_from((RETRY_MAX - RETRY_MIN).as_micros()).unwrap_or(u64::MAX);
    let delay = RETRY_MIN + Duration::from_micros(random % spread.max(1));
    left.map_or(delay, |left| delay.min(left))
}

/// How long a note made before a retry after `delay` keeps the waiter in
/// view: past the next round's note (the retry, an attempt of up to
/// `timeout` per master, twice over for its give-backs, and the note, on
/// a loaded machine too): 3x the delay plus twice the timeout, at least
/// [`NOTE_MIN`]. A waiter that stops noting (killed) goes with it.
fn note_keep(delay: Duration, timeout: Duration) -> Duration {
    (delay * 3 + timeout * 2).max(NOTE_MIN)
}

/// A waiting acquire as `status` shows it under RedLock, which keeps no
/// queue: noted on every master after each busy round, dropped when the
/// acquire ends (lua/redlock_wait.lua). No attempt reads it.
struct Noted {
    /// Random, one per waiting acquire (its attempts each have a fresh
    /// token); not a lock token: it grants nothing, and reads show only
    /// its digest.
    id: Arc<String>,
    /// The info the attempts send, as JSON.
    info: Arc<String>,
    /// How long the last attempt took, for the wait for the last call.
    took: Duration,
}

impl Noted {
    fn new(req: &Request) -> Noted {
        Noted {
            id: Arc::new(uuid::Uuid::new_v4().simple().to_string()),
            info: Arc::new(serde_json::to_string(&req.info).unwrap_or_default()),
            took: Duration::ZERO,
        }
    }
}

/// What an acquire does after a failed attempt.
enum Next {
    Retry(Duration),
    Fail(Error),
}
impl Quorum {
    /// One attempt on every master: a fresh grant (decided when a majority
    /// agrees on a fence, or can no longer), or with `reenter_only` a
    /// re-entry (decided when a majority re-entered, or every master has
    /// answered).
    /// Every counter a master shows raises the floor for later attempts.
    /// `waited`: how long the acquire has waited so far, which a master that
    /// grants records in its history's `granted` event.
    fn attempt_all(
        &self,
        lock: &LockName,
        token: &Token,
        req: &Request,
        reenter_only: bool,
        waited: Duration,
    ) -> (Answers<Outcome>, Vec<bool>) {
        let (l, t, r) = (lock.clone(), token.clone(), req.clone());
        let m = self.majority();
        let floor = state(&self.shared).floor;
        let shared = Arc::clone(&self.shared);
        // A re-entry waits its turn on a master still busy with the
        // previous call (the enclosing grant's bookkeeping, a give-back):
        // skipping it would fail a re-entry every master can grant.
        let turn = if reenter_only {
            Turn::Queue
        } else {
            Turn::Skip
        };
        self.on(
            &self.all(),
            turn,
            self.timeout,
            move |node| {
                let a = node
                    .attempt(&Attempt {
                        reenter_only,
                        floor,
                        waited,
                        ..Attempt::new(&l, &t, &r)
                    })
                    .map_err(|f| f.error);
                if let Ok(Outcome::Granted { fence, .. } | Outcome::Busy(_, fence, _)) = &a {
                    let mut s = state(&shared);
                    s.floor = s.floor.max(*fence);
                }
                a
            },
            move |a, _| attempt_decided(a, m, reenter_only),
        )
    }

    /// Drop every hold of `token` and leave any queue, on the masters in
    /// `targets`. Waits for those that granted (they answer at once); with
    /// `last: Some(patience)` (the caller is about to return, and nothing
    /// else would give the rest back before their TTL) also for the others,
    /// for `patience`: a master that had not answered the attempt may be a
    /// little late, or frozen, and then waiting helps nothing, as its give-
    /// back could only be sent after its attempt timed out.
    fn abandon_all(
        &self,
        lock: &LockName,
        token: &Token,
        answers: &Answers<Outcome>,
        targets: &[bool],
        last: Option<Duration>,
    ) {
        if !targets.contains(&true) {
            return;
        }
        let granted = granted_on(answers);
        let (l, t) = (lock.clone(), token.clone());
        self.on(
            targets,
            Turn::Queue,
            last.unwrap_or(self.timeout),
            move |node| node.abandon(&l, &t),
            move |a, late| {
                let granted_done = granted
                    .iter()
                    .zip(a)
                    .all(|(g, answer)| !g || answer.is_some());
                granted_done && (late || last.is_none())
            },
        );
    }

    /// The error that ends a wait on masters out of reach: after an outage
    /// ridden out, it says since when each silent master has not answered,
    /// and what one that did answer said, if it gave an error.
    fn outage_error(
        &self,
        key: &str,
        answers: &Answers<Outcome>,
        heard: &[Heard],
        silences: &[Outage],
        silent_before: &[bool],
        outage: &Outage,
    ) -> Error {
        let what = format!("acquire {key:?}");
        let (n, m) = (self.len(), self.majority());
        if !outage.ridden_out() {
            let ok = count(answers, Result::is_ok);
            let said = answers.iter().flatten().find_map(|a| a.as_ref().err());
            return no_answer(&what, ok, n, m, said);
        }
        let said = answers
            .iter()
            .zip(heard)
            .filter(|(_, h)| **h == Heard::Answered)
            .find_map(|(a, _)| a.as_ref()?.as_ref().err());
        // Named silent: the masters silent before this last round too; not
        // one whose only unanswered call was cut off by the deadline (unless
        // no master was silent before).
        let named = |before: bool| -> Vec<String> {
            silences
                .iter()
                .zip(&self.servers)
                .zip(silent_before)
                .filter(|(_, b)| **b || !before)
                .filter_map(|((s, server), _)| s.unanswered(&server.label))
                .collect()
        };
        let since = Some(named(true))
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| named(false));
        no_answer_since(&what, n, m, said, &since)
    }

    /// A lease if a majority granted `token` and the validity window is
    /// open; for a fresh grant (not a re-entry), only if a majority agrees
    /// on the fence.
    fn granted(
        &self,
        answers: &Answers<Outcome>,
        key: &str,
        token: &Token,
        req: &Request,
        sent: BootTime,
        reentry: bool,
    ) -> Option<Lease> {
        let (fence, count) = grant(answers, self.majority(), reentry)?;
        let lease = Lease::granted(key, token.clone(), fence, count, req.ttl, sent);
        (!lease.valid_until.passed()).then_some(lease)
    }

    /// Re-enter `key` with `token`. `Ok(None)` if a majority says the token
    /// holds nothing: the caller then acquires afresh. A re-entry that too
    /// few masters granted (or granted too late) is undone -- one hold given
    /// back on each master that added one, so the enclosing holder's count
    /// is as it was -- and fails. (A master that did not answer may have
    /// added a hold too; the outermost holder's release of every hold
    /// clears it.)
    pub(super) fn reenter(
        &self,
        lock: &LockName,
        key: &str,
        token: &Token,
        req: &Request,
    ) -> Result<Option<Lease>> {
        let sent = BootTime::now();
        let (answers, _) = self.attempt_all(lock, token, req, true, Duration::ZERO);
        let twins = self.check_twins();
        if twins.is_ok()
            && let Some(lease) = self.granted(&answers, key, token, req, sent, true)
        {
            return Ok(Some(lease));
        }
        let reentered = granted_on(&answers);
        let got = reentered.iter().filter(|r| **r).count();
        if got > 0 {
            let (k, t) = (key.to_string(), token.clone());
            self.on(
                &reentered,
                Turn::Queue,
                self.timeout,
                move |node| node.release(&k, &t, &Release::at_once()),
                |_, late| late,
            );
        }
        twins?;
        failed_reentry(answers, got, self.majority(), key)?;
        Ok(None)
    }

    /// Note `n` as waiting on every master for `keep` (`None`: drop it),
    /// waiting for the answers until every master has answered or
    /// `patience` has passed. Best effort: the answers are not looked at.
    /// A note skips a master still busy with an earlier call (no pile-up
    /// behind a frozen one); the drop queues behind the notes.
    fn note_all(&self, lock: &LockName, n: &Noted, keep: Option<Duration>, patience: Duration) {
        let (l, id, info) = (lock.clone(), Arc::clone(&n.id), Arc::clone(&n.info));
        let turn = if keep.is_some() {
            Turn::Skip
        } else {
            Turn::Queue
        };
        self.on(
            &self.all(),
            turn,
            patience,
            move |node| node.note_waiter(&l, &id, keep, &info),
            |_, late| late,
        );
    }

    /// Acquire afresh (a new token at every attempt) until a majority
    /// grants it in time, or the wait `w` ends; a wait is noted for
    /// `status` meanwhile, and the note dropped at the end, whatever the
    /// end (best effort: else it goes with its deadline).
    pub(super) fn acquire_fresh(
        &self,
        lock: &LockName,
        key: &str,
        req: &Request,
        w: Waiting,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease> {
        let mut noted = None;
        let got = self.wait_fresh(lock, key, req, w, on_wait, &mut noted);
        if let Some(n) = noted {
            self.note_all(lock, &n, None, patience(n.took));
        }
        got
    }

    /// [`Quorum::acquire_fresh`]'s loop; `noted`: the wait's note, once
    /// the lock was found busy.
    fn wait_fresh(
        &self,
        lock: &LockName,
        key: &str,
        req: &Request,
        mut w: Waiting,
        on_wait: &mut dyn FnMut(&Busy),
        noted: &mut Option<Noted>,
    ) -> Result<Lease> {
        let m = self.majority();
        let mut unreachable = 0;
        let mut disagreed = 0;
        // Fewer than a majority left to answer (see `out_of_reach`), and
        // since when each master has not answered.
        let mut outage = Outage::default();
        let mut silences: Vec<Outage> = (0..self.len()).map(|_| Outage::default()).collect();
        // Every attempt is a new token, so the wait is counted here, from
        // the first attempt: the grant's history says how long it took.
        let began = Instant::now();
        loop {
            if w.cancelled() {
                return Err(w.interrupted());
            }
            let token = Token::generate();
            let sent = BootTime::now();
            let asked = Instant::now();
            let (mut answers, ran) = self.attempt_all(lock, &token, req, false, began.elapsed());
            let undo = undo_targets(&answers, &ran);
            // Two ends that give the grant back wherever it may have been
            // made: two URLs of one master (Some(the error)), or a wait
            // cancelled as the grant came in (None: the interruption, taken
            // once the grant is given back).
            let give_back = match self.check_twins() {
                Err(e) => Some(Some(e)),
                Ok(()) => match self.granted(&answers, key, &token, req, sent, false) {
                    Some(_) if w.cancelled() => Some(None),
                    Some(lease) => return Ok(lease),
                    None => None,
                },
            };
            if let Some(err) = give_back {
                self.abandon_all(
                    lock,
                    &token,
                    &answers,
                    &undo,
                    Some(patience(sent.elapsed())),
                );
                return Err(err.unwrap_or_else(|| w.interrupted()));
            }
            // Granted, but not at one fence: some master's counter was
            // ahead of the floor, which now covers it. Give it back and try
            // again at once; the masters agree this time unless others are
            // moving the counters meanwhile (contention, as good as busy).
            if disagree(&answers, m) {
                disagreed += 1;
                if disagreed < MAX_DISAGREE {
                    self.abandon_all(lock, &token, &answers, &undo, None);
                    continue;
                }
            } else {
                disagreed = 0;
            }
            // A refusal that is not about reachability (a foreign key, a
            // kind mismatch) is the real answer. Otherwise: too few masters
            // left to answer for a majority is an outage, ridden out as
            // one Redis's is (if a majority has answered this process
            // before: a wrong address is not an outage); if any master
            // said busy, it is busy; if none did, too few answered.
            let heard = heard(&answers, m);
            let silent_before: Vec<bool> = silences.iter().map(Outage::ongoing).collect();
            let outage_now = out_of_reach(&heard, &silent_before, m);
            for (silence, h) in silences.iter_mut().zip(&heard) {
                match h {
                    Heard::Silent => _ = silence.began(asked.elapsed()),
                    Heard::Answered => silence.over(),
                    Heard::Unknown => {}
                }
            }
            if !outage_now {
                outage.over();
            }
            let busy = busy(&answers);
            let mut busy_round = false;
            let next = if let Some(i) = refused(&answers) {
                Next::Fail(match answers[i].take() {
                    Some(Err(e)) => e,
                    _ => Error::Protocol("RedLock: lost an answer".into()),
                })
            } else if outage_now && self.known() >= m {
                unreachable = 0;
                match outage.pause(true, w.waits(), w.deadline(), asked.elapsed()) {
                    Some(pause) => Next::Retry(pause),
                    None => Next::Fail(self.outage_error(
                        key,
                        &answers,
                        &heard,
                        &silences,
                        &silent_before,
                        &outage,
                    )),
                }
            } else if busy.is_some() || disagreed >= MAX_DISAGREE {
                disagreed = 0;
                unreachable = 0;
                match w.busy(busy.as_ref(), on_wait) {
                    Err(e) => Next::Fail(e),
                    Ok(()) => {
                        busy_round = true;
                        Next::Retry(retry_delay(uuid::Uuid::new_v4().as_u64_pair().1, w.left()))
                    }
                }
            } else {
                // Too few masters answered in time, and no outage to ride
                // out: errors masters gave (too few replicas), or a
                // majority that never answered this process (a wrong
                // address). A caller willing to wait gets a few more tries
                // (a loaded machine, a restart); -n gets the answer at once.
                unreachable += 1;
                if unreachable >= MAX_UNREACHABLE || matches!(req.wait, Wait::No) {
                    let answered = count(&answers, Result::is_ok);
                    let said = answers.iter().flatten().find_map(|a| a.as_ref().err());
                    Next::Fail(no_answer(
                        &format!("acquire {key:?}"),
                        answered,
                        self.len(),
                        m,
                        said,
                    ))
                } else {
                    Next::Retry(RETRY_MIN * unreachable)
                }
            };
            // A master that did not answer (or answered late) may still
            // have granted: give it back before trying again, and before
            // giving up wait a little for the give-backs to be sent.
            let last = matches!(next, Next::Fail(_)).then(|| patience(sent.elapsed()));
            self.abandon_all(lock, &token, &answers, &undo, last);
            let delay = match next {
                Next::Fail(e) => return Err(e),
                Next::Retry(d) => d,
            };
            let until = Instant::now() + delay;
            // Who waits, for `status`: noted on every master within the
            // pause (not when the wait is about to end: the next attempt
            // would find a master still busy with the note).
            if busy_round && delay >= RETRY_MIN {
                let n = noted.get_or_insert_with(|| Noted::new(req));
                n.took = sent.elapsed();
                self.note_all(lock, n, Some(note_keep(delay, self.timeout)), delay);
            }
            while Instant::now() < until && !w.cancelled() {
                std::thread::sleep(
                    until
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(10)),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patience_is_twice_the_attempt_plus_slack() {
        assert_eq!(patience(Duration::ZERO), Duration::from_millis(20));
        assert_eq!(
            patience(Duration::from_millis(100)),
            Duration::from_millis(220)
        );
    }

    #[test]
    fn retry_delays_spread_over_their_range_within_the_wait_left() {
        let ms = Duration::from_millis;
        assert_eq!(retry_delay(0, None), ms(50));
        assert_eq!(
            retry_delay(199_999, None),
            ms(250) - Duration::from_micros(1)
        );
        // Wraps around: the range is 200 ms wide.
        assert_eq!(retry_delay(200_000, None), ms(50));
        assert_eq!(retry_delay(100_000, None), ms(150));
        assert_eq!(retry_delay(100_000, Some(ms(10))), ms(10));
        assert_eq!(retry_delay(100_000, Some(ms(1000))), ms(150));
        assert_eq!(retry_delay(u64::MAX, Some(Duration::ZERO)), Duration::ZERO);
    }
}
