//! The keeper's guard: the hold core's one guard (`hold::guard`, whose
//! module doc says what every guard does) with the keeper's cover as its
//! reach. It stops the watched process and what it started if the keeper
//! itself dies or stops before the lease can end, as exec's guard does
//! for exec's command.
//!
//! # Why
//!
//! The keeper alone renews the lease. SIGKILLed (an OOM kill, `kill -9`),
//! stopped (SIGSTOP, a debugger) or starved, it renews no more, and the
//! lease ends on the server while the script goes on believing it holds
//! the lock: a rival gets it, two holders. The guard closes that path.
//!
//! # How
//!
//! The keeper forks the guard first thing, while it has one thread and
//! before any connection, and sets the kill deadline on their page after
//! every confirmed renewal. If the keeper dies (its end closes without the
//! page's "finished"), the guard applies `--on-lost` at once (`term`:
//! SIGTERM with SIGCONT, SIGKILL at the earlier of `--grace` and the kill
//! deadline; `kill`: SIGKILL), and once the watched process and its whole
//! cover are gone, gives back the keeper's own holds (the grant and the
//! re-entered `acquire --keep`s it adopted, which the keeper sends it
//! whenever they change) through the releaser: the lock is free within a
//! moment rather than at the lease's end. If the deadline passes unmoved
//! (the keeper stopped or starved), it SIGKILLs the cover.
//!
//! What it stops is the keeper's cover: the keeper publishes it on a page
//! shared with the guard after every walk (`cover::Board`), and the guard
//! adds what a walk of its own finds. So a process re-parented away from
//! the script is stopped by the guard as by the keeper.
//!
//! The guard is named `rl-keepguard`, its command line `rl-keepguard
//! __keep` (see `crate::proctitle`), so that `pkill -9 rlock` or `pkill
//! -9 -f rlock` kills the keeper but not its guard. Not covered: the keeper
//! and its guard killed *together* (`kill -9` of both pids): nothing is left
//! to act, and the lease ends under the script (docs/guide.md, "Limits").
//! Under `--on-lost ignore` there is no guard (nothing would be done).

use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use super::Watched;
use super::cover::Cover;
use crate::clock::BootTime;
use crate::exec::OnLost;
use crate::hold::guard::{self, End, OnDeath, OnFinish, Reach, State};

/// What the guard acts on.
pub(super) struct Policy {
    pub on_lost: OnLost,
    pub grace: Duration,
}

/// The keeper's cover, as its guard reaches it.
struct Covered<'a> {
    watched: &'a Watched,
    cover: Cover,
}

impl Reach for Covered<'_> {
    /// What the keeper last published and a walk of our own find, then
    /// `sig` to all of it (see [`Cover::stop`]).
    fn signal(&mut self, sig: i32) {
        self.cover.catch_up();
        let _ = self.cover.stop(self.watched, sig);
    }

    /// While the keeper lives it decides; then: the watched process and
    /// every covered one gone.
    fn empty(&mut self, keeper_alive: bool) -> bool {
        if keeper_alive || !self.watched.gone() {
            return false;
        }
        self.cover.catch_up();
        !self.cover.any_live()
    }
}

/// Fork the guard of the keeper, which must have one thread, with the
/// kill deadline `deadline`. Returns the keeper's end, which it keeps open
/// until it exits; None (no guard) under `--on-lost ignore`, or if the
/// guard cannot be made: the keeper then keeps the lock alone, as before
/// guards. `close` lists descriptors the guard must not hold (the keeper's
/// release socket, which a guard outliving the keeper would keep bound).
pub(super) fn fork(
    deadline: BootTime,
    watched: &Watched,
    cover: &Cover,
    policy: Policy,
    close: &[RawFd],
) -> Option<End> {
    let on_death = match policy.on_lost {
        OnLost::Ignore => return None,
        OnLost::Term => OnDeath::Term(policy.grace),
        OnLost::Kill => OnDeath::Kill,
    };
    let (_, end) = guard::fork(Some(deadline), |sock, page| {
        for &fd in close {
            // SAFETY: the child's copies, unused by it.
            unsafe { libc::close(fd) };
        }
        // SAFETY: forked while the keeper has one thread (see
        // `keeper_main`), and neither reads the keeper's argv again.
        unsafe {
            crate::proctitle::rename(&[
                crate::proctitle::KEEP_GUARD.as_bytes(),
                super::KEEPER_ARG.as_bytes(),
            ]);
        };
        let mut reach = Covered {
            watched,
            cover: cover.clone(),
        };
        let state = State::new(on_death, OnFinish::Leave, false);
        guard::run(sock.as_raw_fd(), page, &mut reach, state)
    })
    .ok()?;
    Some(end)
}
