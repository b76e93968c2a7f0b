//! Fan-out: one call sent to the masters at once, each on its own thread
//! with a short timeout, its answers collected until the outcome is
//! decided, so that one frozen master slows nobody down.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::identity::{Id, identify};
use super::masters::{Quorum, Turn, lock, state};
use crate::lock::Node;
use crate::{Error, Result};

/// How long past twice the time the others took a straggler is waited for:
/// on first contact, a master that has not said who it is yet; before a
/// failed acquire returns, one that may have granted and has not given the
/// grant back yet. Enough for a master that is merely a little behind, and
/// little for one that is frozen.
pub(super) const SLACK: Duration = Duration::from_millis(20);

pub(super) type Answers<T> = Vec<Option<Result<T>>>;

fn still_busy() -> Error {
    Error::unavailable(
        "Redis master still busy with an earlier request",
        redis::RedisError::from((redis::ErrorKind::Io, "no answer yet")),
    )
}

impl Quorum {
    /// Run `f` on the masters in `targets` at once, each on its own thread,
    /// and collect answers until `decided` says the outcome is known, every
    /// target has answered, or the time a master may take has passed. A
    /// master still silent then counts as failed; its thread ends on its
    /// own, bounded by the same timeouts. `decided` is also told whether
    /// `patience` (at most the per-master timeout) has passed since the
    /// call began. Returns the answers, and which masters were asked.
    ///
    /// A master may still be busy with an earlier call (an attempt decided
    /// without it, or a frozen server). `Turn::Skip` counts it as failed at
    /// once, so renewals and attempts never pile up behind a frozen master;
    /// `Turn::Queue` waits for it (bounded by its timeouts), so a release or
    /// clean-up always comes after the grant it undoes. The place in line
    /// is taken here, on the calling thread, not by the spawned one: a
    /// thread may start late, after one spawned by a later call.
    pub(super) fn on<T, F>(
        &self,
        targets: &[bool],
        turn: Turn,
        patience: Duration,
        f: F,
        decided: impl Fn(&Answers<T>, bool) -> bool,
    ) -> (Answers<T>, Vec<bool>)
    where
        T: Send + 'static,
        F: Fn(&mut Node) -> Result<T> + Send + Sync + 'static,
    {
        let n = self.len();
        let f = Arc::new(f);
        let (tx, rx) = mpsc::channel();
        let mut out: Answers<T> = (0..n).map(|_| None).collect();
        let mut ran = vec![false; n];
        let (first_contact, unknown) = {
            let mut s = state(&self.shared);
            let first = !std::mem::replace(&mut s.contacted, true);
            let unknown: Vec<bool> = s.ids.iter().map(|id| *id == Id::Unknown).collect();
            (first, unknown)
        };
        let mut identifying = 0;
        for (i, master) in self.masters.iter().enumerate() {
            if !targets[i] {
                continue;
            }
            let Some(ticket) = master.take_turn(turn) else {
                out[i] = Some(Err(still_busy()));
                continue;
            };
            ran[i] = true;
            let ident = unknown[i];
            identifying += usize::from(ident);
            let (master, f, tx) = (Arc::clone(master), Arc::clone(&f), tx.clone());
            let (shared, urls) = (Arc::clone(&self.shared), Arc::clone(&self.urls));
            std::thread::spawn(move || {
                // The turn ends before the answer is sent: whoever acts on
                // the answer finds the master free.
                let answer = {
                    let _turn = master.wait_turn(ticket);
                    let mut node = lock(&master.node);
                    let mut refused = None;
                    if ident {
                        refused = identify(&shared, &urls, i, &mut node).err();
                        let _ = tx.send((i, None));
                    }
                    match refused {
                        Some(e) => Err(e),
                        None => f(&mut node),
                    }
                };
                let _ = tx.send((i, Some(answer)));
            });
        }
        drop(tx);
        // Connect and reply, each within the timeout; twice that when
        // queueing behind an earlier call.
        let start = Instant::now();
        let rounds = if turn == Turn::Queue { 4 } else { 2 };
        let deadline = start + self.timeout * rounds + Duration::from_millis(20);
        let late = start + patience.min(self.timeout);
        let mut first_known: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            if (0..n).all(|i| !ran[i] || out[i].is_some()) {
                break;
            }
            // Two URLs of one server answer at about the same time: on
            // first contact, give every master a moment to say who it is
            // before taking the outcome, so that a duplicate is refused
            // rather than counted twice. A frozen master costs that moment
            // only, and is checked whenever it first answers.
            let grace = first_known.map(|t| t + (t - start) + SLACK);
            let settled = !first_contact
                || identifying == 0
                || grace.is_some_and(|g| now >= g)
                || state(&self.shared).twins.is_some();
            if settled && decided(&out, now >= late) {
                break;
            }
            let mut wake = deadline;
            if now < late {
                wake = wake.min(late);
            }
            if let (false, Some(g)) = (settled, grace) {
                wake = wake.min(g);
            }
            match rx.recv_timeout(wake - now) {
                Ok((_, None)) => {
                    identifying -= 1;
                    first_known.get_or_insert_with(Instant::now);
                }
                Ok((i, Some(answer))) => out[i] = Some(answer),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        (out, ran)
    }

    pub(super) fn on_all<T, F>(
        &self,
        turn: Turn,
        f: F,
        decided: impl Fn(&Answers<T>, bool) -> bool,
    ) -> Answers<T>
    where
        T: Send + 'static,
        F: Fn(&mut Node) -> Result<T> + Send + Sync + 'static,
    {
        self.on(&self.all(), turn, self.timeout, f, decided).0
    }
}
