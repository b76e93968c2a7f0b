//! The lock operations under RedLock (the contract is `lock::Backend`):
//! acquire refuses what needs one Redis, then re-enters or acquires afresh
//! (`acquire`); release, renew and check are confirmed by a majority;
//! status and list take the first master that answers.

use std::sync::Arc;
use std::time::Duration;

use super::fanout::Answers;
use super::masters::{NODE_TIMEOUT, Quorum, Turn, lock};
use super::tally::{count, no_answer};
use crate::clock::BootTime;
use crate::lock::{Backend, Held, LockName, Node, Waiting};
use crate::{Busy, Cancel, Error, Lease, Mode, Released, Request, Result, Status, Token};

impl Backend for Quorum {
    fn is_single(&self) -> bool {
        false
    }

    fn answered(&self) -> bool {
        true
    }

    fn detached(&self) -> Box<dyn Backend> {
        Box::new(Quorum::with_timeout(
            self.servers.clone(),
            &self.prefix,
            self.timeout,
            Arc::clone(&self.shared),
        ))
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.min(NODE_TIMEOUT);
        for m in &self.masters {
            lock(&m.node).set_timeout(self.timeout);
        }
    }

    fn name(&self, key: &str) -> Result<LockName> {
        LockName::new(&self.prefix, key)
    }

    fn acquire(
        &mut self,
        key: &str,
        req: &Request,
        cancel: Option<&Cancel>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease> {
        if req.mode != Mode::Exclusive || req.limit != 1 {
            return Err(Error::Usage(
                "read-write locks and --limit need one Redis; with several --url (RedLock) \
                 only exclusive locks are supported"
                    .into(),
            ));
        }
        if req.supersede {
            // Each master keeps its own queue, and RedLock never queues on
            // them (it retries): there is no one queue in which a newer
            // waiter could replace an older one.
            return Err(Error::Usage(
                "--supersede needs one Redis (or Sentinel, or Cluster): RedLock (several \
                 --url) keeps no shared wait queue"
                    .into(),
            ));
        }
        self.check_twins()?;
        let lock = self.name(key)?;
        let w = Waiting::new(key, req.wait, cancel);
        if let Some(token) = &req.reenter
            && let Some(lease) = self.reenter(&lock, key, token, req)?
        {
            return Ok(lease);
        }
        self.acquire_fresh(&lock, key, req, w, on_wait)
    }

    /// Release one hold of `token`, or with `all` every hold.
    fn release(
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

    fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        let (k, t) = (key.to_string(), token.clone());
        let mut valid = self.confirmed("renew", key, move |node| node.renew(&k, &t, ttl))?;
        // The lease holds while a majority holds it: until the m-th latest end.
        valid.sort_by(|a, b| b.cmp(a));
        Ok(valid[self.majority() - 1])
    }

    /// Does `token` hold `key` on a majority? For as long as the m-th
    /// longest lease, at the fence most of them report.
    fn check(&mut self, key: &str, token: &Token) -> Result<Held> {
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

    fn status(&mut self, key: &str) -> Result<Status> {
        let k = key.to_string();
        self.first(move |node| node.status(&k))
    }

    fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        let p = pattern.to_string();
        self.first(move |node| node.list(&p))
    }
}

impl Quorum {
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
}
