//! The decisions: [`decide`] and [`wake_at`].
//!
//! `decide` takes the state by `&mut` and returns only the actions: the
//! driver keeps one [`State`] for the whole hold, which owns what an event
//! brought that cannot be copied (a spawn error), and reads the outcome
//! from it once [`Action::Finish`] comes. It is still a function of its
//! arguments alone: no clock, no I/O, no global.

use std::time::Duration;

use crate::clock::BootTime;
use crate::duration::human;

use super::state::{ABANDON_AFTER, Due, Holder, Renewer, State};
use super::{Action, Event, KillCause, OnLost, Report, kill_margin};

/// What to do about `event`, seen at `now`. The renewer is started first
/// if its first renewal is due (whatever the event).
pub(crate) fn decide(state: &mut State, event: Event, now: BootTime) -> Vec<Action> {
    let mut out = Vec::new();
    if let Renewer::Pending(due) = state.renewer
        && now >= due
    {
        start_renewer(state, &mut out);
    }
    match event {
        Event::Started => state.started = true,
        Event::Stopped => {}
        Event::Exited(st) => {
            state.status = Some(st);
            if state.lost.is_some() && state.policy.on_lost != OnLost::Ignore {
                // Nothing the command left behind may outlive a lost lock
                // either.
                out.push(Action::Kill);
            } else if state.policy.kill_leftovers {
                out.push(Action::Forward(libc::SIGTERM));
                let at = now + state.policy.grace;
                state.kill_at = earliest(state.kill_at, at, Some(KillCause::Leftovers));
            }
        }
        Event::SpawnFailed(e) => {
            state.spawn_failed = Some(e);
            finish(state, &mut out);
        }
        Event::Empty => {
            state.ended = Some(now);
            finish(state, &mut out);
        }
        Event::GuardGone => {
            state.guard_killed = true;
            finish(state, &mut out);
        }
        Event::Enforced => enforced(state, &mut out),
        Event::Signal(sig) => signal(state, sig, now, &mut out),
        Event::Renewed(valid) => {
            // A renewal that completes after a loss was declared revives
            // nothing.
            if state.lost.is_none() {
                state.valid_until = valid;
            }
        }
        Event::Lost(_) if state.releasing.is_some() && state.policy.holder == Holder::Keep => {
            // The release announced to the keeper took the lock: nothing
            // is lost, nothing is left to give back.
            state.given_back = true;
            finish(state, &mut out);
        }
        Event::Lost(why) => {
            if state.lost.is_none() {
                lose(state, why, now, &mut out);
            }
        }
        Event::Stop => stop(state, now, &mut out),
        Event::Releasing(until) => state.releasing = Some(until),
        Event::ReleaseEnded { given_back } => {
            state.releasing = None;
            // While the cover is being stopped, the hold ends once it is
            // gone (or left to the lease), with nothing left to give.
            state.given_back |= given_back;
            if given_back && !state.stopping && state.lost.is_none() {
                finish(state, &mut out);
            }
        }
        Event::Tick => tick(state, now, &mut out),
    }
    out
}

/// When the next [`Event::Tick`] is due, seen at `now`: the earliest of
/// the loss by no confirmation (TTL/3 before the validity deadline), the
/// SIGKILL due, the renewer's start, the end of `--max-hold`, (keep) the
/// end of a release's pause and of the wait after a SIGKILL; at most an
/// hour away.
pub(crate) fn wake_at(state: &State, now: BootTime) -> BootTime {
    let lead = state.lead();
    let mut wake = now + Duration::from_secs(3600);
    if state.lost.is_none() && !state.stalled && !state.stopping {
        wake = wake.min(state.valid_until - lead);
    } else if state.stalled {
        // --on-lost ignore past the lead: look again for a renewal.
        wake = wake.min(now + lead.min(Duration::from_secs(1)));
    }
    if let Some((k, _)) = state.kill_at {
        wake = wake.min(k);
    }
    if let Renewer::Pending(due) = state.renewer {
        wake = wake.min(due);
    }
    if let Some(at) = state
        .overrun_at
        .filter(|_| !state.overran && !state.stopping)
    {
        wake = wake.min(at);
    }
    if let Some(at) = state.releasing.filter(|&at| at > now) {
        wake = wake.min(at);
    }
    if let Some(at) = state.abandon_at.filter(|_| !state.abandoned) {
        wake = wake.min(at);
    }
    wake
}

/// Keep: why an unconfirmed lease counts as lost.
pub(crate) const KEEP_UNCONFIRMED: &str =
    "no renewal confirmed in time; the lease was about to end (Redis unreachable?)";

fn start_renewer(state: &mut State, out: &mut Vec<Action>) {
    if let Renewer::Pending(_) = state.renewer {
        state.renewer = Renewer::Started;
        out.push(Action::StartRenewer);
    }
}

