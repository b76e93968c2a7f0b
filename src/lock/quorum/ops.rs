//! The lock operations under RedLock (the contract is `lock::Backend`):
//! acquire refuses what needs one Redis, then re-enters or acquires afresh
//! (`acquire`); release, renew and check are confirmed by a majority;
//! the reads (status, list, overview, history, and break's reading of who
//! holds) ask every master and decide by majority (`tally::reads`).

use std::sync::Arc;
use std::time::Duration;

use super::masters::{NODE_TIMEOUT, Quorum, Turn, lock};
use super::tally::{self, confirm_decided, held_on_majority, released, valid_on_majority};
use crate::clock::BootTime;
use crate::error::Setting;
use crate::lock::{Backend, Break, Broken, Held, Holders, Node, Waiting, Watch};
use crate::lock::{Event, HistoryLimits, Loss, Release, Renewal};
use crate::{Error, Lease, Mode, Released, Request, Result, Status, Token, msg};

impl Backend for Quorum {
    fn detached(&self) -> Box<dyn Backend> {
        let mut copy = Quorum::with_timeout(
            self.servers.clone(),
            &self.prefix,
            self.timeout,
            Arc::clone(&self.shared),
        );
        copy.set_history(self.history);
        Box::new(copy)
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

    fn prefix(&self) -> &str {
        &self.prefix
    }

    fn acquire(&mut self, key: &str, req: &Request, watch: Watch<'_>) -> Result<Lease> {
        if req.mode != Mode::Exclusive || req.limit != 1 {
            return Err(Error::Invalid(msg![
                "read-write locks and semaphores (",
                Setting::Limit,
                " above 1) need one Redis: RedLock (several ",
                Setting::Urls,
                ") takes exclusive locks only"
            ]));
        }
        if req.supersede {
            // Each master keeps its own queue, and RedLock never queues on
            // them (it retries): there is no one queue in which a newer
            // waiter could replace an older one.
            return Err(Error::Invalid(msg![
                Setting::Supersede,
                " needs one Redis (or Sentinel, or Cluster): RedLock (several ",
                Setting::Urls,
                ") keeps no shared wait queue"
            ]));
        }
        if req.priority != 0 {
            // A priority orders a wait queue; RedLock waits by retrying
            // on every master, in no queue, so it could not mean anything.
            return Err(Error::Invalid(msg![
                Setting::Priority,
                " needs one Redis (or Sentinel, or Cluster): RedLock (several ",
                Setting::Urls,
                ") keeps no wait queue to order"
            ]));
        }
        self.check_twins()?;
        let lock = self.name(key)?;
        let w = Waiting::new(key, req.wait, watch.cancel);
        if let Some(token) = &req.reenter
            && let Some(lease) = self.reenter(&lock, key, token, req)?
        {
            return Ok(lease);
        }
        self.acquire_fresh(&lock, key, req, w, watch.on_wait)
    }

    fn release(&mut self, key: &str, token: &Token, how: &Release) -> Result<Released> {
        self.check_twins()?;
        // The per-master timeouts are short already: `within` changes
        // nothing here.
        let how = Release {
            within: None,
            ..*how
        };
        let (k, t) = (key.to_string(), token.clone());
        let m = self.majority();
        // Every master, each writing its own history.
        let answers = self.on_all(
            Turn::Queue,
            move |node| node.release(&k, &t, &how),
            move |a, late| late && a.iter().flatten().count() >= m,
        );
        self.check_twins()?;
        released(answers, m, key)
    }

    fn set_history(&mut self, limits: HistoryLimits) {
        self.history = limits;
        for m in &self.masters {
            lock(&m.node).set_history(limits);
        }
    }

    fn history(&mut self, key: &str, limit: usize) -> Result<Vec<Event>> {
        let k = key.to_string();
        // Twice as many from each: a master's own extra events (attempts
        // a minority granted and gave back) push older ones out of its
        // last `limit`, and those would then miss its record.
        let ask = limit.saturating_mul(2);
        let all = self.read_all(&format!("history {key:?}"), move |node| {
            node.history(&k, ask)
        })?;
        Ok(tally::history_on_majority(&all, self.majority(), limit))
    }

    fn record_lost(&mut self, key: &str, token: &Token, loss: &Loss) -> Result<()> {
        let (k, t, l) = (key.to_string(), token.clone(), loss.clone());
        // On every master: `history` shows the events a majority has.
        let answers = self.on_all(
            Turn::Skip,
            move |node| node.record_lost(&k, &t, &l),
            |_, late| late,
        );
        tally::answered(answers, 1, "record the loss").map(|_| ())
    }

    fn renew(&mut self, key: &str, token: &Token, renewal: &Renewal) -> Result<BootTime> {
        let (k, t, r) = (key.to_string(), token.clone(), *renewal);
        let valid = self.confirmed("renew", key, move |node| node.renew(&k, &t, &r))?;
        Ok(valid_on_majority(valid, self.majority()))
    }

    fn check(&mut self, key: &str, token: &Token) -> Result<Held> {
        let (k, t) = (key.to_string(), token.clone());
        let held = self.confirmed("check", key, move |node| node.check(&k, &t))?;
        Ok(held_on_majority(held, self.majority()))
    }

    /// On every master (a hold left on one would count towards a
    /// majority no more, but sits there until its TTL): the fences broken
    /// anywhere, and the waiters woken on the master that woke the most.
    fn break_lock(&mut self, key: &str, order: &Break) -> Result<Broken> {
        self.name(key)?;
        self.check_twins()?;
        // A grant's fence is each master's own: a majority agrees on it
        // (RLOCK_FENCE), but a master outside that majority may show
        // another (its counter ran ahead). So the fences named are first
        // turned into the holders they name, told apart by their tokens'
        // digests, among those a majority reports (as `status` shows them),
        // and each master breaks those holders' holds under its own fences.
        // Breaking by the fences themselves on every master would miss the
        // hold wherever its fence differs: the holder would keep its
        // majority, reported broken but renewing.
        // (`named`: the fences named that hold somewhere, reported as the
        // fences broken if any master broke a hold.)
        let (who, named) = match order.holders() {
            Holders::All => (None, Vec::new()),
            Holders::Fences(fences) => {
                let k = key.to_string();
                let statuses =
                    self.read_all(&format!("status {key:?}"), move |node| node.status(&k))?;
                let statuses: Vec<&Status> = statuses.iter().collect();
                let (who, named) = tally::named_holders(&statuses, fences, self.majority());
                (Some(who), named)
            }
        };
        let (k, o) = (key.to_string(), order.clone());
        let answers = self.on_all(
            Turn::Queue,
            move |node| match &who {
                None => node.break_lock(&k, &o.of(Holders::All)),
                Some(who) => {
                    let here = node.status(&k)?;
                    let fences = here
                        .holders
                        .iter()
                        .filter(|h| who.contains(&h.token_digest))
                        .map(|h| h.fence)
                        .collect();
                    node.break_lock(&k, &o.of(Holders::Fences(fences)))
                }
            },
            |_, late| late,
        );
        let n = answers.len();
        let mut out: Option<Broken> = None;
        let mut error = None;
        for a in answers.into_iter().flatten() {
            match a {
                Ok(b) => {
                    let o = out.get_or_insert_with(Broken::default);
                    for f in b.fences {
                        if !o.fences.contains(&f) {
                            o.fences.push(f);
                        }
                    }
                    o.woken = o.woken.max(b.woken);
                }
                Err(e) => error = error.or(Some(e)),
            }
        }
        if let Some(o) = out.as_mut()
            && !o.fences.is_empty()
            && !named.is_empty()
        {
            o.fences = named;
        }
        match (out, error) {
            (Some(o), _) => Ok(o),
            (None, Some(e)) => Err(e),
            (None, None) => Err(tally::no_answer(&format!("break {key:?}"), 0, n, 1, None)),
        }
    }

    fn status(&mut self, key: &str) -> Result<Status> {
        let k = key.to_string();
        let all = self.read_all(&format!("status {key:?}"), move |node| node.status(&k))?;
        let all: Vec<&Status> = all.iter().collect();
        Ok(tally::status_on_majority(key, &all, self.majority()))
    }

    fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        let p = pattern.to_string();
        let all = self.read_all("list", move |node| node.list(&p))?;
        Ok(tally::list_on_majority(&all, self.majority()))
    }

