//! The keeper's loop: the driver of the hold core (`crate::hold`) for
//! `acquire --keep`. It renews, watches the process and its cover, answers
//! the release socket and reads its stop signals, turns each of those into
//! one of the core's events, and carries out the actions the core decides
//! on: the cover's signals, the guard's kill deadline, the loss record, and
//! at the end what [`hold::State::end`] says of the lock (release, give a
//! broken hold back, or leave it to its lease). Started by
//! [`super::spawn`].

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use super::caller::Grant;
use super::cover::{Cover, Id, WALK_EVERY};
use super::guard::Policy;
use super::loss::{action_taken, record_loss};
use super::protocol::{Asked, Verdict, trusted};
use super::spawn::Config;
use super::{LostRecord, Watched};
use crate::clock::BootTime;
use crate::conn::ConnectOptions;
use crate::exec::OnLost;
use crate::hold::{self, Action, End, Event, Holder, State};
use crate::lock::LockName;
use crate::signals::poll;
use crate::{Error, Locker, Released, Result, Token};

/// How often the keeper looks at the watched process without a pidfd.
const FALLBACK_POLL: Duration = Duration::from_millis(250);

/// The keeper as it runs: the lock it keeps, the process it watches,
/// what it listens on.
pub(super) struct Keeper {
    /// None until a connect succeeds.
    locker: Option<Locker>,
    /// How much history its calls keep.
    history: crate::lock::HistoryLimits,
    prefix: String,
    opts: ConnectOptions,
    name: LockName,
    key: String,
    token: Token,
    /// The holds of the token that are the keeper's to give back: its
    /// grant, and those of re-entered `acquire --keep`s it adopted. Never
    /// more: another hold of the token (a re-entered `rlock exec` in the
    /// background, say) belongs to whoever took it, and giving it back
    /// would free the lock under it.
    own: u64,
    ttl: Duration,
    grace: Duration,
    valid_until: BootTime,
    on_lost: OnLost,
    watched: Watched,
    /// What the lock covers besides the watched process (see cover.rs):
    /// it is held while any of it lives.
    cover: Cover,
    /// When /proc is walked next.
    next_walk: BootTime,
    /// The watched process was seen gone.
    watched_ended: bool,
    listener: UnixListener,
    sigfd: crate::signals::Blocked,
    /// A release in progress: its connection, and the point after which
    /// we renew anyway.
    releasing: Option<(UnixStream, BootTime)>,
    /// When `--max-hold` ends, if given.
    overrun_at: Option<BootTime>,
    /// `--max-hold`, for the core's policy.
    max_hold: Option<Duration>,
    /// The core started renewing and has not stopped it.
    renewing: bool,
    /// The signal the cover was last sent: a process a walk finds from
    /// then on gets it too (with SIGCONT after SIGTERM).
    sending: Option<i32>,
    /// The first signal of a stop and whether the watched process took
    /// it (for the loss record's action).
    sent: Option<(&'static str, std::io::Result<()>)>,
    /// The loss came from a renewal's answer (the lock gone, taken or
    /// broken), not from no renewal confirmed in time.
    definite: bool,
    /// Everything covered was gone when the loss was found: nothing to
    /// signal.
    gone_at_loss: bool,
    /// Our end of the guard (see guard.rs): the page we tell it the kill
    /// deadline on, and the socket whose closing tells it we exited.
    guard: Option<hold::guard::End>,
}

/// Signals that make the keeper stop keeping: the watched process and its
/// cover are stopped first (`hold::Event::Stop`).
const ENDS: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

impl Keeper {
    pub(super) fn new(c: Config, ready: Option<OwnedFd>) -> Option<Keeper> {
        let opts = c.connect_options();
        let token = Token::parse(&c.token).ok()?;
        let name = LockName::new(&c.prefix, &c.key).ok()?;
        // SAFETY: descriptors handed to us by `spawn`, now ours alone.
        let listener = unsafe { UnixListener::from_raw_fd(c.listen) };
        listener.set_nonblocking(true).ok()?;
        // SAFETY: as above.
        let pidfd = c.pidfd.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        let watched = Watched {
            pid: c.pid,
            start: c.start,
            pidfd,
        };
        let ttl = Duration::from_millis(c.ttl_ms);
        let valid_until = BootTime::from_since_boot(Duration::from_nanos(c.valid_until_ns));
        let on_lost = match c.on_lost.as_str() {
            "kill" => OnLost::Kill,
            "ignore" => OnLost::Ignore,
            _ => OnLost::Term,
        };
        let grace = Duration::from_millis(c.grace_ms);
        // Counted from the grant (its request's send), as exec counts it.
        let overrun_at = (c.max_hold_ms > 0).then(|| {
            valid_until - ttl + crate::lock::drift(ttl) + Duration::from_millis(c.max_hold_ms)
        });
        // First, while this process has one thread (no connection yet).
        let since = Grant {
            start: c.since,
            pid: c.since_pid,
        };
        let cover = Cover::new(&watched, since);
        let policy = Policy { on_lost, grace };
        let guard = super::guard::fork(
            crate::exec::kill_point(valid_until, ttl),
            &watched,
            &cover,
            policy,
            &[c.listen, ready.as_ref().map_or(-1, AsRawFd::as_raw_fd)],
        );
        let sigfd = end_signals()?;
        // Guarded: `rlock acquire` may return (see `spawn`).
        if let Some(r) = ready {
            // SAFETY: one byte from a valid buffer to our own descriptor.
            unsafe { libc::write(r.as_raw_fd(), b"1".as_ptr().cast(), 1) };
        }
        // Connecting may fail now (Redis down): renewals retry, connect
        // included, until the lease's validity ends.
        let history = c.history();
        let locker = Locker::connect(&opts, &c.prefix).ok().map(|mut l| {
            l.set_history(history);
            l
        });
        let k = Keeper {
            locker,
            history,
            prefix: c.prefix,
            opts,
            name,
            key: c.key,
            own: 1,
            token,
            ttl,
            grace,
            valid_until,
            on_lost,
            watched,
            cover,
            next_walk: BootTime::now(),
            watched_ended: false,
            listener,
            sigfd,
            releasing: None,
            overrun_at,
            max_hold: (c.max_hold_ms > 0).then(|| Duration::from_millis(c.max_hold_ms)),
            renewing: false,
            sending: None,
            sent: None,
            definite: false,
            gone_at_loss: false,
            guard,
        };
        k.tell_guard_holds();
        Some(k)
    }

