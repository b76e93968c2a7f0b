//! The supervisor loop: the driver of the hold core (`crate::hold`) for
//! `rlock exec`. It turns the guard's reports, rlock's signals, the
//! renewer's results and the clock into the core's events, and carries out
//! the actions the core decides on: signals, the guard's kill deadline,
//! the renewer, the reports. It runs on rlock's main thread as one poll
//! over the guard's socket, the signalfd and the renewer's pipe: no thread
//! of its own, and none to read for it. What is not a decision stays here:
//! the terminal (job control, see tty.rs) and the command's pid.

use std::process::ExitStatus;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::Lease;
use crate::clock::BootTime;
use crate::hold::{self, Action, State};

use super::guard::{Guard, Report};
use super::renew::Renewer;
use super::{Event, Spec, tree, tty};

/// What the poll read.
enum Msg {
    Guard(Report),
    /// A signal for rlock, to pass on.
    Signal(i32),
    /// The renewer found the lock gone.
    Lost(String),
}

/// How the command ended.
pub(crate) struct Outcome {
    /// The command's pid and process group, once the guard reported it.
    pub pgid: Option<libc::pid_t>,
    /// The guard could not start the command (nothing ran).
    pub spawn_failed: Option<std::io::Error>,
    /// The command's exit status (None: the guard vanished first).
    pub status: Option<ExitStatus>,
    /// Why the lock was lost, if it was.
    pub lost: Option<String>,
    /// The guard vanished without reporting an empty tree (someone killed
    /// it): processes that left the command's group may still run.
    pub guard_killed: bool,
    /// When the guard's report that no process of the command's tree is
    /// left was read: the tree was gone by then (None: not seen).
    pub ended: Option<BootTime>,
    /// The tree was stopped for running past `--max-hold`.
    pub overran: bool,
}

pub(crate) struct Supervisor<'a, 's, 'e> {
    pub guard: &'a Guard,
    /// The command's pid, which is also its process group: None until the
    /// guard reports the start, which this loop waits for like any other
    /// report (see `Report::Started` below).
    pub pgid: Option<libc::pid_t>,
    pub lease: &'a Lease,
    pub spec: &'a Spec,
    pub interactive: bool,
    pub term: Option<&'a super::tty::Terminal>,
    pub valid_until: &'a Mutex<BootTime>,
    pub stop: &'a AtomicBool,
    pub signals: &'a crate::signals::Blocked,
    /// When `--max-hold` ends, if given.
    pub overrun_at: Option<BootTime>,
    /// Where the command's pid goes for the renewer to note (see
    /// `renew::Shared::cmd_pid`).
    pub cmd_pid: &'a AtomicI32,
    pub renewer: Renewer<'s, 'e>,
}