    fn overview(&mut self, pattern: &str) -> Result<Vec<crate::lock::LockView>> {
        let p = pattern.to_string();
        let all = self.read_all("overview", move |node| node.overview(&p))?;
        Ok(tally::overview_on_majority(&all, self.majority(), false))
    }

    fn known(&mut self, pattern: &str) -> Result<Vec<crate::lock::LockView>> {
        let p = pattern.to_string();
        let all = self.read_all("metrics", move |node| node.known(&p))?;
        Ok(tally::overview_on_majority(&all, self.majority(), true))
    }

    fn known_names(&mut self, pattern: &str) -> Result<Vec<String>> {
        let p = pattern.to_string();
        let all = self.read_all("list locks with history", move |node| node.known_names(&p))?;
        let mut names: Vec<String> = all.into_iter().flatten().collect();
        names.sort();
        names.dedup();
        Ok(names)
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
        let m = self.majority();
        let answers = self.on_all(Turn::Skip, f, move |a, _| confirm_decided(a, m));
        self.check_twins()?;
        tally::confirmed(&answers, m, what, key)
    }

    /// Run a read on every master, waiting for each to answer (or its
    /// timeout): the answers, if a majority answered, to decide by.
    fn read_all<T: Send + 'static>(
        &self,
        what: &str,
        f: impl Fn(&mut Node) -> Result<T> + Send + Sync + 'static,
    ) -> Result<Vec<T>> {
        self.check_twins()?;
        let answers = self.on_all(Turn::Skip, f, |_, late| late);
        self.check_twins()?;
        tally::answered(answers, self.majority(), what)
    }
}