fn stop_renewer(state: &mut State, out: &mut Vec<Action>) {
    if state.renewer != Renewer::Stopped {
        state.renewer = Renewer::Stopped;
        out.push(Action::StopRenewer);
    }
}

/// Report `r`. The renewer is started first if it has not been: the
/// report may block (a full stderr pipe), and renewals must go on
/// meanwhile. (A loss's report is pushed without: renewing has stopped.)
fn report(state: &mut State, r: Report, out: &mut Vec<Action>) {
    start_renewer(state, out);
    out.push(Action::Report(r));
}

fn finish(state: &mut State, out: &mut Vec<Action>) {
    stop_renewer(state, out);
    out.push(Action::Finish);
}

/// The guard's timer fired: it killed the tree (or never started it).
fn enforced(state: &mut State, out: &mut Vec<Action>) {
    if state.lost.is_some() {
        return;
    }
    // Before "started": the guard read the go only after the kill
    // deadline it had, and did not start the command.
    let (why, action) = if state.started {
        (
            format!(
                "no renewal was confirmed in time (rlock stalled?); the guard killed the \
                 command {} before the lease's end",
                human(kill_margin(state.ttl))
            ),
            "killed every process of the command",
        )
    } else {
        (
            "the guard process was stopped or starved past the kill deadline before it \
             could start the command"
                .to_string(),
            "the command was not started",
        )
    };
    out.push(Action::Report(Report::Lost {
        why: why.clone(),
        action: action.into(),
    }));
    state.lost = Some(why);
    stop_renewer(state, out);
}

/// A signal for rlock: passed on; a second INT or TERM escalates to
/// SIGKILL at once, else a signal that ends a wait gives the tree
/// `--grace` to exit.
fn signal(state: &mut State, sig: i32, now: BootTime, out: &mut Vec<Action>) {
    out.push(Action::Forward(sig));
    report(state, Report::Forwarded(sig), out);
    if matches!(sig, libc::SIGINT | libc::SIGTERM) {
        state.interrupts += 1;
    }
    if state.interrupts >= 2 {
        kill(state, Some(KillCause::Again(sig)), now, out);
        state.kill_at = None;
    } else if crate::signals::ENDS_WAIT.contains(&sig) {
        let at = now + state.policy.grace;
        state.kill_at = earliest(state.kill_at, at, Some(KillCause::Grace(sig)));
    }
}

/// The clock's turn: the loss by no confirmation, `--max-hold`, the
/// SIGKILL due.
fn tick(state: &mut State, now: BootTime, out: &mut Vec<Action>) {
    let keep = state.policy.holder == Holder::Keep;
    let lead = state.lead();
    let stale = now + lead >= state.valid_until;
    if state.policy.on_lost == OnLost::Ignore && !keep {
        // Nothing to enforce: keep renewing (Redis may come back while the
        // lease lives) and say so once.
        if stale && !state.stalled && state.lost.is_none() {
            state.stalled = true;
            report(state, Report::Unconfirmed(state.ttl - lead), out);
        }
        state.stalled &= stale;
    } else if state.lost.is_none() && !state.stopping && stale {
        // (Keep, stopping: renewing has ended and the cover is killed by
        // the kill point; that is no loss.)
        let why = if keep {
            KEEP_UNCONFIRMED.to_string()
        } else {
            format!("no renewal confirmed for {}", human(state.ttl - lead))
        };
        lose(state, why, now, out);
    }
    if state.overrun_at.is_some_and(|at| now >= at)
        && !state.overran
        && !state.stopping
        && state.lost.is_none()
    {
        state.overran = true;
        overrun(state, now, out);
    }
    if let Some((_, cause)) = state.kill_at.filter(|&(k, _)| now >= k) {
        kill(state, cause, now, out);
        state.kill_at = None;
    }
    if state.abandon_at.is_some_and(|at| now >= at) && !state.abandoned {
        // Keep: the cover outlived its SIGKILL (a process in
        // uninterruptible sleep, one out of reach): the lock is left to
        // its lease, which the guard's deadline still enforces.
        state.abandoned = true;
        finish(state, out);
    }
}

/// SIGKILL the tree; keep waits [`ABANDON_AFTER`] for it to go.
///
/// (Keep tells its guard too, so a keeper stopped meanwhile cannot hold
/// the SIGKILL back: the guard kills at its deadline.)
fn sigkill(state: &mut State, now: BootTime, out: &mut Vec<Action>) {
    if state.policy.holder == Holder::Keep {
        out.push(Action::Deadline(now));
    }
    out.push(Action::Kill);
    if state.policy.holder == Holder::Keep && state.abandon_at.is_none() {
        state.abandon_at = Some(now + ABANDON_AFTER);
    }
}

