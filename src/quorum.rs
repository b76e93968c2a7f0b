//! RedLock over N independent Redis masters (seed article 003, after
//! antirez's algorithm), used when several `--url` are given.
//!
//! - Acquire sends the same acquire script, with one fresh token, to every
//!   master at once, each on its own thread with a short timeout, and
//!   succeeds only when a majority granted it, at one fence value (below),
//!   while the validity window (TTL − elapsed − drift, on CLOCK_BOOTTIME,
//!   saturating) is still open. The answer is taken as soon as the outcome
//!   is decided, so one frozen master does not slow anyone down.
//! - On failure it gives the grant back on every master that may have
//!   granted it, then retries after a random delay: there is no shared
//!   queue across masters, so waiting is polling here, with jitter against
//!   lockstep. Before returning a failure it waits a little (twice the
//!   attempt's time, plus 20 ms) for a master that had not answered yet
//!   to give its grant back, so that a master a little behind the others
//!   is not left holding it when the process exits.
//! - Calls take turns on each master in the order they were made (a ticket
//!   taken by the calling thread), so a release or give-back always runs
//!   after the grant it undoes, even when that grant's thread has not
//!   started yet.
//! - Renewal (exec's thread) must be confirmed by a majority; the lease is
//!   then valid until the latest instant a majority still holds it.
//! - A re-entry must reach a majority too; one that only a minority granted
//!   is undone (one hold given back where it was added) and fails.
//! - Two URLs that reach one server (127.0.0.1 and localhost, a DNS alias,
//!   a unix socket) would count one master twice: each master is asked for
//!   its `run_id` (INFO server) the first time it answers, and a second
//!   master with a known run_id is refused (a usage error). On the first
//!   call the outcome waits a moment for every master to say who it is;
//!   a master that answers only later is checked then.
//! - Read-write locks and `--limit` need one Redis and are refused here.
//!
//! # Fencing
//!
//! Each master keeps its own last value (`P{K}:fence`; see grant() in
//! lua/acquire.lua). Every attempt carries a floor: the highest value this
//! process has seen on any master (granted or busy answers both report
//! it). A master that grants answers max(last + 1, floor + 1), or, when it
//! has no last value kept, max(its clock in ms, floor + 1); after a lock
//! sat unused the masters' clocks differ, and the floor makes them agree
//! on the second attempt. An
//! attempt succeeds only if a majority of masters granted it *with the same
//! value*, and that value is the fence. If the grants disagree (a master's
//! counter was ahead of the floor, say after failed attempts that only it
//! granted), the attempt is given back and made again at once with the
//! floor raised to the highest value seen, which the masters then agree on.
//!
//! **Guarantee.** If a grant G succeeded before a grant G' was asked for,
//! then fence(G') > fence(G), as long as the masters keep their counters
//! (persistence on, no restart from an empty data set). Successive holders
//! of a lock therefore see strictly increasing fences, whichever masters
//! granted each, and however far failed attempts pushed single counters.
//!
//! **Argument.** When G succeeded, the majority Q that agreed on
//! fence(G) had each just set its counter to fence(G). G' succeeds only
//! with an agreeing majority Q'. Any two majorities of the same N masters
//! intersect: let k be in both. G' ran on k after G did (G had already
//! succeeded when G' was sent), and k answered G' with more than fence(G):
//! last + 1 while it kept fence(G) or a later value, else its clock, which
//! has passed fence(G) before k lets that value expire. k is in Q', so that value is
//! fence(G'). The floor plays no part in this: it only makes the masters
//! agree at the first try, and a new process, which knows no floor, may
//! need one extra round trip.
//!
//! **Limits.** The argument needs k, a master where the two majorities
//! meet, to have kept its counter. "A majority keeps its data" is not
//! enough: with 3 masters, A and B grant fence 7, B restarts empty, and B
//! and C can then agree on 1, since two majorities may meet in one master
//! alone. No scheme that hears from a majority can do better: nothing but
//! the intersection carries news of the earlier grant. (A master restarted
//! empty should also stay away for a TTL, for the lock's own sake.)

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::clock::BootTime;
use crate::conn::Server;
use crate::lock::{Attempt, Held, LockName, Node, Waiting, valid_until};
use crate::{Busy, Cancel, Error, Lease, Mode, Released, Request, Result, Status, Token, Wait};

