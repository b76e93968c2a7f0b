//! The keeper's guard: a second process that stops the watched process
//! (and what it started) if the keeper itself dies or stops before the
//! lease can end, as exec's guard does for exec's command.
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
//! before any connection. They share one page of memory (`MAP_SHARED`):
//! the keeper stores there the *kill deadline* after every confirmed
//! renewal (the lease's validity deadline minus [`kill_margin`], on
//! CLOCK_BOOTTIME, so a suspend counts), and a flag when it ends cleanly.
//! Shared memory, not messages: a stopped guard lets no socket buffer fill,
//! and on resume reads the newest deadline, never a stale one. The guard
//! waits in one `poll` on:
//! - a pipe whose only write end the keeper holds: end of file means the
//!   keeper has exited; without the flag, it died. The guard then applies
//!   `--on-lost` at once: `term` sends SIGTERM and SIGKILL at the earlier
//!   of `--grace` and the kill deadline; `kill` sends SIGKILL.
//! - a CLOCK_BOOTTIME timer at the kill deadline: if the deadline has not
//!   moved by then (the keeper is stopped or starved), it SIGKILLs the
//!   tree: no time is left for a grace period.
//!
//! Not the watched process's end: the keeper keeps the lock for as long as
//! anything of its cover lives (see `cover.rs`), and the guard guards it
//! until the keeper ends cleanly.
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

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Watched;
use super::cover::Cover;
use crate::clock::BootTime;
use crate::exec::OnLost;

/// What the keeper tells its guard: one page shared by both.
pub(super) struct Shared {
    /// [0]: the kill deadline, CLOCK_BOOTTIME ns; [1]: nonzero once the
    /// keeper ends cleanly.
    words: &'static [AtomicU64; 2],
}

impl Shared {
    /// A new page, before the fork; None if it cannot be mapped.
    fn new(deadline: BootTime) -> Option<Shared> {
        // SAFETY: a fresh anonymous shared mapping, never unmapped (it
        // lives as long as the process), aligned for atomics.
        let words = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return None;
            }
            &*p.cast::<[AtomicU64; 2]>()
        };
        let s = Shared { words };
        s.set_deadline(deadline);
        Some(s)
    }

    /// Move the kill deadline (later after a renewal, earlier on a loss).
    pub(super) fn set_deadline(&self, at: BootTime) {
        self.words[0].store(crate::duration::nanos(at.since_boot()), Ordering::SeqCst);
    }

    fn deadline(&self) -> BootTime {
        BootTime::from_since_boot(Duration::from_nanos(self.words[0].load(Ordering::SeqCst)))
    }

    /// The keeper ends cleanly: the guard has nothing more to do.
    pub(super) fn finish(&self) {
        self.words[1].store(1, Ordering::SeqCst);
    }

    fn finished(&self) -> bool {
        self.words[1].load(Ordering::SeqCst) != 0
    }
}

/// What the guard acts on.
pub(super) struct Policy {
    pub on_lost: OnLost,
    pub grace: Duration,
}

/// Fork the guard of the keeper, which must have one thread. Returns the
/// shared page, and the pipe's write end that the keeper keeps open until
/// it exits; None (no guard) under `--on-lost ignore`, or if the guard
/// cannot be made: the keeper then keeps the lock alone, as before guards.
/// `close` lists descriptors the guard must not hold (the keeper's release
/// socket, which a guard outliving the keeper would keep bound).
pub(super) fn fork(
    deadline: BootTime,
    watched: &Watched,
    cover: &Cover,
    policy: Policy,
    close: &[RawFd],
) -> Option<(Shared, OwnedFd)> {
    if policy.on_lost == OnLost::Ignore {
        return None;
    }
    let shared = Shared::new(deadline)?;
    let mut fds = [0; 2];
    // SAFETY: plain syscall into a two-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return None;
    }
    // SAFETY: fresh descriptors we own.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the keeper has one thread here (see `keeper_main`), so the
    // child may do anything a single-threaded process can.
    match unsafe { libc::fork() } {
        0 => {
            drop(w);
            for &fd in close {
                // SAFETY: the child's copies, unused by it.
                unsafe { libc::close(fd) };
            }
            // SAFETY: forked while the keeper has one thread (see above),
            // and neither reads the keeper's argv again.
            unsafe {
                crate::proctitle::rename(&[
                    crate::proctitle::KEEP_GUARD.as_bytes(),
                    super::KEEPER_ARG.as_bytes(),
                ]);
            };
            run(&shared, &r, watched, cover.clone(), &policy);
            // SAFETY: the guard's work is done; no destructor must run in
            // this copy of the keeper.
            unsafe { libc::_exit(0) }
        }
        pid if pid > 0 => Some((shared, w)),
        _ => None,
    }
}

/// The guard's loop (see the module doc). `cover` is the keeper's as it
/// was at the fork; the keeper publishes every later state of it on a
/// shared board ([`Cover::catch_up`]), and the guard walks /proc once more
/// itself before it signals, so what it stops is what the keeper would
/// stop.
fn run(shared: &Shared, keeper: &OwnedFd, watched: &Watched, mut cover: Cover, policy: &Policy) {
    // SAFETY: plain syscall; a new descriptor or -1.
    let timer = unsafe { libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC) };
    let mut keeper_fd = keeper.as_raw_fd();
    // Once the keeper died: SIGKILL at this point (after a SIGTERM).
    let mut kill_at: Option<BootTime> = None;
    loop {
        if shared.finished() {
            return;
        }
        let deadline = kill_at.map_or(shared.deadline(), |k| k.min(shared.deadline()));
        if deadline.passed() {
            // The keeper confirmed nothing more (stopped, starved, or dead
            // and the grace is over): the lease is about to end.
            cover.catch_up();
            let _ = cover.stop(watched, libc::SIGKILL);
            return;
        }
        arm(timer, deadline);
        let mut fds = [
            crate::signals::pollin(keeper_fd),
            crate::signals::pollin(timer),
        ];
        // Without a timer, look again every quarter second.
        let wait = if timer < 0 { 250 } else { -1 };
        // SAFETY: a valid array of pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        if fds[0].revents != 0 && keeper_fd >= 0 {
            // End of file: the keeper has exited.
            keeper_fd = -1;
            if shared.finished() {
                return;
            }
            cover.catch_up();
            if watched.gone() && !cover.any_live() {
                return;
            }
            match policy.on_lost {
                OnLost::Term => {
                    let _ = cover.stop(watched, libc::SIGTERM);
                    kill_at = Some(BootTime::now() + policy.grace);
                }
                _ => {
                    let _ = cover.stop(watched, libc::SIGKILL);
                    return;
                }
            }
        }
        if timer >= 0 && fds[1].revents != 0 {
            let mut ticks = 0u64;
            // SAFETY: reads 8 bytes into a u64.
            unsafe { libc::read(timer, (&mut ticks as *mut u64).cast(), 8) };
        }
    }
}

/// Arm `timer` (CLOCK_BOOTTIME) to fire at `at`, absolute.
fn arm(timer: RawFd, at: BootTime) {
    if timer < 0 {
        return;
    }
    let ns = crate::duration::nanos(at.since_boot()).max(1);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: libc::time_t::try_from(ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::try_from(ns % 1_000_000_000).unwrap_or(0),
        },
    };
    // SAFETY: plain syscall on our timer with a valid spec.
    unsafe {
        libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut());
    }
}