/// SIGKILL the tree, and say why (nothing for a loss's or an overrun's
/// SIGKILL: their lines said it would come).
fn kill(state: &mut State, cause: Option<KillCause>, now: BootTime, out: &mut Vec<Action>) {
    sigkill(state, now, out);
    if let Some(cause) = cause {
        let command = state.status.is_none();
        report(state, Report::Killed { cause, command }, out);
    }
}

/// `--max-hold` is over: SIGTERM to every process of the tree (the
/// command, or what it left running), SIGKILL after `--grace` (the guard
/// holds the kill deadline anyway). The lock is still held, and renewed,
/// until the tree is gone: released then, as after any command.
///
/// Keep: renewing ends and the cover is stopped by the lease's kill point,
/// whatever `--on-lost` says (see [`end_cover`]).
fn overrun(state: &mut State, now: BootTime, out: &mut Vec<Action>) {
    if state.policy.holder == Holder::Keep {
        state.stopping = true;
        end_cover(state, OnLost::Term, now, out);
        let max = state.policy.max_hold.unwrap_or_default();
        out.push(Action::Report(Report::Overran(max)));
        return;
    }
    out.push(Action::Terminate);
    let at = now + state.policy.grace;
    let max = state.policy.max_hold.unwrap_or_default();
    report(state, Report::Overran(max), out);
    state.kill_at = earliest(state.kill_at, at, None);
}

/// Keep: the keeper was told to stop. Releasing at once would let a rival
/// in while the script still works under the lock: the cover is stopped
/// first as on a loss ([`end_cover`]) and the lock released once it is
/// gone. Under `--on-lost ignore` the lock is released at once (the user
/// chose to let the script run on without it). A second stop, or one
/// after a loss, adds nothing.
fn stop(state: &mut State, now: BootTime, out: &mut Vec<Action>) {
    if state.policy.holder != Holder::Keep || state.stopping || state.lost.is_some() {
        return;
    }
    if state.policy.on_lost == OnLost::Ignore {
        finish(state, out);
        return;
    }
    state.stopping = true;
    end_cover(state, state.policy.on_lost, now, out);
}

/// Keep: renew no more, and stop the cover by the lease's kill point:
/// SIGTERM (with SIGCONT) and SIGKILL at the earlier of `--grace` and the
/// kill point, told to the guard too; SIGKILL at once under `kill` or with
/// no time left.
fn end_cover(state: &mut State, on_lost: OnLost, now: BootTime, out: &mut Vec<Action>) {
    stop_renewer(state, out);
    let kill_by = state.kill_by();
    if on_lost == OnLost::Term && kill_by - now >= Duration::from_millis(1) {
        let at = (now + state.policy.grace).min(kill_by);
        out.push(Action::Deadline(at));
        out.push(Action::Terminate);
        state.kill_at = earliest(state.kill_at, at, None);
    } else {
        sigkill(state, now, out);
        state.kill_at = None;
    }
}

/// Apply the lock-loss policy. The signals and the guard's deadline come
/// before the report, so a blocked stderr cannot delay them.
fn lose(state: &mut State, why: String, now: BootTime, out: &mut Vec<Action>) {
    stop_renewer(state, out);
    let kill_by = state.kill_by();
    let action = match state.policy.on_lost {
        OnLost::Term if kill_by - now >= Duration::from_millis(1) => {
            let at = (now + state.policy.grace).min(kill_by);
            // rlock stops the tree itself: the SIGTERM from its own walk,
            // the SIGKILL at `at` from the driver's tick, so a guard
            // stopped or starved cannot delay either past the lease. The
            // guard's deadline is the second line, for an rlock stopped
            // from here on. The SIGTERM goes one way only: a command's
            // TERM trap would run twice.
            out.push(Action::Deadline(at));
            out.push(Action::Terminate);
            state.kill_at = earliest(state.kill_at, at, None);
            format!(
                "sent SIGTERM to the command, SIGKILL in {} if it is still running",
                human(at - now)
            )
        }
        OnLost::Term => {
            // No time left for a grace period (rlock was stopped or
            // starved until the kill deadline).
            sigkill(state, now, out);
            state.kill_at = None;
            "killed the command: no time was left for a grace period".into()
        }
        OnLost::Kill => {
            sigkill(state, now, out);
            state.kill_at = None;
            "killed the command".into()
        }
        OnLost::Ignore => "the command runs on without the lock (--on-lost ignore)".into(),
    };
    out.push(Action::Report(Report::Lost {
        why: why.clone(),
        action,
    }));
    state.lost = Some(why);
    if state.policy.holder == Holder::Keep && state.policy.on_lost == OnLost::Ignore {
        // Keep: nothing is held any more and nothing is to be stopped.
        finish(state, out);
    }
}

/// The sooner of `due` and a SIGKILL at `at` for `cause`.
fn earliest(due: Due, at: BootTime, cause: Option<KillCause>) -> Due {
    match due {
        Some((k, _)) if k <= at => due,
        _ => Some((at, cause)),
    }
}

#[cfg(test)]
mod tests;