impl Supervisor<'_, '_, '_> {
    fn valid_until(&self) -> BootTime {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Supervise until no process of the command's tree is left. The
    /// renewer is stopped when this returns.
    pub(crate) fn run(mut self, on_event: &mut dyn FnMut(Event)) -> Outcome {
        let policy = hold::Policy {
            holder: hold::Holder::Exec,
            on_lost: self.spec.on_lost,
            grace: self.spec.grace,
            kill_leftovers: self.spec.kill_leftovers,
            max_hold: self.spec.max_hold,
        };
        let mut state = State::new(
            policy,
            self.lease.valid_until,
            self.lease.ttl,
            self.overrun_at,
        );
        self.supervise(&mut state, on_event);
        self.stop_renewing();
        Outcome {
            pgid: self.pgid,
            spawn_failed: state.spawn_failed,
            status: state.status,
            lost: state.lost,
            guard_killed: state.guard_killed,
            ended: state.ended,
            overran: state.overran,
        }
    }

    fn supervise(&mut self, state: &mut State, on_event: &mut dyn FnMut(Event)) {
        let mut msgs = Vec::new();
        loop {
            self.sync(state);
            // poll's timeout runs on CLOCK_MONOTONIC: after a suspend it
            // wakes late, which is why the guard holds the kill deadline too.
            self.wait(hold::wake_at(state, BootTime::now()), &mut msgs);
            // Then the clock's turn, every time (a stream of signals must
            // not hold a deadline back).
            msgs.push(None);
            for msg in std::mem::take(&mut msgs) {
                let event = match msg {
                    Some(Msg::Guard(Report::Stopped(sig))) => {
                        // The core first (the renewer may be due), then
                        // the terminal, which may stop rlock.
                        if self.step(state, hold::Event::Stopped, on_event) {
                            return;
                        }
                        self.job_stopped(sig, state);
                        continue;
                    }
                    Some(Msg::Guard(report)) => self.guard_report(report),
                    Some(Msg::Signal(sig)) => hold::Event::Signal(sig),
                    Some(Msg::Lost(why)) => hold::Event::Lost(why),
                    None => hold::Event::Tick,
                };
                if self.step(state, event, on_event) {
                    return;
                }
            }
        }
    }

    /// Feed the core the validity deadline the renewer last confirmed (the
    /// renewer moves the guard's deadline itself: a supervisor blocked on
    /// stderr must not hold that back).
    fn sync(&mut self, state: &mut State) {
        let valid = self.valid_until();
        if valid != state.valid_until {
            let now = BootTime::now();
            self.act(
                hold::decide(state, hold::Event::Renewed(valid), now),
                &mut |_| {},
            );
        }
    }

    /// Decide on `event` now and carry the actions out; true once
    /// supervision is over.
    fn step(
        &mut self,
        state: &mut State,
        event: hold::Event,
        on_event: &mut dyn FnMut(Event),
    ) -> bool {
        self.sync(state);
        let actions = hold::decide(state, event, BootTime::now());
        self.act(actions, on_event)
    }

    /// What the driver does with a guard's report before the core sees it
    /// (the terminal, the command's pid), and the core's event for it.
    fn guard_report(&mut self, report: Report) -> hold::Event {
        match report {
            Report::Started(pid) => {
                // Comes first of the guard's reports, when the guard gets
                // to send it; read here, not in a blocking wait, so a guard
                // stopped before it holds back no renewal, signal or
                // deadline of the core (else the lease could expire under
                // the running command: two holders).
                self.pgid = Some(pid);
                self.cmd_pid.store(pid, Ordering::SeqCst);
                if let Some(t) = self.term.filter(|_| self.interactive) {
                    t.give(pid);
                }
                hold::Event::Started
            }
            Report::Exited(st) => {
                if let Some((t, pgid)) = self.term.zip(self.pgid) {
                    // As a shell does once its job's processes exit: a
                    // leftover keeps running, but in the background. Left
                    // with the terminal, it would take Ctrl-C and Ctrl-Z
                    // instead of rlock: a leftover that ignores SIGINT
                    // (`cmd &` in a script) could not be interrupted, and
                    // one stopped by Ctrl-Z never continued, so rlock would
                    // hold the lock for ever.
                    t.take_back(pgid);
                }
                hold::Event::Exited(st)
            }
            // Job control: see `job_stopped`.
            Report::Stopped(_) => hold::Event::Stopped,
            Report::SpawnFailed(e) => hold::Event::SpawnFailed(e),
            Report::Empty => hold::Event::Empty,
            // Someone killed the guard. The kernel killed the command
            // (PR_SET_PDEATHSIG); the rest of its tree went to init and is
            // out of reach: no killpg by a group id whose leader may be
            // reaped and its number reused.
            Report::Gone => hold::Event::GuardGone,
            Report::Enforced => hold::Event::Enforced,
        }
    }

    /// The command was stopped by `sig`.
    fn job_stopped(&self, sig: i32, state: &State) {
        if !(self.interactive
            || (self.term.is_some()
                && matches!(sig, libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU)))
        {
            return;
        }
        // Job control, or a background command that touched the terminal:
        // stop rlock's job too (see tty.rs). Under `--on-lost ignore` the
        // guard has no kill deadline: nothing kills a job stopped past its
        // lease, so it is continued like any other (it was left stopped
        // for ever under a running rlock).
        let valid = || state.may_continue(self.valid_until(), BootTime::now());
        // (The guard reports the start before any stop.)
        let pgid = self.pgid.unwrap_or_default();
        if tty::suspend(self.term, pgid, sig, valid) {
            // Continue the job, through the guard (see kill_tree on why
            // not killpg).
            self.guard.signal(libc::SIGCONT);
        }
    }

    /// Carry out the core's actions, in order; true on [`Action::Finish`].
    fn act(&mut self, actions: Vec<Action>, on_event: &mut dyn FnMut(Event)) -> bool {
        for action in actions {
            match action {
                Action::Forward(sig) => self.guard.signal(sig),
                Action::Terminate => tree::signal_all(self.guard.pid(), libc::SIGTERM),
                Action::Kill => self.kill_tree(),
                Action::Deadline(at) => self.guard.deadline(Some(at)),
                Action::StartRenewer => self.renewer.start(),
                Action::StopRenewer => self.stop_renewing(),
                Action::Report(r) => report(r, on_event),
                Action::Finish => return true,
            }
        }
        false
    }

    /// Wait until something is ready or `wake`, and collect what is.
    fn wait(&mut self, wake: BootTime, msgs: &mut Vec<Option<Msg>>) {
        let left = wake.remaining();
        // Rounded up: waking a moment early would only spin.
        let ms = crate::duration::poll_ms(left);
        let mut fds = [
            crate::signals::pollin(self.guard.fd()),
            crate::signals::pollin(self.signals.fd()),
            crate::signals::pollin(self.renewer.fd()),
        ];
        // SAFETY: a valid array of pollfds.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) } <= 0 {
            return; // timeout, or EINTR (a stop and continue): look again
        }
        if fds[0].revents != 0 {
            msgs.push(Some(Msg::Guard(self.guard.recv())));
        }
        if fds[1].revents != 0 {
            while let Some(sig) = self.signals.take() {
                msgs.push(Some(Msg::Signal(sig)));
            }
        }
        if fds[2].revents != 0
            && let Some(why) = self.renewer.lost()
        {
            msgs.push(Some(Msg::Lost(why)));
        }
    }

    fn stop_renewing(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.renewer.unpark();
    }

    /// SIGKILL the whole tree, by the guard and from here: either of the
    /// two processes suffices (the guard may be stopped, rlock may be).
    /// Both walk the guard's descendants; neither uses killpg, since the
    /// command's group id is free for reuse once its leader is reaped and
    /// the group is empty (the guard reaps at once), and a killpg then
    /// could hit an unrelated job. The guard is not reaped before rlock is
    /// done, so its pid is a safe root for the walk.
    fn kill_tree(&self) {
        self.guard.signal(libc::SIGKILL);
        tree::signal_all(self.guard.pid(), libc::SIGKILL);
    }
}

/// The core's report as exec's [`Event`].
fn report(r: hold::Report, on_event: &mut dyn FnMut(Event)) {
    match r {
        hold::Report::Lost { why, action } => on_event(Event::Lost {
            why: &why,
            action: &action,
        }),
        hold::Report::Forwarded(sig) => on_event(Event::Forwarded(sig)),
        hold::Report::Killed { cause, command } => on_event(Event::Killed { cause, command }),
        hold::Report::Unconfirmed(d) => on_event(Event::Unconfirmed(d)),
        hold::Report::Overran(d) => on_event(Event::Overran(d)),
    }
}