    /// Tell the guard which holds are ours to give back should we die
    /// (see `hold::guard::release`), after the grant and whenever `own`
    /// changes.
    fn tell_guard_holds(&self) {
        let Some(end) = &self.guard else {
            return;
        };
        let releaser = crate::exec::Releaser {
            opts: self.opts.clone(),
            prefix: self.prefix.clone(),
            history: self.history,
        };
        let settings = hold::guard::release::keep_settings(
            &releaser,
            &self.key,
            self.token.as_str(),
            self.own,
        );
        end.release_if_killed(&settings.unwrap_or_default());
    }

    /// Keep the lock, then tell the guard we ended cleanly.
    pub(super) fn run(&mut self) -> u8 {
        let code = self.keep();
        if let Some(end) = &self.guard {
            end.finish();
        }
        code
    }

    fn keep(&mut self) -> u8 {
        let mut renewals = hold::Renewals::new(self.valid_until, self.ttl);
        let policy = hold::Policy {
            holder: Holder::Keep,
            on_lost: self.on_lost,
            grace: self.grace,
            kill_leftovers: false,
            max_hold: self.max_hold,
        };
        let mut state = State::new(policy, self.valid_until, self.ttl, self.overrun_at);
        let (key, token, ttl) = (self.key.clone(), self.token.clone(), self.ttl);
        loop {
            if self.all_gone() && self.step(&mut state, Event::Empty) {
                return self.end(&state);
            }
            // The clock's turn, every time: the loss by no confirmation
            // (TTL/3 before the validity deadline), `--max-hold`, the
            // SIGKILL due, the end of the wait after it.
            if self.step(&mut state, Event::Tick) {
                return self.end(&state);
            }
            let renew_due = self.renewing && !state.renewals_paused(BootTime::now());
            if renew_due && renewals.due() {
                self.walk(true);
                let held = [hold::Held {
                    key: &key,
                    token: &token,
                    ttl,
                }];
                let round = match self.locker() {
                    Ok(l) => renewals.round(l, &held, None, &|| false, &mut |_, _| {}),
                    // Not connected (Redis down): retried like a failed
                    // renewal.
                    Err(_) => renewals.failed(),
                };
                if let hold::Round::Renewed(valid) = round {
                    self.valid_until = valid;
                    if let Some(end) = &self.guard {
                        end.deadline(Some(crate::exec::kill_point(valid, ttl)));
                    }
                }
                let Some(event) = round.event() else {
                    continue;
                };
                if matches!(event, Event::Lost(_)) {
                    // Only a process that still runs is signalled: it may
                    // have exited during the renewal that found the loss,
                    // and once it is reaped its pid may belong to another
                    // process (a pidfd does not hold the number).
                    self.definite = true;
                    self.gone_at_loss = self.all_gone();
                }
                if self.step(&mut state, event) {
                    return self.end(&state);
                }
                continue;
            }
            let mut wake = hold::wake_at(&state, BootTime::now());
            if renew_due {
                wake = wake.min(renewals.next);
            }
            let mut timeout = wake.remaining().min(self.next_walk.remaining());
            if self.watched.pidfd.is_none() {
                timeout = timeout.min(FALLBACK_POLL);
            }
            // Readable for good once it has exited: then the walks alone.
            let watched_fd = if self.watched.gone() {
                -1
            } else {
                self.watched.pidfd_raw()
            };
            let release_fd = self.releasing.as_ref().map_or(-1, |(s, _)| s.as_raw_fd());
            let mut fds = [
                crate::signals::pollin(watched_fd),
                crate::signals::pollin(self.listener.as_raw_fd()),
                crate::signals::pollin(release_fd),
                crate::signals::pollin(self.sigfd.fd()),
            ];
            if poll(&mut fds, timeout) <= 0 {
                continue; // timeout, EINTR
            }
            if fds[3].revents != 0 {
                let mut told = false;
                while self.sigfd.take().is_some() {
                    told = true;
                }
                if told && self.step(&mut state, Event::Stop) {
                    return self.end(&state);
                }
            }
            if fds[0].revents != 0 {
                // The watched process exited: a walk now (at the top),
                // while what it started is freshly re-parented.
                self.next_walk = BootTime::now();
                continue;
            }
            if fds[2].revents != 0 {
                let given_back = self.verdict();
                if self.step(&mut state, Event::ReleaseEnded { given_back }) {
                    return self.end(&state);
                }
                renewals.next = BootTime::now();
            }
            if fds[1].revents != 0
                && let Some(until) = self.accept()
            {
                self.step(&mut state, Event::Releasing(until));
            }
        }
    }

