//! The decisions over the masters' answers: majorities, fence agreement,
//! what an attempt may have left to undo, and what a release, renewal or
//! check adds up to. Pure: no Redis, no threads, no clock (callers pass
//! the answers as collected, `None` for a master that has not answered).

use std::time::Duration;

use super::fanout::Answers;

mod reads;

use crate::clock::BootTime;
use crate::error::Message;
use crate::lock::{Busy, Held, Outcome};
use crate::{Error, Released, Result, msg};
pub(super) use reads::{
    history_on_majority, list_on_majority, named_holders, overview_on_majority, status_on_majority,
};

/// How many of `n` masters make a majority.
pub(super) fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// Too few masters answered usefully; `said` is the first error one of
/// them gave, if any (a master that answered with an error, e.g. too few
/// replicas for --min-replicas, did answer).
pub(super) fn no_answer(
    what: &str,
    ok: usize,
    total: usize,
    need: usize,
    said: Option<&Error>,
) -> Error {
    let context = msg![format!(
        "{what}: {ok} of {total} Redis masters answered as needed, RedLock needs {need}"
    )];
    Error::unavailable(
        context.and(one_said(" (one said: ", said)),
        redis::RedisError::from((redis::ErrorKind::Io, "no majority")),
    )
}

/// Too few masters left to answer, after a wait that rode out their
/// silence: `since` says, for each silent one, since when it has not
/// answered; `said` is the first error a master that did answer gave.
pub(super) fn no_answer_since(
    what: &str,
    total: usize,
    need: usize,
    said: Option<&Error>,
    since: &[String],
) -> Error {
    let context = msg![format!(
        "{what}: RedLock needs {need} of {total} Redis masters; {}",
        since.join(", ")
    )];
    Error::unavailable(
        context.and(one_said(" (one that did said: ", said)),
        redis::RedisError::from((redis::ErrorKind::Io, "no majority")),
    )
}

/// `intro`, a master's error and ")", its settings kept as such; nothing
/// without one.
fn one_said(intro: &str, said: Option<&Error>) -> Message {
    said.map_or_else(Message::default, |e| msg![intro].and(e.message()).and(")"))
}

/// What one attempt heard from a master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Heard {
    /// An answer: a grant, busy, or an error it gave (a refusal, too few
    /// replicas, an ACL).
    Answered,
    /// Nothing: a connection refused, dropped or timed out, or no answer
    /// while the attempt waited for one (see [`out_of_reach`]).
    Silent,
    /// Not waited for: the outcome was decided without it.
    Unknown,
}

/// What an attempt heard from each master. A missing answer is silence if
/// the attempt was not decided (the fan-out then waited for it until its
/// time was up), else not known.
pub(super) fn heard(answers: &Answers<Outcome>, m: usize) -> Vec<Heard> {
    let waited = !attempt_decided(answers, m, false);
    answers
        .iter()
        .map(|a| match a {
            Some(Err(Error::Unavailable { cause, .. }))
                if crate::lock::resendable(cause, false, false) =>
            {
                Heard::Silent
            }
            Some(_) => Heard::Answered,
            None if waited => Heard::Silent,
            None => Heard::Unknown,
        })
        .collect()
}

/// So many masters are silent that no majority can answer: an outage, to
/// be ridden out while the wait allows, rather than a busy lock or a
/// refusal. A master not waited for counts as silent if it was silent
/// before (`silent_before`: it has not answered since): masters frozen
/// together time out together, and the first timeout decides the attempt
/// without the others.
pub(super) fn out_of_reach(heard: &[Heard], silent_before: &[bool], m: usize) -> bool {
    let left = heard
        .iter()
        .zip(silent_before)
        .filter(|(h, before)| match h {
            Heard::Answered => true,
            Heard::Silent => false,
            Heard::Unknown => !**before,
        })
        .count();
    left < m
}

pub(super) fn count<T>(answers: &Answers<T>, p: impl Fn(&Result<T>) -> bool) -> usize {
    answers.iter().flatten().filter(|a| p(a)).count()
}

pub(super) fn is_grant(a: &Result<Outcome>) -> bool {
    matches!(a, Ok(Outcome::Granted { .. }))
}

/// Which masters granted (for a re-entry: added a hold).
pub(super) fn granted_on(answers: &Answers<Outcome>) -> Vec<bool> {
    answers
        .iter()
        .map(|a| matches!(a, Some(Ok(Outcome::Granted { .. }))))
        .collect()
}

/// Each grant's fence and re-entry depth, in the masters' order.
fn grants(answers: &Answers<Outcome>) -> Vec<(u64, u64)> {
    answers
        .iter()
        .filter_map(|a| match a {
            Some(Ok(Outcome::Granted { fence, count })) => Some((*fence, *count)),
            _ => None,
        })
        .collect()
}

/// The fence value a majority of the grants agree on, if any.
pub(super) fn agreed(answers: &Answers<Outcome>, m: usize) -> Option<u64> {
    let fences: Vec<u64> = grants(answers).into_iter().map(|g| g.0).collect();
    fences
        .iter()
        .copied()
        .find(|f| fences.iter().filter(|g| *g == f).count() >= m)
}

