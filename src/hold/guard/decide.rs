//! The guard's decisions: [`decide`] and [`wake_at`], a pure function of
//! (state, event, now) as the hold core's own `decide` is. The guard's
//! loop (`run.rs`) turns its descriptors into [`Event`]s and carries out
//! the [`Action`]s in the order given.

use std::time::Duration;

use crate::clock::BootTime;

/// What the guard does to its reach when the holder dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnDeath {
    /// SIGKILL at once.
    Kill,
    /// SIGTERM (with SIGCONT), SIGKILL after this grace (or at the kill
    /// deadline, if that comes first).
    Term(Duration),
}

/// What the guard does to its reach when the holder ends cleanly (says
/// so on the page, then closes its end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnFinish {
    /// exec: whatever is left of the tree is killed (rlock is done with it).
    Kill,
    /// keep: nothing (the keeper ended the hold itself: released, or
    /// everything covered was gone).
    Leave,
}

/// The holder as the guard knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HolderIs {
    Alive,
    /// Closed its end after saying it ended cleanly.
    Finished,
    /// Closed its end without (killed, crashed).
    Dead,
}

/// The guard's state for one hold.
#[derive(Clone, Debug)]
pub(crate) struct State {
    pub on_death: OnDeath,
    pub on_finish: OnFinish,
    /// exec: the guard starts the command on the holder's go, and reports
    /// the deadline's kill and the empty tree to the holder.
    pub starts: bool,
    pub holder: HolderIs,
    /// The kill deadline as last read (None: none).
    pub deadline: Option<BootTime>,
    /// The deadline whose SIGKILL was sent (a deadline is enforced once).
    pub enforced: Option<BootTime>,
    /// SIGKILL at this point: the grace after a SIGTERM on the holder's
    /// death.
    pub kill_at: Option<BootTime>,
    /// The holder sent how to give its holds back.
    pub release: bool,
    /// exec: the command was started.
    pub started: bool,
    /// exec: the empty tree was reported. The guard stays until the
    /// holder's end closes: should rlock die before it has released (its
    /// release follows the report), the guard gives the holds back.
    pub emptied: bool,
}

impl State {
    pub(crate) fn new(on_death: OnDeath, on_finish: OnFinish, starts: bool) -> State {
        State {
            on_death,
            on_finish,
            starts,
            holder: HolderIs::Alive,
            deadline: None,
            enforced: None,
            kill_at: None,
            release: false,
            started: false,
            emptied: false,
        }
    }
}

/// What the guard saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The kill deadline read from the page (on every wake-up).
    Deadline(Option<BootTime>),
    /// The holder sent how to give its holds back (`false`: none).
    Release(bool),
    /// exec: the holder's go to start the command.
    Go,
    /// The holder's end of the channel closed; `finished`: it had said it
    /// ended cleanly.
    Closed { finished: bool },
    /// Nothing of the reach is left (every zombie reaped).
    Empty,
    /// The timer fired, or the guard woke: look at every deadline.
    Tick,
}

/// What the guard does, in the order given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// exec: start the command.
    Start,
    /// SIGTERM, then SIGCONT, to every process of the reach.
    Terminate,
    /// SIGKILL every process of the reach until none is left.
    Kill,
    /// exec: tell the holder the deadline passed and the tree was killed
    /// (or not started).
    ReportEnforced,
    /// exec: tell the holder no process of the tree is left.
    ReportEmpty,
    /// exec: give the terminal back to the holder's job if the command's
    /// group has it.
    HandBackTerminal,
    /// Give the holder's holds back through the releaser (`release.rs`).
    Release,
    /// The guard's work is done.
    Exit,
}

/// What to do about `event`, seen at `now`.
pub(crate) fn decide(state: &mut State, event: Event, now: BootTime) -> Vec<Action> {
    let mut out = Vec::new();
    match event {
        Event::Deadline(at) => state.deadline = at,
        Event::Release(has) => state.release = has,
        Event::Go => go(state, now, &mut out),
        Event::Closed { finished } => closed(state, finished, now, &mut out),
        Event::Empty => empty(state, &mut out),
        Event::Tick => tick(state, now, &mut out),
    }
    out
}