    /// Decide on `event` now and carry the actions out; true once the hold
    /// is over.
    fn step(&mut self, state: &mut State, event: Event) -> bool {
        let actions = hold::decide(state, event, BootTime::now());
        let mut done = false;
        for action in actions {
            match action {
                Action::Terminate => self.signal_cover(libc::SIGTERM),
                Action::Kill => self.signal_cover(libc::SIGKILL),
                // The guard enforces it too, should we be stopped meanwhile.
                Action::Deadline(at) => {
                    if let Some(end) = &self.guard {
                        end.deadline(Some(at));
                    }
                }
                Action::StartRenewer => self.renewing = true,
                Action::StopRenewer => self.renewing = false,
                Action::Report(hold::Report::Lost { why, .. }) => self.record(&why),
                // The history's `overran` comes with the release.
                Action::Report(_) | Action::Forward(_) => {}
                Action::Finish => done = true,
            }
        }
        done
    }

    /// `sig` (with SIGCONT after SIGTERM) to the watched process and its
    /// cover, unless they were gone when the loss was found; processes a
    /// walk finds from now on get it too.
    fn signal_cover(&mut self, sig: i32) {
        if self.gone_at_loss || (sig == libc::SIGKILL && self.all_gone()) {
            return;
        }
        let sent = self.cover.stop(&self.watched, sig);
        self.sending = Some(sig);
        if self.sent.is_none() {
            let name = if sig == libc::SIGTERM {
                "SIGTERM"
            } else {
                "SIGKILL"
            };
            self.sent = Some((name, sent));
        }
    }