/// The most grants at any one fence value.
fn best_agreement(answers: &Answers<Outcome>) -> usize {
    let fences: Vec<u64> = grants(answers).into_iter().map(|g| g.0).collect();
    fences
        .iter()
        .map(|f| fences.iter().filter(|g| *g == f).count())
        .max()
        .unwrap_or(0)
}

/// Is an attempt's outcome known from the answers so far? A fresh grant's
/// once a majority agrees on a fence, or can no longer (too few masters
/// left to answer); a re-entry's once a majority re-entered, and otherwise
/// only when every master has answered: each hold a failed re-entry added
/// must be known, to be given back.
pub(super) fn attempt_decided(answers: &Answers<Outcome>, m: usize, reentry: bool) -> bool {
    if reentry {
        return count(answers, is_grant) >= m;
    }
    let unknown = answers.iter().filter(|x| x.is_none()).count();
    let best = best_agreement(answers);
    best >= m || best + unknown < m
}

/// Granted by a majority, but not at one fence: some master's counter was
/// ahead of the floor (see "Fencing" in the module doc).
pub(super) fn disagree(answers: &Answers<Outcome>, m: usize) -> bool {
    count(answers, is_grant) >= m && agreed(answers, m).is_none()
}

/// The fence and re-entry depth of what a majority granted, if it did: a
/// fresh grant needs a majority at one fence; a re-entry keeps the fence
/// of its grant, which the masters that granted it agree on, but one that
/// re-entered later on a master that had granted apart may show another:
/// the highest is taken. The depth is the deepest any master reports.
pub(super) fn grant(answers: &Answers<Outcome>, m: usize, reentry: bool) -> Option<(u64, u64)> {
    let grants = grants(answers);
    if grants.len() < m {
        return None;
    }
    let fence = match agreed(answers, m) {
        Some(f) => f,
        None if reentry => grants.iter().map(|g| g.0).max().unwrap_or(0),
        None => return None,
    };
    Some((fence, grants.iter().map(|g| g.1).max().unwrap_or(1)))
}

/// Is `e` a refusal (a foreign key, a kind mismatch, a usage error)
/// rather than a master out of reach?
fn refusal(e: &Error) -> bool {
    !matches!(e, Error::Unavailable { .. })
}

/// The first master that refused for a reason other than reachability:
/// its answer is the real one.
pub(super) fn refused(answers: &Answers<Outcome>) -> Option<usize> {
    answers
        .iter()
        .position(|a| matches!(a, Some(Err(e)) if refusal(e)))
}

/// Who holds the lock, as the first master that said busy sees it.
pub(super) fn busy(answers: &Answers<Outcome>) -> Option<Busy> {
    answers.iter().find_map(|a| match a {
        Some(Ok(Outcome::Busy(b, ..))) => Some(b.clone()),
        _ => None,
    })
}

/// Masters where an attempt may have left a hold: it granted, or its
/// answer is unknown (none in time, or a connection error that may have
/// come after the script ran). A busy or refusing answer left nothing, and
/// a skipped master was not asked.
pub(super) fn undo_targets(answers: &Answers<Outcome>, ran: &[bool]) -> Vec<bool> {
    answers
        .iter()
        .zip(ran)
        .map(|(a, &ran)| {
            ran && match a {
                Some(Ok(Outcome::Busy(..) | Outcome::NotHeld)) => false,
                Some(Err(e)) => !refusal(e),
                Some(Ok(Outcome::Granted { .. })) | None => true,
            }
        })
        .collect()
}

/// After a re-entry a majority did not grant in time (its holds given
/// back): `Ok` if a majority says the token holds nothing (the caller then
/// acquires afresh), else why it failed. `got`: how many masters
/// re-entered (a majority that did, too late, failed on validity).
pub(super) fn failed_reentry(
    answers: Answers<Outcome>,
    got: usize,
    m: usize,
    key: &str,
) -> Result<()> {
    if count(&answers, |a| matches!(a, Ok(Outcome::NotHeld))) >= m {
        return Ok(());
    }
    let n = answers.len();
    if let Some(e) = answers
        .into_iter()
        .flatten()
        .find_map(|a| a.err().filter(refusal))
    {
        return Err(e);
    }
    let why = if got >= m {
        "the re-entry arrived after its lease's validity deadline".to_string()
    } else {
        format!("{got} of {n} Redis masters re-entered, RedLock needs {m}")
    };
    Err(Error::unavailable(
        format!("re-enter {key:?}: {why}; given back"),
        redis::RedisError::from((redis::ErrorKind::Io, "re-entry not confirmed")),
    ))
}