/// Longest wait for one master's answer (connect and reply each).
const NODE_TIMEOUT: Duration = Duration::from_millis(500);
/// Attempts in a row without a majority answering before a wait gives up.
const MAX_UNREACHABLE: u32 = 3;
/// Attempts in a row whose grants disagree on the fence (others moving the
/// counters meanwhile) before that counts as contention, like a busy lock.
const MAX_DISAGREE: u32 = 3;
/// Retry delays after a failed attempt: uniform in this range.
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_millis(250);
/// How long past twice the time the others took a straggler is waited for:
/// on first contact, a master that has not said who it is yet; before a
/// failed acquire returns, one that may have granted and has not given the
/// grant back yet. Enough for a master that is merely a little behind, and
/// little for one that is frozen.
const SLACK: Duration = Duration::from_millis(20);

type Answers<T> = Vec<Option<Result<T>>>;

/// What a call does about a master still busy with an earlier call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Turn {
    Skip,
    Queue,
}

/// One master, and the order in which calls take their turns on it.
struct Master {
    node: Mutex<Node>,
    turns: Mutex<Turns>,
    turn_done: Condvar,
}

/// Tickets handed out, and tickets served.
#[derive(Default)]
struct Turns {
    issued: u64,
    done: u64,
}

/// Serves the next ticket when dropped (also when the call panics).
struct TurnGuard<'a>(&'a Master);

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        let mut t = self.0.turns.lock().unwrap_or_else(|e| e.into_inner());
        t.done += 1;
        self.0.turn_done.notify_all();
    }
}

impl Master {
    fn new(node: Node) -> Master {
        Master {
            node: Mutex::new(node),
            turns: Mutex::new(Turns::default()),
            turn_done: Condvar::new(),
        }
    }

    /// A place in line, taken by the calling thread, so that calls run on
    /// this master in the order they were made, whenever their threads get
    /// to run. `None` under [`Turn::Skip`] if an earlier call is still
    /// under way or waiting.
    fn take_turn(&self, turn: Turn) -> Option<u64> {
        let mut t = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        if turn == Turn::Skip && t.issued != t.done {
            return None;
        }
        t.issued += 1;
        Some(t.issued - 1)
    }

    /// Wait until every earlier ticket has been served.
    fn wait_turn(&self, ticket: u64) -> TurnGuard<'_> {
        let mut t = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        while t.done != ticket {
            t = self.turn_done.wait(t).unwrap_or_else(|e| e.into_inner());
        }
        TurnGuard(self)
    }
}

/// Which server a master is.
#[derive(Clone, PartialEq, Eq)]
enum Id {
    /// Not asked yet, or it did not answer.
    Unknown,
    Known(String),
    /// It does not say (INFO refused by an ACL).
    Unknowable,
}

/// What a quorum and its detached copies learn as they go.
struct Shared {
    ids: Vec<Id>,
    /// Set once two URLs turned out to reach one server: every call fails.
    twins: Option<String>,
    /// Whether any call has talked to the masters yet.
    contacted: bool,
    /// The highest fencing counter any master has shown.
    floor: u64,
}

fn state(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn lock(node: &Mutex<Node>) -> MutexGuard<'_, Node> {
    node.lock().unwrap_or_else(|e| e.into_inner())
}

/// Too few masters answered usefully; `said` is the first error one of
/// them gave, if any (a master that answered with an error, e.g. too few
/// replicas for --min-replicas, did answer).
fn no_answer(what: &str, ok: usize, total: usize, need: usize, said: Option<&Error>) -> Error {
    let said = said.map_or(String::new(), |e| format!(" (one said: {e})"));
    Error::Unavailable {
        context: format!(
            "{what}: {ok} of {total} Redis masters answered as needed, RedLock needs \
             {need}{said}"
        ),
        cause: redis::RedisError::from((redis::ErrorKind::Io, "no majority")),
    }
}

fn still_busy() -> Error {
    Error::Unavailable {
        context: "Redis master still busy with an earlier request".into(),
        cause: redis::RedisError::from((redis::ErrorKind::Io, "no answer yet")),
    }
}