    /// The hold is over: do with the lock what the core says.
    fn end(&mut self, state: &State) -> u8 {
        match state.end() {
            End::Given if state.overran => crate::exit_code::OVERRAN,
            End::Given => 0,
            End::GiveBackBroken => {
                self.give_back_broken();
                crate::exit_code::LOST
            }
            End::LeaveToLease => crate::exit_code::LOST,
            End::Release => {
                self.release_and_exit(state.overran);
                if state.overran {
                    crate::exit_code::OVERRAN
                } else {
                    0
                }
            }
        }
    }

    fn locker(&mut self) -> Result<&mut Locker> {
        if self.locker.is_none() {
            let mut l = Locker::connect(&self.opts, &self.prefix)?;
            l.set_history(self.history);
            self.locker = Some(l);
        }
        Ok(self.locker.as_mut().expect("just connected"))
    }

    /// A connection on the release socket, from our user (or root):
    /// "release LOCK" pauses renewals until the verdict; "adopt LOCK" (a
    /// re-entered `acquire --keep` of the token) makes its hold ours too.
    /// Returns until when renewals pause for a release.
    fn accept(&mut self) -> Option<BootTime> {
        let Ok((stream, _)) = self.listener.accept() else {
            return None;
        };
        if !trusted(&stream) {
            return None;
        }
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut line = String::new();
        if BufReader::new(&stream).read_line(&mut line).is_err() {
            return None;
        }
        let asked = Asked::parse(&line, self.name.redis_key())?;
        if (&stream).write_all(b"ok\n").is_err() {
            return None;
        }
        if asked == Asked::Adopt {
            self.own += 1;
            self.tell_guard_holds();
            return None;
        }
        // The releaser has its connect timeout per try: give it a few, but
        // never let the lease run out unrenewed for it.
        let margin = self.ttl / 3;
        let until = (BootTime::now() + self.opts.connect_timeout * 3)
            .min(self.valid_until.saturating_sub(margin));
        self.releasing = Some((stream, until));
        Some(until)
    }

    /// The releaser's verdict: whether it gave back the last of our holds
    /// (we keep no more).
    fn verdict(&mut self) -> bool {
        let Some((stream, _)) = self.releasing.take() else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
        let mut line = String::new();
        let _ = BufReader::new(&stream).read_line(&mut line);
        match Verdict::parse(&line) {
            Verdict::Released => return true,
            // One hold was given back, N remain. The script's release of
            // its kept lock gives back one of ours; the rest are ours
            // still, or other holders' (a re-entered exec's), which we
            // must neither renew for ever nor give back.
            Verdict::Held(_) => {
                self.own = self.own.saturating_sub(1);
                self.tell_guard_holds();
                if self.own == 0 {
                    return true;
                }
            }
            Verdict::Failed => {}
        }
        false // held, or the release failed, or the releaser died: renew now
    }

