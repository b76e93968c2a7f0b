//! The decisions over the masters' answers: majorities, fence agreement,
//! and what an attempt may have left to undo. Pure: no Redis, no threads.

use super::fanout::Answers;
use crate::lock::Attempt;
use crate::{Error, Result};

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
    let said = said.map_or(String::new(), |e| format!(" (one said: {e})"));
    Error::Unavailable {
        context: format!(
            "{what}: {ok} of {total} Redis masters answered as needed, RedLock needs \
             {need}{said}"
        ),
        cause: redis::RedisError::from((redis::ErrorKind::Io, "no majority")),
    }
}

/// The fence value a majority of the grants agree on, if any.
pub(super) fn agreed(answers: &Answers<Attempt>, m: usize) -> Option<u64> {
    let fences: Vec<u64> = answers
        .iter()
        .filter_map(|a| match a {
            Some(Ok(Attempt::Granted { fence, .. })) => Some(*fence),
            _ => None,
        })
        .collect();
    fences
        .iter()
        .copied()
        .find(|f| fences.iter().filter(|g| *g == f).count() >= m)
}

pub(super) fn count<T>(answers: &Answers<T>, p: impl Fn(&Result<T>) -> bool) -> usize {
    answers.iter().flatten().filter(|a| p(a)).count()
}

pub(super) fn is_grant(a: &Result<Attempt>) -> bool {
    matches!(a, Ok(Attempt::Granted { .. }))
}

/// Masters where an attempt may have left a hold: it granted, or its
/// answer is unknown (none in time, or a connection error that may have
/// come after the script ran). A busy or refusing answer left nothing, and
/// a skipped master was not asked.
pub(super) fn undo_targets(answers: &Answers<Attempt>, ran: &[bool]) -> Vec<bool> {
    answers
        .iter()
        .zip(ran)
        .map(|(a, &ran)| {
            ran && match a {
                Some(Ok(Attempt::Busy(..) | Attempt::NotHeld)) => false,
                Some(Err(e)) => matches!(e, Error::Unavailable { .. }),
                Some(Ok(Attempt::Granted { .. })) | None => true,
            }
        })
        .collect()
}