/// Learn which server master `i` is (once), and refuse it if another
/// master of the quorum is the same server. An unreachable master stays
/// unknown and is asked again next time.
fn identify(shared: &Mutex<Shared>, urls: &[String], i: usize, node: &mut Node) -> Result<()> {
    if state(shared).ids[i] != Id::Unknown {
        return Ok(());
    }
    let id = node.run_id()?;
    let mut s = state(shared);
    let Some(id) = id else {
        s.ids[i] = Id::Unknowable;
        return Ok(());
    };
    let known = Id::Known(id);
    let twin = s.ids.iter().position(|x| *x == known);
    s.ids[i] = known;
    let Some(j) = twin else {
        return Ok(());
    };
    let (a, b) = (i.min(j), i.max(j));
    let msg = format!(
        "{} and {} reach the same Redis server (same run_id); RedLock needs independent \
         masters: give each once",
        urls[a], urls[b]
    );
    s.twins.get_or_insert_with(|| msg.clone());
    Err(Error::Usage(msg))
}

/// The fence value a majority of the grants agree on, if any.
fn agreed(answers: &Answers<Attempt>, m: usize) -> Option<u64> {
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

fn count<T>(answers: &Answers<T>, p: impl Fn(&Result<T>) -> bool) -> usize {
    answers.iter().flatten().filter(|a| p(a)).count()
}

fn is_grant(a: &Result<Attempt>) -> bool {
    matches!(a, Ok(Attempt::Granted { .. }))
}

/// Masters where an attempt may have left a hold: it granted, or its
/// answer is unknown (none in time, or a connection error that may have
/// come after the script ran). A busy or refusing answer left nothing, and
/// a skipped master was not asked.
fn undo_targets(answers: &Answers<Attempt>, ran: &[bool]) -> Vec<bool> {
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

/// How long a failed acquire waits for a master that had not answered its
/// attempt (sent at `sent`) to take the grant back: twice what the attempt
/// has taken so far, plus [`SLACK`].
fn patience(sent: BootTime) -> Duration {
    sent.elapsed() * 2 + SLACK
}

/// What an acquire does after a failed attempt.
enum Next {
    Retry(Duration),
    Fail(Error),
}

pub(crate) struct Quorum {
    masters: Vec<Arc<Master>>,
    /// The same servers, to make new nodes without touching busy ones.
    servers: Vec<Server>,
    /// Their URLs, redacted, for messages.
    urls: Arc<Vec<String>>,
    prefix: String,
    /// Per-master timeout (kept here: asking a node would wait for its lock).
    timeout: Duration,
    shared: Arc<Mutex<Shared>>,
}

impl Quorum {
    pub(crate) fn new(servers: Vec<Server>, prefix: &str) -> Quorum {
        let timeout = servers
            .iter()
            .map(|s| s.timeout)
            .min()
            .unwrap_or(NODE_TIMEOUT);
        let shared = Arc::new(Mutex::new(Shared {
            ids: vec![Id::Unknown; servers.len()],
            twins: None,
            contacted: false,
            floor: 0,
        }));
        Quorum::with_timeout(servers, prefix, timeout, shared)
    }

    fn with_timeout(
        servers: Vec<Server>,
        prefix: &str,
        timeout: Duration,
        shared: Arc<Mutex<Shared>>,
    ) -> Quorum {
        let timeout = timeout.min(NODE_TIMEOUT);
        let masters = servers
            .iter()
            .map(|s| {
                let mut n = Node::new(s.clone(), prefix).without_resends();
                n.set_timeout(timeout);
                Arc::new(Master::new(n))
            })
            .collect();
        Quorum {
            masters,
            urls: Arc::new(servers.iter().map(|s| s.url.clone()).collect()),
            servers,
            prefix: prefix.to_string(),
            timeout,
            shared,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.masters.len()
    }

    fn majority(&self) -> usize {
        self.masters.len() / 2 + 1
    }

    /// Another quorum over the same masters, with connections of its own;
    /// what one learns about the masters (who they are, the fence floor),
    /// the other knows too.
    pub(crate) fn detached(&self) -> Quorum {
        Quorum::with_timeout(
            self.servers.clone(),
            &self.prefix,
            self.timeout,
            Arc::clone(&self.shared),
        )
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Only for a quorum no call has used yet (it waits for each node).
    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.min(NODE_TIMEOUT);
        for m in &self.masters {
            lock(&m.node).set_timeout(self.timeout);
        }
    }

    pub(crate) fn name(&self, key: &str) -> Result<LockName> {
        LockName::new(&self.prefix, key)
    }

    /// Fails once two URLs turned out to reach one server.
    fn check_twins(&self) -> Result<()> {
        match &state(&self.shared).twins {
            Some(msg) => Err(Error::Usage(msg.clone())),
            None => Ok(()),
        }
    }

    fn all(&self) -> Vec<bool> {
        vec![true; self.len()]
    }

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
    fn on<T, F>(
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

    fn on_all<T, F>(
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

    /// One attempt on every master: a fresh grant (decided when a majority
    /// agrees on a fence, or can no longer), or with `reenter_only` a
    /// re-entry (decided when a majority re-entered, or every master has
    /// answered).
    /// Every counter a master shows raises the floor for later attempts.
    fn attempt_all(
        &self,
        lock: &LockName,
        token: &Token,
        req: &Request,
        reenter_only: bool,
    ) -> (Answers<Attempt>, Vec<bool>) {
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
                let a = node.attempt(&l, &t, &r, false, reenter_only, floor, None, false);
                if let Ok(Attempt::Granted { fence, .. } | Attempt::Busy(_, fence, _)) = &a {
                    let mut s = state(&shared);
                    s.floor = s.floor.max(*fence);
                }
                a
            },
            move |a, _| {
                let unknown = a.iter().filter(|x| x.is_none()).count();
                if reenter_only {
                    // A failed re-entry waits for every answer: each hold
                    // it added must be known, to be given back.
                    return count(a, is_grant) >= m;
                }
                // The most grants at one fence value.
                let best = a
                    .iter()
                    .filter_map(|x| match x {
                        Some(Ok(Attempt::Granted { fence, .. })) => Some(*fence),
                        _ => None,
                    })
                    .map(|f| {
                        count(
                            a,
                            |y| matches!(y, Ok(Attempt::Granted { fence, .. }) if *fence == f),
                        )
                    })
                    .max()
                    .unwrap_or(0);
                best >= m || best + unknown < m
            },
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
        answers: &Answers<Attempt>,
        targets: &[bool],
        last: Option<Duration>,
    ) {
        if !targets.contains(&true) {
            return;
        }
        let granted: Vec<bool> = answers
            .iter()
            .map(|a| matches!(a, Some(Ok(Attempt::Granted { .. }))))
            .collect();
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

    /// A lease if a majority granted `token` and the validity window is
    /// open; for a fresh grant (not a re-entry), only if a majority agrees
    /// on the fence.
    fn granted(
        &self,
        answers: &Answers<Attempt>,
        key: &str,
        token: &Token,
        req: &Request,
        sent: BootTime,
        reentry: bool,
    ) -> Option<Lease> {
        let grants: Vec<(u64, u64)> = answers
            .iter()
            .filter_map(|a| match a {
                Some(Ok(Attempt::Granted { fence, count })) => Some((*fence, *count)),
                _ => None,
            })
            .collect();
        let valid_until = valid_until(sent, req.ttl);
        if grants.len() < self.majority() || valid_until.passed() {
            return None;
        }
        let fence = match agreed(answers, self.majority()) {
            Some(f) => f,
            // A re-entry keeps the fence of its grant, which the masters
            // that granted it agree on; one that re-entered later on a
            // master that had granted apart may show another.
            None if reentry => grants.iter().map(|g| g.0).max().unwrap_or(0),
            None => return None,
        };
        Some(Lease {
            key: key.to_string(),
            token: token.clone(),
            fence,
            count: grants.iter().map(|g| g.1).max().unwrap_or(1),
            ttl: req.ttl,
            valid_until,
        })
    }

    /// Re-enter `key` with `token`. `Ok(None)` if a majority says the token
    /// holds nothing: the caller then acquires afresh. A re-entry that too
    /// few masters granted (or granted too late) is undone -- one hold given
    /// back on each master that added one, so the enclosing holder's count
    /// is as it was -- and fails. (A master that did not answer may have
    /// added a hold too; the outermost holder's release of every hold
    /// clears it.)
    fn reenter(
        &self,
        lock: &LockName,
        key: &str,
        token: &Token,
        req: &Request,
    ) -> Result<Option<Lease>> {
        let sent = BootTime::now();
        let (answers, _) = self.attempt_all(lock, token, req, true);
        let twins = self.check_twins();
        if twins.is_ok()
            && let Some(lease) = self.granted(&answers, key, token, req, sent, true)
        {
            return Ok(Some(lease));
        }
        let reentered: Vec<bool> = answers
            .iter()
            .map(|a| matches!(a, Some(Ok(Attempt::Granted { .. }))))
            .collect();
        let got = reentered.iter().filter(|r| **r).count();
        if got > 0 {
            let (k, t) = (key.to_string(), token.clone());
            self.on(
                &reentered,
                Turn::Queue,
                self.timeout,
                move |node| node.release(&k, &t, false, None),
                |_, late| late,
            );
        }
        twins?;
        let (n, m) = (self.len(), self.majority());
        if count(&answers, |a| matches!(a, Ok(Attempt::NotHeld))) >= m {
            return Ok(None);
        }
        let foreign = answers
            .iter()
            .position(|a| matches!(a, Some(Err(e)) if !matches!(e, Error::Unavailable { .. })));
        if let Some(Some(Err(e))) = foreign.and_then(|i| answers.into_iter().nth(i)) {
            return Err(e);
        }
        let why = if got >= m {
            "the re-entry arrived after its lease's validity deadline".to_string()
        } else {
            format!("{got} of {n} Redis masters re-entered, RedLock needs {m}")
        };
        Err(Error::Unavailable {
            context: format!("re-enter {key:?}: {why}; given back"),
            cause: redis::RedisError::from((redis::ErrorKind::Io, "re-entry not confirmed")),
        })
    }

    pub(crate) fn acquire(
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
        let mut w = Waiting::new(key, req.wait, cancel);
        if let Some(token) = &req.reenter
            && let Some(lease) = self.reenter(&lock, key, token, req)?
        {
            return Ok(lease);
        }
        let m = self.majority();
        let mut unreachable = 0;
        let mut disagreed = 0;
        loop {
            if w.cancelled() {
                return Err(w.interrupted());
            }
            let token = Token::generate();
            let sent = BootTime::now();
            let (mut answers, ran) = self.attempt_all(&lock, &token, req, false);
            let undo = undo_targets(&answers, &ran);
            let twins = self.check_twins();
            if twins.is_ok()
                && let Some(lease) = self.granted(&answers, key, &token, req, sent, false)
            {
                if w.cancelled() {
                    self.abandon_all(&lock, &token, &answers, &undo, Some(patience(sent)));
                    return Err(w.interrupted());
                }
                return Ok(lease);
            }
            if let Err(e) = twins {
                self.abandon_all(&lock, &token, &answers, &undo, Some(patience(sent)));
                return Err(e);
            }
            // Granted, but not at one fence: some master's counter was
            // ahead of the floor, which now covers it. Give it back and try
            // again at once; the masters agree this time unless others are
            // moving the counters meanwhile (contention, as good as busy).
            if count(&answers, is_grant) >= m && agreed(&answers, m).is_none() {
                disagreed += 1;
                if disagreed < MAX_DISAGREE {
                    self.abandon_all(&lock, &token, &answers, &undo, None);
                    continue;
                }
            } else {
                disagreed = 0;
            }
            // A refusal that is not about reachability (a foreign key, a
            // kind mismatch) is the real answer. Otherwise: if any master
            // said busy, it is busy; if none did, too few were reachable.
            let foreign = answers
                .iter()
                .position(|a| matches!(a, Some(Err(e)) if !matches!(e, Error::Unavailable { .. })));
            let busy = answers.iter().find_map(|a| match a {
                Some(Ok(Attempt::Busy(b, ..))) => Some(b.clone()),
                _ => None,
            });
            let next = if let Some(i) = foreign {
                Next::Fail(match answers[i].take() {
                    Some(Err(e)) => e,
                    _ => Error::Protocol("RedLock: lost an answer".into()),
                })
            } else if busy.is_some() || disagreed >= MAX_DISAGREE {
                disagreed = 0;
                unreachable = 0;
                match w.busy(busy.as_ref(), on_wait) {
                    Err(e) => Next::Fail(e),
                    Ok(()) => {
                        let spread =
                            u64::try_from((RETRY_MAX - RETRY_MIN).as_micros()).unwrap_or(u64::MAX);
                        let jitter = uuid::Uuid::new_v4().as_u64_pair().1 % spread.max(1);
                        let delay = RETRY_MIN + Duration::from_micros(jitter);
                        Next::Retry(w.left().map_or(delay, |left| delay.min(left)))
                    }
                }
            } else {
                // Too few masters answered in time. A caller willing to wait
                // gets a few more tries (a loaded machine, a restart); -n
                // gets the answer at once.
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
            let last = matches!(next, Next::Fail(_)).then(|| patience(sent));
            self.abandon_all(&lock, &token, &answers, &undo, last);
            let delay = match next {
                Next::Fail(e) => return Err(e),
                Next::Retry(d) => d,
            };
            let until = Instant::now() + delay;
            while Instant::now() < until && !w.cancelled() {
                std::thread::sleep(
                    until
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(10)),
                );
            }
        }
    }

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
