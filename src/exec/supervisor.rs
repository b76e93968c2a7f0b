//! The supervisor loop: the one place that decides what happens to the
//! command, from the guard's reports, rlock's signals, the renewer's
//! losses and the clock. It runs on rlock's main thread as one poll over
//! the guard's socket, the signalfd and the renewer's pipe: no thread of
//! its own, and none to read for it.

use std::process::ExitStatus;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use crate::Lease;
use crate::clock::BootTime;
use crate::duration::human;

use super::guard::{Guard, Report};
use super::renew::Renewer;
use super::{Event, KillCause, OnLost, Spec, tree, tty};

/// Events for the supervisor.
enum Msg {
    Guard(Report),
    /// A signal for rlock, to pass on.
    Signal(i32),
    /// The renewer found the lock gone.
    Lost(String),
}

/// A SIGKILL due at a time, and why: what to report when it is sent (None:
/// nothing, it is a loss's, which the loss's own line announced).
type Due = Option<(BootTime, Option<KillCause>)>;

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
    /// report (see `supervise`).
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
    /// `Renewal::cmd_pid`).
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
        let out = self.supervise(on_event);
        self.stop_renewing();
        out
    }

    fn supervise(&mut self, on_event: &mut dyn FnMut(Event)) -> Outcome {
        // Without a confirmed renewal, the lock counts as lost this long
        // before its validity deadline, leaving time to stop the command.
        let lead = self.lease.ttl / 3;
        let mut out = Outcome {
            pgid: None,
            spawn_failed: None,
            status: None,
            lost: None,
            guard_killed: false,
            ended: None,
            overran: false,
        };
        let mut kill_at: Due = None;
        let mut interrupts = 0;
        let mut stalled = false;
        let mut msgs = Vec::new();
        loop {
            let mut wake = BootTime::now() + Duration::from_secs(3600);
            if out.lost.is_none() && !stalled {
                wake = wake.min(self.valid_until() - lead);
            } else if stalled {
                wake = wake.min(BootTime::now() + lead.min(Duration::from_secs(1)));
            }
            if let Some((k, _)) = kill_at {
                wake = wake.min(k);
            }
            if let Some(due) = self.renewer.due() {
                wake = wake.min(due);
            }
            if let Some(at) = self.overrun_at.filter(|_| !out.overran) {
                wake = wake.min(at);
            }
            // poll's timeout runs on CLOCK_MONOTONIC: after a suspend it
            // wakes late, which is why the guard holds the kill deadline too.
            self.wait(wake, &mut msgs);
            if self.renewer.due().is_some_and(BootTime::passed) {
                self.renewer.start();
            }
            // Then the clock's turn, every time (a stream of signals must
            // not hold a deadline back).
            msgs.push(None);
            for msg in std::mem::take(&mut msgs) {
                match msg {
                    Some(Msg::Guard(Report::Exited(st))) => {
                        out.status = Some(st);
                        if let Some((t, pgid)) = self.term.zip(self.pgid) {
                            // As a shell does once its job's processes
                            // exit: a leftover keeps running, but in the
                            // background. Left with the terminal, it took
                            // Ctrl-C and Ctrl-Z instead of rlock: a
                            // leftover that ignores SIGINT (`cmd &` in a
                            // script) could not be interrupted, and one
                            // stopped by Ctrl-Z was never continued, so
                            // rlock held the lock for ever.
                            t.take_back(pgid);
                        }
                        if out.lost.is_some() && self.spec.on_lost != OnLost::Ignore {
                            // Nothing the command left behind may outlive a
                            // lost lock either.
                            self.kill_tree();
                        } else if self.spec.kill_leftovers {
                            self.guard.signal(libc::SIGTERM);
                            let at = BootTime::now() + self.spec.grace;
                            kill_at = earliest(kill_at, at, Some(KillCause::Leftovers));
                        }
                    }
                    Some(Msg::Guard(Report::Stopped(sig)))
                        if self.interactive
                            || (self.term.is_some()
                                && matches!(
                                    sig,
                                    libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                                )) =>
                    {
                        // Job control, or a background command that touched
                        // the terminal: stop rlock's job too (see tty.rs).
                        // Under `--on-lost ignore` the guard has no kill
                        // deadline: nothing kills a job stopped past its
                        // lease, so it is continued like any other (it was
                        // left stopped for ever under a running rlock).
                        let valid = || {
                            self.spec.on_lost == OnLost::Ignore || BootTime::now() < self.kill_by()
                        };
                        // (The guard reports the start before any stop.)
                        let pgid = self.pgid.unwrap_or_default();
                        if tty::suspend(self.term, pgid, sig, valid) {
                            // Continue the job, through the guard (see
                            // kill_tree on why not killpg).
                            self.guard.signal(libc::SIGCONT);
                        }
                    }
                    Some(Msg::Guard(Report::Started(pid))) => {
                        // Comes first of the guard's reports, but only when
                        // the guard gets to send it: one stopped (or
                        // starved) between the command's exec and this
                        // report held rlock in a blocking wait for it, with
                        // no renewal, no signal and no deadline looked at,
                        // while the command ran and the lease expired under
                        // it (two holders). Waited for here instead, every
                        // rule of this loop applies from the start.
                        self.pgid = Some(pid);
                        out.pgid = Some(pid);
                        self.cmd_pid.store(pid, Ordering::SeqCst);
                        if let Some(t) = self.term.filter(|_| self.interactive) {
                            t.give(pid);
                        }
                    }
                    Some(Msg::Guard(Report::Stopped(_))) => {}
                    Some(Msg::Guard(Report::SpawnFailed(e))) => {
                        // Nothing runs; the guard exits.
                        out.spawn_failed = Some(e);
                        return out;
                    }
                    Some(Msg::Guard(Report::Empty)) => {
                        out.ended = Some(BootTime::now());
                        return out;
                    }
                    Some(Msg::Guard(Report::Gone)) => {
                        // Someone killed the guard. The kernel killed the
                        // command (PR_SET_PDEATHSIG); the rest of its tree went
                        // to init and is out of reach: no killpg by a group id
                        // whose leader may be reaped and its number reused.
                        out.guard_killed = true;
                        return out;
                    }
                    Some(Msg::Guard(Report::Enforced)) => {
                        if out.lost.is_none() {
                            // Before "started": the guard read the go only
                            // after the kill deadline it had, and did not
                            // start the command (see guard/process.rs).
                            let (why, action) = if self.pgid.is_none() {
                                (
                                    "the guard process was stopped or starved past the kill \
                                     deadline before it could start the command"
                                        .to_string(),
                                    "the command was not started",
                                )
                            } else {
                                (
                                    format!(
                                        "no renewal was confirmed in time (rlock stalled?); the \
                                         guard killed the command {} before the lease's end",
                                        human(kill_margin(self.lease.ttl))
                                    ),
                                    "killed every process of the command",
                                )
                            };
                            on_event(Event::Lost { why: &why, action });
                            out.lost = Some(why);
                            self.stop_renewing();
                        }
                    }
                    Some(Msg::Signal(sig)) => {
                        self.guard.signal(sig);
                        self.report(on_event, Event::Forwarded(sig));
                        if matches!(sig, libc::SIGINT | libc::SIGTERM) {
                            interrupts += 1;
                        }
                        if interrupts >= 2 {
                            self.kill(on_event, Some(KillCause::Again(sig)), &out);
                            kill_at = None;
                        } else if crate::signals::ENDS_WAIT.contains(&sig) {
                            let at = BootTime::now() + self.spec.grace;
                            kill_at = earliest(kill_at, at, Some(KillCause::Grace(sig)));
                        }
                    }
                    Some(Msg::Lost(why)) => {
                        if out.lost.is_none() {
                            kill_at = self.lose(&why, kill_at, on_event);
                            out.lost = Some(why);
                        }
                    }
                    None => {
                        let now = BootTime::now();
                        let stale = now + lead >= self.valid_until();
                        if self.spec.on_lost == OnLost::Ignore {
                            // Nothing to enforce: keep renewing (Redis may come
                            // back while the lease lives) and say so once.
                            if stale && !stalled && out.lost.is_none() {
                                stalled = true;
                                self.report(on_event, Event::Unconfirmed(self.lease.ttl - lead));
                            }
                            stalled &= stale;
                        } else if out.lost.is_none() && stale {
                            let why = format!(
                                "no renewal confirmed for {}",
                                human(self.lease.ttl - lead)
                            );
                            kill_at = self.lose(&why, kill_at, on_event);
                            out.lost = Some(why);
                        }
                        if self.overrun_at.is_some_and(|at| now >= at)
                            && !out.overran
                            && out.lost.is_none()
                        {
                            out.overran = true;
                            kill_at = self.overrun(kill_at, on_event);
                        }
                        if let Some((_, cause)) = kill_at.filter(|&(k, _)| now >= k) {
                            self.kill(on_event, cause, &out);
                            kill_at = None;
                        }
                    }
                }
            }
        }
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

    /// Report `ev`. The renewer is started first if it has not been: the
    /// report may block (a full stderr pipe), and renewals must go on
    /// meanwhile.
    fn report(&mut self, on_event: &mut dyn FnMut(Event), ev: Event) {
        self.renewer.start();
        on_event(ev);
    }

    /// When the tree must be dead if nothing confirms the lease further.
    fn kill_by(&self) -> BootTime {
        kill_point(self.valid_until(), self.lease.ttl)
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

    /// SIGKILL the tree, and say why (nothing for a loss's SIGKILL: the
    /// loss's line said it would come, and a loss is one line).
    fn kill(&mut self, on_event: &mut dyn FnMut(Event), cause: Option<KillCause>, out: &Outcome) {
        self.kill_tree();
        if let Some(cause) = cause {
            let command = out.status.is_none();
            self.report(on_event, Event::Killed { cause, command });
        }
    }

    /// `--max-hold` is over: SIGTERM to every process of the tree (the
    /// command, or what it left running), SIGKILL after `--grace` (never
    /// later than the kill deadline, which the guard holds anyway); returns
    /// the new SIGKILL deadline. The lock is still held, and renewed, until
    /// the tree is gone: released then, as after any command.
    fn overrun(&mut self, kill_at: Due, on_event: &mut dyn FnMut(Event)) -> Due {
        let now = BootTime::now();
        tree::signal_all(self.guard.pid(), libc::SIGTERM);
        let at = now + self.spec.grace;
        let max = self.spec.max_hold.unwrap_or_default();
        self.report(on_event, Event::Overran(max));
        // The SIGKILL it announces: no second line.
        earliest(kill_at, at, None)
    }

    /// Apply the lock-loss policy; returns the new SIGKILL deadline. The
    /// signals and the guard's deadline are set before the event is
    /// reported, so a blocked stderr cannot delay them.
    fn lose(&self, why: &str, kill_at: Due, on_event: &mut dyn FnMut(Event)) -> Due {
        self.stop_renewing();
        let now = BootTime::now();
        match self.spec.on_lost {
            OnLost::Term if at_least_1ms(now, self.kill_by()) => {
                let at = (now + self.spec.grace).min(self.kill_by());
                // rlock stops the tree itself: the SIGTERM from its own walk
                // of the guard's tree, the SIGKILL at `at` (`kill`, from
                // this loop), so a guard stopped or starved (whose socket
                // may be full, dropping what we send) cannot delay either
                // past the lease. The guard's deadline is the second line,
                // for an rlock stopped from here on. The SIGTERM goes one
                // way only: a command's TERM trap would run twice.
                self.guard.deadline(Some(at));
                tree::signal_all(self.guard.pid(), libc::SIGTERM);
                let action = format!(
                    "sent SIGTERM to the command, SIGKILL in {} if it is still running",
                    human(at - now)
                );
                on_event(Event::Lost {
                    why,
                    action: &action,
                });
                earliest(kill_at, at, None)
            }
            OnLost::Term => {
                // No time left for a grace period (rlock was stopped or
                // starved until the kill deadline).
                self.kill_tree();
                on_event(Event::Lost {
                    why,
                    action: "killed the command: no time was left for a grace period",
                });
                None
            }
            OnLost::Kill => {
                self.kill_tree();
                on_event(Event::Lost {
                    why,
                    action: "killed the command",
                });
                None
            }
            OnLost::Ignore => {
                on_event(Event::Lost {
                    why,
                    action: "the command runs on without the lock (--on-lost ignore)",
                });
                kill_at
            }
        }
    }
}

fn at_least_1ms(now: BootTime, then: BootTime) -> bool {
    then - now >= Duration::from_millis(1)
}

/// The sooner of `due` and a SIGKILL at `at` for `cause`.
fn earliest(due: Due, at: BootTime, cause: Option<KillCause>) -> Due {
    match due {
        Some((k, _)) if k <= at => due,
        _ => Some((at, cause)),
    }
}

/// Margin between the validity deadline and the guard's SIGKILL, for the
/// kernel to tear the processes down: TTL/20, at most 250 ms.
fn kill_margin(ttl: Duration) -> Duration {
    (ttl / 20).min(Duration::from_millis(250))
}

/// When the command's tree must be killed if the lease is valid until
/// `valid_until` and nothing confirms it further.
pub(crate) fn kill_point(valid_until: BootTime, ttl: Duration) -> BootTime {
    valid_until - kill_margin(ttl)
}
