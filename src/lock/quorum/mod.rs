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
//! - Who waits is shown all the same: a waiting acquire notes itself on
//!   every master after each busy attempt (one random waiter id per wait,
//!   a deadline a few seconds ahead; lua/redlock_wait.lua) and drops the
//!   note when it ends. No attempt reads the notes: they order nothing,
//!   and the reads show a waiter a majority lists (`tally::reads`).
//! - Too many masters silent for a majority to answer is an outage, not a
//!   busy lock: a waiting acquire rides it out as one Redis's is
//!   (`lock::wait::Outage`: backoff, until the deadline or for
//!   `OUTAGE_LIMIT`), if a majority has answered this process before, and
//!   its error then names each silent master and since when.
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
//! - Read-write locks, semaphores (`Request::limit` above 1),
//!   `Request::supersede` and a `Request::priority` other than 0 need one
//!   Redis (one queue, one counter) and are refused here.
//!
//! # Mutual exclusion
//!
//! **Guarantee.** Two acquires never both succeed with overlapping
//! validity windows, as long as the masters keep their data and their
//! clocks run at most [`crate::lock::drift`] faster than the client's.
//!
//! **Argument.** A master's lease starts when its script runs, after the
//! request was sent, and ends TTL later by its clock; the client relies on
//! the lock only until sent + TTL − drift by its own monotonic clock
//! (CLOCK_BOOTTIME), so until then every master that granted it still holds
//! the token. An acquire succeeds only with grants from a majority inside
//! that window, and any two majorities of the same N masters share one: a
//! master that holds one token refuses every other until the lease ends or
//! is released. A grant that arrives after its window closed is never used
//! (it is given back), and renewals extend the window only as far as a
//! majority confirmed it.
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
//!
//! # Layout
//!
//! One job per file:
//! - `masters`: the quorum, its masters, and the ticket queue that makes
//!   calls take their turns on each master in the order they were made;
//! - `fanout`: one call sent to every master at once, each on its own
//!   thread with a short timeout, answers collected until the outcome is
//!   decided;
//! - `identity`: twin detection (two URLs that reach one server);
//! - `tally`: the pure decisions over the masters' answers (majorities,
//!   fence agreement, what an attempt may have left to undo, what a
//!   release, renewal or check adds up to), unit-tested in `tally/tests.rs`,
//!   and in `tally/reads.rs` what the reads add up to: status, list,
//!   overview and history decided by majority;
//! - `acquire`: attempts, give-backs, re-entry and the acquire loop, with
//!   its waiter notes;
//! - `ops`: the operations of `lock::Backend`: what an acquire refuses,
//!   release, renew, check, break and the reads (status, list, overview,
//!   history), which ask every master and decide by majority.

mod acquire;
mod fanout;
mod identity;
mod masters;
mod ops;
mod tally;

pub(crate) use masters::Quorum;
