//! What the hold core keeps between events.

use std::process::ExitStatus;
use std::time::Duration;

use crate::clock::BootTime;
use crate::lock::RenewalSchedule;

use super::{KillCause, OnLost, kill_point};

/// Which driver holds: the decisions that differ between the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// `rlock exec`: the command is rlock's child, run by its guard; the
    /// hold ends when the guard reports the tree empty.
    Exec,
    /// `acquire --keep`: the keeper watches a process it did not start
    /// and its cover. A loss ends keeping (under `--on-lost ignore` at
    /// once: nothing is held any more); a stop or `--max-hold` stops
    /// renewing and stops the cover by the lease's kill point; a cover
    /// still alive a second after its SIGKILL is left to the lease.
    Keep,
}

/// The holder's choices for the command (exec's `Spec` without the
/// command line).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    /// Who drives the core.
    pub holder: Holder,
    /// What to do to the tree if the lock is lost.
    pub on_lost: OnLost,
    /// How long after a SIGTERM (or a forwarded signal) before SIGKILL.
    pub grace: Duration,
    /// When the command exits, end what it left running.
    pub kill_leftovers: bool,
    /// `--max-hold`, for its report.
    pub max_hold: Option<Duration>,
}

/// A SIGKILL due at a time, and why: what to report when it is sent (None:
/// nothing, it is a loss's or an overrun's, whose own line announced it).
pub(crate) type Due = Option<(BootTime, Option<KillCause>)>;

/// Where the renewer thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewer {
    /// Not started; must be running by then (the first renewal).
    Pending(BootTime),
    Started,
    /// Told to stop (or never to start).
    Stopped,
}

/// The state of one hold, from the grant to the end of supervision.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) policy: Policy,
    /// The lease's TTL.
    pub(crate) ttl: Duration,
    /// The last confirmed validity deadline (on [`crate::clock`]).
    pub(crate) valid_until: BootTime,
    /// When `--max-hold` ends, if given.
    pub(crate) overrun_at: Option<BootTime>,
    pub(crate) renewer: Renewer,
    /// The SIGKILL due, if any, and its cause.
    pub(crate) kill_at: Due,
    /// INTs and TERMs passed on so far: the second escalates.
    pub(crate) interrupts: u32,
    /// `--on-lost ignore`: no renewal confirmed in time, reported.
    pub(crate) stalled: bool,
    /// The guard reported the command's start.
    pub(crate) started: bool,
    /// The command's exit status (None: not exited, or the guard vanished
    /// first).
    pub(crate) status: Option<ExitStatus>,
    /// Why the lock was lost, if it was.
    pub(crate) lost: Option<String>,
    /// The tree was stopped for running past `--max-hold`.
    pub(crate) overran: bool,
    /// When the guard's report that no process of the tree is left came.
    pub(crate) ended: Option<BootTime>,
    /// The guard could not start the command.
    pub(crate) spawn_failed: Option<std::io::Error>,
    /// The guard vanished without reporting an empty tree.
    pub(crate) guard_killed: bool,
    /// Keep: told to stop (a signal to the keeper), or `--max-hold` is
    /// over; the cover is being stopped and renewing has ended.
    pub(crate) stopping: bool,
    /// Keep: a release announced on the socket is running; renewals pause
    /// until its verdict or this time.
    pub(crate) releasing: Option<BootTime>,
    /// Keep: the script's own release gave back the last of the keeper's
    /// holds (or took the lock while one ran): nothing is left to give.
    pub(crate) given_back: bool,
    /// Keep: after a SIGKILL, when to stop waiting for the cover to go.
    pub(crate) abandon_at: Option<BootTime>,
    /// Keep: the cover outlived its SIGKILL by [`ABANDON_AFTER`]; the
    /// lock is left to its lease.
    pub(crate) abandoned: bool,
}

/// Keep: how long after a SIGKILL the keeper waits for the cover to go
/// before it leaves the lock to its lease.
pub(crate) const ABANDON_AFTER: Duration = Duration::from_secs(1);

/// What the driver does with the lock once [`super::Action::Finish`] came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Give back the holds it owns (everything it covers is gone, or
    /// `--on-lost ignore` chose to let it run without the lock).
    Release,
    /// A break is under way: the cover is gone, give the broken hold back
    /// so that the lock passes on now.
    GiveBackBroken,
    /// Give back nothing: the lock is lost, or the cover may still run;
    /// the lease ends with its TTL.
    LeaveToLease,
    /// Nothing to give: the script's own release took it.
    Given,
}

impl State {
    /// A hold granted until `valid_until` for `ttl`; `overrun_at`: when
    /// `--max-hold` ends. The renewer is due at the first renewal (TTL/3
    /// after the grant's request).
    pub(crate) fn new(
        policy: Policy,
        valid_until: BootTime,
        ttl: Duration,
        overrun_at: Option<BootTime>,
    ) -> State {
        State {
            policy,
            ttl,
            valid_until,
            overrun_at,
            renewer: Renewer::Pending(RenewalSchedule::new(valid_until, ttl).first),
            kill_at: None,
            interrupts: 0,
            stalled: false,
            started: false,
            status: None,
            lost: None,
            overran: false,
            ended: None,
            spawn_failed: None,
            guard_killed: false,
            stopping: false,
            releasing: None,
            given_back: false,
            abandon_at: None,
            abandoned: false,
        }
    }

    /// Keep: what to do with the lock once the hold is over. Released only
    /// when nothing it covers may still run (the driver saw the cover gone:
    /// [`super::Event::Empty`]) or `--on-lost ignore` let it run on; a
    /// broken hold is given back once its cover is gone.
    pub(crate) fn end(&self) -> End {
        if self.given_back {
            End::Given
        } else if let Some(why) = &self.lost {
            if self.ended.is_some() && why.starts_with(crate::lock::breaking::BROKEN_BY) {
                End::GiveBackBroken
            } else {
                End::LeaveToLease
            }
        } else if self.abandoned {
            End::LeaveToLease
        } else {
            End::Release
        }
    }

    /// Keep: renewals wait for a release announced on the socket.
    pub(crate) fn renewals_paused(&self, now: BootTime) -> bool {
        self.releasing.is_some_and(|until| now < until)
    }

    /// Without a confirmed renewal, the lock counts as lost this long
    /// before its validity deadline, leaving time to stop the command.
    pub(crate) fn lead(&self) -> Duration {
        self.ttl / 3
    }

    /// When the tree must be dead if nothing confirms the lease further.
    pub(crate) fn kill_by(&self) -> BootTime {
        kill_point(self.valid_until, self.ttl)
    }

    /// May a job stopped at the terminal be continued at `now`, the lease
    /// being confirmed until `confirmed` (read afresh after the stop)? Not
    /// past its kill point: nothing would kill it then. Under `--on-lost
    /// ignore` there is no kill deadline, so always.
    pub(crate) fn may_continue(&self, confirmed: BootTime, now: BootTime) -> bool {
        self.policy.on_lost == OnLost::Ignore || now < kill_point(confirmed, self.ttl)
    }
}