/// What a release on every master adds up to. The lock was ours only if a
/// majority still knew it (released, or still held through re-entries:
/// the most holds any master has left). Otherwise another owner, if a
/// majority says so or they outnumber the masters that say nobody holds
/// it; otherwise nothing was held, if a majority answered at all.
pub(super) fn released(answers: Answers<Released>, m: usize, key: &str) -> Result<Released> {
    let held = count(&answers, |x| {
        matches!(x, Ok(Released::Released | Released::StillHeld(_)))
    });
    let not_held = count(&answers, |x| matches!(x, Ok(Released::NotHeld)));
    let not_owner = count(&answers, |x| matches!(x, Err(Error::NotOwner { .. })));
    if held >= m {
        let still = answers
            .iter()
            .filter_map(|a| match a {
                Some(Ok(Released::StillHeld(n))) => Some(*n),
                _ => None,
            })
            .max();
        return Ok(still.map_or(Released::Released, Released::StillHeld));
    }
    if not_owner >= m || (not_owner > not_held && not_owner + not_held + held >= m) {
        return Err(Error::NotOwner { key: key.into() });
    }
    if not_held + not_owner + held >= m {
        return Ok(Released::NotHeld);
    }
    let n = answers.len();
    let error = answers.into_iter().flatten().find_map(Result::err);
    Err(error.unwrap_or_else(|| {
        no_answer(
            &format!("release {key:?}"),
            held + not_held + not_owner,
            n,
            m,
            None,
        )
    }))
}

/// Is a call that needs a majority's yes decided: a majority said yes, or
/// so many said the token is gone that a majority no longer can?
pub(super) fn confirm_decided<T>(answers: &Answers<T>, m: usize) -> bool {
    let n = answers.len();
    let ok = count(answers, Result::is_ok);
    let gone = count(answers, |x| {
        matches!(x, Err(Error::Lost { .. } | Error::NotOwner { .. }))
    });
    ok >= m || gone > n - m
}

/// The yes answers if a majority said yes; else why not: gone on too many
/// masters for a majority (another owner, if more say so than say it is
/// gone), or too few answers.
pub(super) fn confirmed<T: Copy>(
    answers: &Answers<T>,
    m: usize,
    what: &str,
    key: &str,
) -> Result<Vec<T>> {
    let n = answers.len();
    let yes: Vec<T> = answers
        .iter()
        .filter_map(|a| a.as_ref()?.as_ref().ok().copied())
        .collect();
    if yes.len() >= m {
        return Ok(yes);
    }
    let lost = count(answers, |a| matches!(a, Err(Error::Lost { .. })));
    let taken = count(answers, |a| matches!(a, Err(Error::NotOwner { .. })));
    if lost + taken > n - m {
        // A break (`rlock break`, on every master) says who and why.
        let broken = answers.iter().flatten().find_map(|a| match a {
            Err(Error::Lost { why, .. }) if why.starts_with(crate::lock::breaking::BROKEN_BY) => {
                Some(why.clone())
            }
            _ => None,
        });
        return Err(if taken > lost {
            Error::NotOwner { key: key.into() }
        } else {
            Error::Lost {
                key: key.into(),
                why: broken
                    .unwrap_or_else(|| "a majority of the Redis masters no longer hold it".into()),
            }
        });
    }
    let said = answers.iter().flatten().find_map(|a| a.as_ref().err());
    Err(no_answer(&format!("{what} {key:?}"), yes.len(), n, m, said))
}

/// A renewed lease holds while a majority holds it: until the m-th latest
/// of the confirmed ends. `valid` holds at least `m` of them.
pub(super) fn valid_on_majority(mut valid: Vec<BootTime>, m: usize) -> BootTime {
    valid.sort_by(|a, b| b.cmp(a));
    valid[m - 1]
}

/// A hold confirmed on a majority (`held` has at least `m`): for as long
/// as the m-th longest lease, at the fence most of them report (the
/// highest, between fences reported equally often).
pub(super) fn held_on_majority(mut held: Vec<Held>, m: usize) -> Held {
    held.sort_by_key(|h| std::cmp::Reverse(h.ttl));
    let ttl: Duration = held[m - 1].ttl;
    let fence = most_reported(held.iter().map(|h| h.fence).collect());
    Held { ttl, fence }
}

/// The fence reported most often among `fences` (the highest, between
/// fences reported equally often); 0 if none.
fn most_reported(mut fences: Vec<u64>) -> u64 {
    fences.sort_unstable();
    fences
        .iter()
        .max_by_key(|f| fences.iter().filter(|g| g == f).count())
        .copied()
        .unwrap_or(0)
}

/// A read's answers, if a majority of the masters answered it: those that
/// did (see `reads` for what they add up to). Otherwise the first refusal
/// (a foreign key, a usage error), else why not.
pub(super) fn answered<T>(answers: Answers<T>, m: usize, what: &str) -> Result<Vec<T>> {
    let n = answers.len();
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for a in answers.into_iter().flatten() {
        match a {
            Ok(v) => ok.push(v),
            Err(e) => errors.push(e),
        }
    }
    if ok.len() >= m {
        return Ok(ok);
    }
    if let Some(i) = errors.iter().position(refusal) {
        return Err(errors.swap_remove(i));
    }
    Err(no_answer(what, ok.len(), n, m, errors.first()))
}

#[cfg(test)]
mod tests;