/// When the guard must look next without an event: the kill deadline
/// (unless enforced already) or the end of the grace, whichever first.
pub(crate) fn wake_at(state: &State) -> Option<BootTime> {
    let deadline = state.deadline.filter(|&d| state.enforced != Some(d));
    match (deadline, state.kill_at) {
        (Some(d), Some(k)) => Some(d.min(k)),
        (d, k) => d.or(k),
    }
}

/// The go, read only now: if the kill deadline passed meanwhile (the
/// guard was stopped or starved since the holder sent it), the lease may
/// be over and the lock another's: the command never starts, and the
/// holder hears what it hears of a tree killed at the deadline.
fn go(state: &mut State, now: BootTime, out: &mut Vec<Action>) {
    if !state.starts || state.started || state.holder != HolderIs::Alive {
        return;
    }
    if state.deadline.is_some_and(|d| d <= now) {
        // Not started: the guard stays for the holder's close (see
        // `closed`), which releases, or has the guard release if it died.
        out.extend([Action::ReportEnforced, Action::ReportEmpty]);
        return;
    }
    state.started = true;
    out.push(Action::Start);
}

fn closed(state: &mut State, finished: bool, now: BootTime, out: &mut Vec<Action>) {
    if state.holder != HolderIs::Alive {
        return;
    }
    state.holder = if finished {
        HolderIs::Finished
    } else {
        HolderIs::Dead
    };
    if state.starts && state.started {
        // First, as the holder's shell is already on its way.
        out.push(Action::HandBackTerminal);
    }
    if state.starts && (!state.started || state.emptied) {
        // Nothing acts under the holds: the command never ran (only the
        // guard starts it, and only on the go), or its tree was gone and
        // said so. Not started, the holder gave up (busy, an error, a
        // timeout or signal ending its wait: it released what it had and
        // said "finished") or died before the go, holding what the
        // settings name (exec sends them once a first try found a lock
        // busy, and before the go: locks of a set, a grant, a place in a
        // queue). Emptied, it released after the report (then said
        // "finished") or died on the way. Finished, it never released
        // beside the guard; dead, its holds go back now rather than when
        // the lease ends.
        exit_releasing(state, !finished, out);
        return;
    }
    match (finished, state.on_finish, state.on_death) {
        (true, OnFinish::Leave, _) => out.push(Action::Exit),
        (true, OnFinish::Kill, _) | (false, _, OnDeath::Kill) => out.push(Action::Kill),
        (false, _, OnDeath::Term(grace)) => {
            out.push(Action::Terminate);
            state.kill_at = Some(now + grace);
        }
    }
}

fn empty(state: &mut State, out: &mut Vec<Action>) {
    match state.holder {
        // The holder decides while it lives; exec's hears of it, once,
        // and releases: the guard stays until its end closes (`closed`).
        HolderIs::Alive if state.starts && state.started => {
            if !state.emptied {
                state.emptied = true;
                out.push(Action::ReportEmpty);
            }
        }
        HolderIs::Alive => {}
        HolderIs::Finished => out.push(Action::Exit),
        // The holder died holding the lock, and nothing of the reach is
        // left to act under it: the holds go back now rather than when
        // the lease ends.
        HolderIs::Dead => exit_releasing(state, true, out),
    }
}

/// Exit, giving the holds back first if the holder is `dead` and sent
/// the settings to (the callers say why nothing acts under them).
fn exit_releasing(state: &State, dead: bool, out: &mut Vec<Action>) {
    if dead && state.release {
        out.push(Action::Release);
    }
    out.push(Action::Exit);
}

fn tick(state: &mut State, now: BootTime, out: &mut Vec<Action>) {
    if state.starts && (!state.started || state.emptied) {
        // Nothing runs yet (the go looks at the deadline), or nothing is
        // left to kill.
        return;
    }
    if let Some(d) = state.deadline.filter(|&d| d <= now)
        && state.enforced != Some(d)
    {
        // Nothing confirmed the lease since (the holder is stopped,
        // starved or dead): it is about to end, whatever else is due.
        state.enforced = Some(d);
        state.kill_at = None;
        out.push(Action::Kill);
        if state.starts && state.holder == HolderIs::Alive {
            out.push(Action::ReportEnforced);
        }
        return;
    }
    if state.kill_at.is_some_and(|k| k <= now) {
        state.kill_at = None;
        out.push(Action::Kill);
    }
}

#[cfg(test)]
mod tests;