    /// Everything covered is gone (or `--on-lost ignore` let it run on):
    /// give our holds back, retrying while the lease lasts. `overran`: the
    /// script ran past `--max-hold`, released without min-hold.
    fn release_and_exit(&mut self, overran: bool) -> u8 {
        // A release announced to us is in progress: its verdict first. The
        // script may have given back our hold just before it exited;
        // giving back "ours" again would take another holder's (an
        // enclosing exec's).
        if let Some((s, until)) = &self.releasing {
            let mut fds = [crate::signals::pollin(s.as_raw_fd())];
            poll(&mut fds, until.remaining());
            if self.verdict() {
                return 0;
            }
        }
        while self.own > 0 {
            let (key, token) = (self.key.clone(), self.token.clone());
            // Honours a --min-hold given at the grant, but not after an
            // overrun (no success).
            let how = crate::Release {
                min_hold: (!overran).then_some(Duration::ZERO),
                // After --max-hold the history says `overran`, not `released`.
                note: crate::ReleaseNote {
                    exit_code: None,
                    overran,
                },
                ..Default::default()
            };
            let release = |l: &mut Locker| l.release_with(&key, &token, &how);
            match self.locker().and_then(release) {
                Ok(Released::StillHeld(_)) => {
                    self.own -= 1;
                    self.tell_guard_holds();
                }
                Ok(_) => return 0,
                Err(e) if !matches!(e, Error::Unavailable { .. }) => return 0,
                Err(_) if self.valid_until.passed() => return 0,
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
        0
    }

    /// Walk /proc (see cover.rs); the next walk is due [`WALK_EVERY`] on.
    /// Once the cover was signalled, what a walk finds gets the signal too.
    fn walk(&mut self, full: bool) -> Vec<Id> {
        self.next_walk = BootTime::now() + WALK_EVERY;
        let new = self.cover.walk(full);
        if let Some(sig) = self.sending {
            signal_new(&new, sig);
        }
        new
    }

    /// Has everything the lock covers exited: the watched process and
    /// every covered one? A walk first when one is due; a full one when
    /// the watched process is first seen gone (what it started has just
    /// been re-parented: the group rule still finds it), and before
    /// saying yes.
    fn all_gone(&mut self) -> bool {
        let watched_gone = self.watched.gone();
        let first = watched_gone && !self.watched_ended;
        self.watched_ended = watched_gone;
        if first || self.next_walk.passed() {
            self.walk(first);
        }
        if !watched_gone || self.cover.any_live() {
            return false;
        }
        self.walk(true);
        !self.cover.any_live()
    }

    /// The core declared the lock lost (its signals, if any, have gone
    /// out): record it in the history (a renewal's answer: `lost`; a break
    /// is there already, as `broken`) and in the loss record `status`
    /// shows, whose action says what was really done (if the watched
    /// process could not be signalled, EPERM: it became another user's,
    /// it says so instead of claiming a signal).
    fn record(&mut self, why: &str) {
        let broken = self.definite && why.starts_with(crate::lock::breaking::BROKEN_BY);
        if self.definite && !broken {
            // The history's `lost` event (the server just answered, so
            // this costs one round trip).
            let (key, token) = (self.key.clone(), self.token.clone());
            let loss = crate::lock::Loss {
                info: crate::lock::HolderInfo {
                    pid: self.watched.pid as u32,
                    ..crate::lock::HolderInfo::current(None)
                },
                reason: why.to_string(),
            };
            if let Ok(l) = self.locker() {
                let _ = l.record_lost(&key, &token, &loss);
            }
        }
        let action = action_taken(
            self.on_lost,
            self.grace,
            self.gone_at_loss,
            self.sent.as_ref(),
            self.watched.pid,
        );
        let record = LostRecord::now(self.watched.pid, why, action);
        let _ = record_loss(&self.opts, &self.name, &record);
    }

    /// A hold being broken (`rlock break`, lua/break.lua) stays held until
    /// its holder gives it back or its lease ends: once the script and
    /// what it started are gone, give it back, so the lock passes on now.
    /// (The release answers "broken"; a failure leaves the lease to end.)
    fn give_back_broken(&mut self) {
        let (key, token) = (self.key.clone(), self.token.clone());
        if let Ok(l) = self.locker() {
            let how = crate::Release {
                all: true,
                ..crate::Release::at_once()
            };
            let _ = l.release_with(&key, &token, &how);
        }
    }
}

/// `sig` (and SIGCONT after SIGTERM) to processes a walk just found.
fn signal_new(new: &[Id], sig: i32) {
    for &s in std::iter::once(&sig).chain((sig == libc::SIGTERM).then_some(&libc::SIGCONT)) {
        super::cover::send_all(new, s);
    }
}

/// TERM, INT, HUP and QUIT blocked and readable on a signalfd, whatever
/// dispositions we inherited (an ignored signal would never reach it).
fn end_signals() -> Option<crate::signals::Blocked> {
    for s in ENDS {
        // SAFETY: plain syscall on this single-threaded process.
        unsafe { libc::signal(s, libc::SIG_DFL) };
    }
    crate::signals::Blocked::new(&ENDS).ok()
}
