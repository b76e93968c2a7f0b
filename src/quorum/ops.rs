//! The operations on a held lock under RedLock: release, renew and check
//! (each confirmed by a majority), and status and list (the first master
//! that answers).

use std::time::Duration;

use super::fanout::Answers;
use super::masters::{Quorum, Turn};
use super::tally::{count, no_answer};
use crate::clock::BootTime;
use crate::lock::{Held, Node};
use crate::{Error, Released, Result, Status, Token};

impl Quorum {
    /// Release one hold of `token`, or with `all` every hold.
    pub(crate) fn release(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
    ) -> Result<Released> {
        self.check_twins()?;
        let (k, t) = (key.to_string(), token.clone());
        let m = self.majority();
        let tally = |a: &Answers<Released>| {
            (
                count(a, |x| {
                    matches!(x, Ok(Released::Released | Released::StillHeld(_)))
                }),
                count(a, |x| matches!(x, Ok(Released::NotHeld))),
                count(a, |x| matches!(x, Err(Error::NotOwner { .. }))),
            )
        };
        // Wait for every master (a grant left on one would sit there until
        // its TTL), but for a silent one (frozen, or still busy with an
        // earlier call) no longer than the per-master timeout once a
        // majority has answered.
        let answers = self.on_all(
            Turn::Queue,
            move |node| node.release(&k, &t, all, min_hold),
            move |a, late| late && a.iter().flatten().count() >= m,
        );
        self.check_twins()?;
        let (held, not_held, not_owner) = tally(&answers);
        // The lock was ours only if a majority still knew it.
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
        let error = answers.into_iter().flatten().find_map(Result::err);
        Err(error.unwrap_or_else(|| {
            no_answer(
                &format!("release {key:?}"),
                held + not_held + not_owner,
                self.len(),
                m,
                None,
            )
        }))
    }

    pub(crate) fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        let (k, t) = (key.to_string(), token.clone());
        let mut valid = self.confirmed("renew", key, move |node| node.renew(&k, &t, ttl))?;
        // The lease holds while a majority holds it: until the m-th latest end.
        valid.sort_by(|a, b| b.cmp(a));
        Ok(valid[self.majority() - 1])
    }

    /// Does `token` hold `key` on a majority? For as long as the m-th
    /// longest lease, at the fence most of them report.
    pub(crate) fn check(&mut self, key: &str, token: &Token) -> Result<Held> {
        let (k, t) = (key.to_string(), token.clone());
        let mut held = self.confirmed("check", key, move |node| node.check(&k, &t))?;
        held.sort_by_key(|h| std::cmp::Reverse(h.ttl));
        let ttl = held[self.majority() - 1].ttl;
        let mut fences: Vec<u64> = held.iter().map(|h| h.fence).collect();
        fences.sort_unstable();
        let fence = fences
            .iter()
            .max_by_key(|f| fences.iter().filter(|g| g == f).count())
            .copied()
            .unwrap_or(0);
        Ok(Held { ttl, fence })
    }

    /// Run `f` on every master until a majority said yes or can no longer:
    /// the yes answers, or why not (gone on a majority, taken by another,
    /// too few answers).
    fn confirmed<T: Copy + Send + 'static>(
        &self,
        what: &str,
        key: &str,
        f: impl Fn(&mut Node) -> Result<T> + Send + Sync + 'static,
    ) -> Result<Vec<T>> {
        self.check_twins()?;
        let (n, m) = (self.len(), self.majority());
        let answers = self.on_all(Turn::Skip, f, move |a, _| {
            let ok = count(a, Result::is_ok);
            let gone = count(a, |x| {
                matches!(x, Err(Error::Lost { .. } | Error::NotOwner { .. }))
            });
            ok >= m || gone > n - m
        });
        self.check_twins()?;
        let yes: Vec<T> = answers
            .iter()
            .filter_map(|a| a.as_ref()?.as_ref().ok().copied())
            .collect();
        if yes.len() >= m {
            return Ok(yes);
        }
        let lost = count(&answers, |a| matches!(a, Err(Error::Lost { .. })));
        let taken = count(&answers, |a| matches!(a, Err(Error::NotOwner { .. })));
        if lost + taken > n - m {
            return Err(if taken > lost {
                Error::NotOwner { key: key.into() }
            } else {
                Error::Lost {
                    key: key.into(),
                    why: "a majority of the Redis masters no longer hold it".into(),
                }
            });
        }
        let said = answers.iter().flatten().find_map(|a| a.as_ref().err());
        Err(no_answer(&format!("{what} {key:?}"), yes.len(), n, m, said))
    }

    /// The first answer any master gives.
    fn first<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Node) -> Result<T> + Send + Sync + 'static,
    ) -> Result<T> {
        self.check_twins()?;
        let answers = self.on_all(Turn::Skip, f, |a, _| {
            a.iter().any(|x| matches!(x, Some(Ok(_))))
        });
        self.check_twins()?;
        let mut error = None;
        for a in answers.into_iter().flatten() {
            match a {
                Ok(v) => return Ok(v),
                Err(e) => error = error.or(Some(e)),
            }
        }
        Err(error.unwrap_or_else(|| no_answer("status", 0, self.len(), 1, None)))
    }

    pub(crate) fn status(&mut self, key: &str) -> Result<Status> {
        let k = key.to_string();
        self.first(move |node| node.status(&k))
    }

    pub(crate) fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        let p = pattern.to_string();
        self.first(move |node| node.list(&p))
    }
}
