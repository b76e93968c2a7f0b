//! The hold core: what to do about a held lock and the processes that act
//! for its holder, decided by a pure function of (state, event, now).
//!
//! [`decide()`] takes one [`Event`] (a report of the guard, a signal for
//! rlock, a renewal's result, or the clock's [`Event::Tick`]) at a time
//! `now`, updates the [`State`] and returns the [`Action`]s to take, in
//! order; [`wake_at`] says when the next tick is due. Nothing here reads a
//! clock, sends a signal or talks to Redis: a driver does, and executes the
//! actions in the order given. There are two drivers: `rlock exec`'s
//! supervisor (`exec/supervisor.rs`), and the keeper of `acquire --keep`
//! (`keep/keeper.rs`), whose "tree" is the watched process and its cover
//! and which adds a stop signal, a release announced on its socket, and
//! once it is done [`State::end`]: release, give back a broken hold, or
//! leave the lock to its lease ([`Holder`] names what differs).
//!
//! Renewing is one step for every holder: [`Renewals`] (`renew.rs`) keeps
//! the schedule and runs a round over a hold's leases; its [`Round`]
//! becomes the core's [`Event::Renewed`] or [`Event::Lost`]. exec's
//! renewer thread, the keeper and a lock set waiting for its next lock
//! (`lock/set.rs`) run it.
//! The dead-man guard both drivers fork is [`guard`]: one process design
//! with decisions of its own (`guard/decide.rs`), and a reach each driver
//! gives it (exec's tree, keep's cover).
//! The safety argument these decisions serve is `exec/mod.rs`'s module
//! doc; docs/internals.md ("The hold core") lists state, events and actions.
//!
//! The core uses the lock library and the process tools (signal lists),
//! never `exec` or `keep`: those drive it.

mod decide;
pub(crate) mod guard;
mod renew;
mod state;

use std::process::ExitStatus;
use std::time::Duration;

use crate::clock::BootTime;

pub(crate) use decide::{decide, wake_at};
pub(crate) use renew::{Held, Renewals, Round};
pub(crate) use state::{End, Holder, Policy, State};

/// What to do with the command when the lock is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnLost {
    /// SIGTERM to every process of the command, SIGKILL after the grace
    /// period (never later than the lease allows).
    Term,
    /// SIGKILL to every process of the command at once.
    Kill,
    /// Let the command, and what it started, run on; only report the loss.
    Ignore,
}

/// Why rlock sent SIGKILL to the command's tree (a loss's SIGKILL has no
/// cause: the loss's own report announced it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillCause {
    /// The tree outlived `--grace` after this signal was passed on to it.
    Grace(i32),
    /// This signal (INT or TERM) was passed on a second time: SIGKILL at
    /// once.
    Again(i32),
    /// `--kill-leftovers`: what the command left running outlived
    /// `--grace` after the SIGTERM it got when the command exited.
    Leftovers,
}

/// What happened, as the driver saw it.
#[derive(Debug)]
pub(crate) enum Event {
    /// The guard started the command.
    Started,
    /// The guard could not start the command (nothing runs; the guard
    /// exits).
    SpawnFailed(std::io::Error),
    /// The command exited with this status.
    Exited(ExitStatus),
    /// The command was stopped by a signal. Job control (stopping rlock's
    /// job, continuing the command) is the driver's; a stop asks for no
    /// decision of the core but the renewer's start, if it is due.
    Stopped,
    /// The guard's kill deadline passed and it SIGKILLed the tree (or, had
    /// it not started the command yet, did not start it).
    Enforced,
    /// No process of the command's tree is left; the guard has exited.
    /// (Keep: the watched process and its whole cover are gone.)
    Empty,
    /// The guard is gone without saying "empty" (someone killed it).
    GuardGone,
    /// A signal for rlock, to pass on.
    Signal(i32),
    /// A renewal was confirmed: the lease is valid until then.
    Renewed(BootTime),
    /// A renewal found the lock lost: why (gone, taken, broken by ...).
    Lost(String),
    /// Keep: the keeper was told to stop (SIGTERM, SIGINT, SIGHUP,
    /// SIGQUIT to it): stop the cover as on a loss, then release.
    Stop,
    /// Keep: a release was announced on the socket; renewals pause until
    /// its verdict or this time.
    Releasing(BootTime),
    /// Keep: the announced release's verdict: `given_back`, it gave back
    /// the last of the keeper's holds (the keeper ends quietly); else
    /// renewals resume.
    ReleaseEnded { given_back: bool },
    /// The clock: look at every deadline.
    Tick,
}

/// Something to tell the user (the driver turns it into its own event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// The lock was lost; what was done about it.
    Lost { why: String, action: String },
    /// A signal was passed on to the command.
    Forwarded(i32),
    /// SIGKILL was sent to the tree; `command`: the command itself still
    /// ran (else only what it left running did).
    Killed { cause: KillCause, command: bool },
    /// `--on-lost ignore`: no renewal confirmed for this long.
    Unconfirmed(Duration),
    /// `--max-hold` (this long) is over: SIGTERM sent to the tree.
    Overran(Duration),
}

/// What the driver must do, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Pass this signal on through the guard, which signals its tree.
    Forward(i32),
    /// SIGTERM (with SIGCONT) every process of the tree, by rlock's own
    /// walk: a stopped guard cannot hold it back.
    Terminate,
    /// SIGKILL every process of the tree, by the guard and by rlock's own
    /// walk (either suffices).
    Kill,
    /// Move the guard's kill deadline to this time.
    Deadline(BootTime),
    /// Start the renewer (it runs on a thread of its own from then on).
    StartRenewer,
    /// Stop the renewer: renew no more.
    StopRenewer,
    /// Tell the user.
    Report(Report),
    /// Supervision is over; the outcome is in the state.
    Finish,
}

/// Margin between the validity deadline and the guard's SIGKILL, for the
/// kernel to tear the processes down: TTL/20, at most 250 ms.
pub(crate) fn kill_margin(ttl: Duration) -> Duration {
    (ttl / 20).min(Duration::from_millis(250))
}

/// When the command's tree must be killed if the lease is valid until
/// `valid_until` and nothing confirms it further.
pub(crate) fn kill_point(valid_until: BootTime, ttl: Duration) -> BootTime {
    valid_until - kill_margin(ttl)
}
