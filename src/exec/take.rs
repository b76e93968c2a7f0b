//! Taking exec's lock before the command starts: the backend's bounded
//! first try without a thread, then the waiting acquire with a thread that
//! lets INT/TERM/HUP/QUIT end the wait.

use crate::lock::First;
use crate::{Busy, Cancel, Lease, Locker, Release, Request, Result, Token};

/// Acquire as `req` says; INT/TERM/HUP/QUIT received meanwhile end the
/// wait (nothing held or queued), as does `cancel` (a lock set's loss of a
/// lock it holds already), USR1/USR2 are dropped.
///
/// The backend's first try ([`crate::Backend::acquire_first`]) runs
/// without a thread: it is bounded, and its signals wait in `signals`
/// until it returns. Only if it did not grant does the full, waiting
/// acquire run, with a thread taking signals and cancelling the wait at
/// once. The uncontended case so starts no thread at all; a waiter pays
/// one extra non-queued attempt.
///
/// Before it waits, `before_wait` hears the token the wait asks (and
/// queues) with: a fresh one, made here, so nobody else has it (None if
/// the backend takes a token of its own per attempt, RedLock). The
/// uncontended case never calls it.
pub(super) fn acquire(
    locker: &mut Locker,
    key: &str,
    req: &Request,
    signals: &crate::signals::Blocked,
    cancel: &Cancel,
    on_wait: &mut dyn FnMut(&Busy),
    before_wait: &mut dyn FnMut(Option<&Token>),
) -> Result<Lease> {
    let mut rest = match locker.acquire_first(key, req)? {
        First::Granted(lease) => return Ok(lease),
        First::Wait(rest) => rest,
    };
    if locker.takes_token() {
        let token = Token::generate();
        before_wait(Some(&token));
        rest = rest.with_token(token);
    } else {
        before_wait(None);
    }
    let lease = std::thread::scope(|s| {
        let _watcher = signals.watch(s, |sig| {
            if crate::signals::ENDS_WAIT.contains(&sig) {
                cancel.cancel(sig);
            }
        })?;
        locker.acquire(key, &rest, Some(cancel), on_wait)
    })?;
    if cancel.is_cancelled() {
        let how = Release {
            all: lease.count == 1,
            ..Release::at_once()
        };
        let _ = locker.release_with(key, &lease.token, &how);
        return Err(cancel.interrupted());
    }
    // A signal taken meanwhile: `run` looks right after, before the spawn.
    Ok(lease)
}

/// Take every pending signal; the first that ends a wait, if any (the
/// others are dropped, as while waiting).
pub(super) fn ends_wait(signals: &crate::signals::Blocked) -> Option<i32> {
    let mut first = None;
    while let Some(sig) = signals.take() {
        if crate::signals::ENDS_WAIT.contains(&sig) {
            first = first.or(Some(sig));
        }
    }
    first
}

/// What rlock's guard is told to give back, should rlock die while it
/// takes the locks of an exec (a wait, or between a grant and the go):
/// its place in the queue and the set's locks taken so far
/// (hold/guard/release.rs, `waiting_settings`). Told once a first try
/// finds a lock busy (the uncontended path sends nothing more than it
/// did), and again after every grant from then on.
///
/// Two holders cannot come of it: the guard releases only once rlock is
/// dead and before the go (it alone starts the command, so nothing runs
/// under these holds); it names only tokens nobody else has (the wait's,
/// made fresh in [`acquire`], and first holds, count 1), never a
/// re-entered hold's token, which is the enclosing holder's; and
/// release.lua drops only the holds and the place of the token it is
/// given, so a grant that landed between the kill and the release frees
/// that token's hold and nothing else. A live rlock that stops waiting
/// (timeout, signal) gives back what it has itself and closes its end as
/// "finished", after which the guard releases nothing.
pub(super) struct Told<'g> {
    guard: &'g super::guard::Guard,
    /// How many locks the set has.
    of: usize,
    taken: Vec<Lease>,
    /// Bytes of settings sent so far (0: none). All of them together stay
    /// within MAX_RELEASE, so that, as before, the socket never holds so
    /// much before the go that the go could be dropped on it (see
    /// `End::send`); settings past that are not sent, and the guard keeps
    /// the last it got, which names only what was this rlock's then.
    sent: usize,
}

impl<'g> Told<'g> {
    pub(super) fn new(guard: &'g super::guard::Guard, of: usize) -> Told<'g> {
        Told {
            guard,
            of,
            taken: Vec::new(),
            sent: 0,
        }
    }

    /// Before a wait for `key` with `token` (None: RedLock's, a token per
    /// attempt).
    pub(super) fn waiting(&mut self, key: &str, token: Option<&Token>) {
        let place = token.map(|t| (key, t));
        if let Some(settings) = super::guard::waiting_settings(&self.taken, place) {
            self.send(&settings);
        }
    }

    /// After a grant: with more locks to take (the last's settings follow
    /// before the go), the wait's token is now this lease's (or unused, if
    /// it re-entered), and the settings name what is held, or nothing
    /// (empty).
    pub(super) fn granted(&mut self, lease: &Lease) {
        self.taken.push(lease.clone());
        if self.sent > 0 && self.taken.len() < self.of {
            let settings = super::guard::waiting_settings(&self.taken, None).unwrap_or_default();
            self.send(&settings);
        }
    }

    fn send(&mut self, settings: &[u8]) {
        if self.sent + settings.len() <= crate::hold::guard::wire::MAX_RELEASE {
            self.sent += settings.len();
            self.guard.release_if_killed(settings);
        }
    }
}
