//! The guard: one dead-man process for every hold (an `rlock exec` and an
//! `acquire --keep` alike), forked by the holder while it has one thread.
//! It lives here, in the hold core, because it enforces the core's kill
//! deadline for whichever holder drives the core; what differs between
//! holders is a [`Reach`] the holder hands it, and flags of its [`State`].
//!
//! What it does, for both:
//! - holds a CLOCK_BOOTTIME timer at the holder's *kill deadline* (the
//!   lease's validity deadline minus `hold::kill_margin`, so a suspend
//!   counts) and SIGKILLs its reach when it fires, whatever the holder is
//!   doing: stopped, starved, blocked on a full stderr, or dead;
//! - sees the holder's death as its end of the channel closing without the
//!   "finished" flag: then stops the reach ([`OnDeath`]: exec SIGKILLs at
//!   once, as nobody is left to report to; keep applies `--on-lost`: TERM
//!   with CONT, SIGKILL after `--grace`), SIGKILLs at the kill deadline
//!   whatever the grace says, and once nothing of the reach is left gives
//!   back the holder's own holds through the releaser ([`release`]), so
//!   the lock passes on then rather than when the lease ends;
//! - runs no Redis client, never prints, allocates only what its loop
//!   needs (glibc's malloc is fork-safe for a library caller with
//!   threads), and takes no other lock.
//!
//! One channel: a SOCK_SEQPACKET socket pair ([`wire`], one datagram per
//! message). Its close is the holder's death (or end). The kill deadline
//! does not travel on it but on a page both share (`MAP_SHARED`, [`Page`]),
//! written after every confirmed renewal: a guard that someone stopped, or
//! that the scheduler starved, reads the newest deadline the moment it
//! runs again, never a stale one from a queue, and renewals cannot fill a
//! socket the guard does not read (a full socket once froze exec's
//! renewer). The timer is armed at the deadline as read; when it fires the
//! guard reads the page again and re-arms if the deadline moved later. A
//! deadline moved *earlier* (on a loss) is followed by a `D` message, which
//! only wakes the guard to read the page (a handful per hold: never
//! enough to fill the socket).
//!
//! The reach (what processes are the hold's):
//! - exec (`exec/guard/`): the guard's own tree. It is the command's
//!   parent and a child subreaper, starts the command on the holder's go
//!   (not if the kill deadline passed before it read the go), reports the
//!   command's start, stops and exit, the deadline's kill and the empty
//!   tree to rlock, reaps every zombie before "empty", and hands the
//!   terminal back to rlock's job when rlock dies.
//! - keep (`keep/guard.rs`): the keeper's cover, published by the keeper
//!   on a shared board after every walk, and completed by a /proc walk of
//!   the guard's own. It reports nothing; the keeper decides while it
//!   lives. With the keeper dead it looks at the cover every [`LOOK_EVERY`].
//!
//! Its decisions are [`decide`], a pure function of (state, event, now)
//! (`decide.rs`); [`run`] is the loop that turns the socket, the timer and
//! the reach into events and the actions into syscalls. Each guard renames
//! itself (see `crate::proctitle`) so that `pkill -9 rlock` and `pkill -9
//! -f rlock` leave it alone.

mod decide;
mod holder;
mod page;
pub(crate) mod release;
mod run;
pub(crate) mod wire;

use std::os::fd::RawFd;
use std::time::Duration;

pub(crate) use decide::{Action, Event, HolderIs, OnDeath, OnFinish, State, decide, wake_at};
pub(crate) use holder::{End, fork};
pub(crate) use page::Page;
pub(crate) use run::{exit, run, send};

/// How often a guard whose holder died looks at a reach that gives no
/// descriptor to wait on (keep's cover): the lock is free this soon after
/// the last process of it exits.
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The processes of a hold, as its guard reaches them.
pub(crate) trait Reach {
    /// `sig` to every process of the reach, SIGCONT after SIGTERM (as
    /// timeout(1) sends it); SIGKILL until none is left alive.
    fn signal(&mut self, sig: i32);
    /// Readable when a process of the reach may have ended (-1: none; the
    /// guard then looks every [`LOOK_EVERY`] once the holder is gone).
    fn fd(&self) -> RawFd {
        -1
    }
    /// Empty `fd`'s readiness.
    fn drain(&mut self) {}
    /// Reap what has exited, then: is nothing of the reach left that the
    /// guard waits for? `holder_alive`: the holder's end is still open.
    fn empty(&mut self, holder_alive: bool) -> bool;
    /// exec: start the command with `env` (NUL-separated `K=V` pairs)
    /// added, report the start, and close every descriptor but `keep`;
    /// false if it could not be started (reported too).
    fn start(&mut self, _env: &[u8], _keep: &[RawFd]) -> bool {
        false
    }
    /// exec: the terminal back to the holder's job, if the command's group
    /// has it.
    fn hand_back_terminal(&mut self) {}
    /// exec: tell the holder of the deadline's kill or of the empty tree.
    fn report(&mut self, _msg: &[u8]) {}
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Close every descriptor of this process but those in `keep` (negative
/// entries are ignored): close_range (Linux 5.9) between the kept ones,
/// else each one /proc lists.
///
/// # Safety
/// Only in a process that owns all its descriptors (the guard; the keeper
/// once detached): nothing else may be using the ones closed.
pub(crate) unsafe fn close_all_but(keep: &[RawFd]) {
    let mut keep = keep.to_vec();
    keep.sort_unstable();
    let mut from = 0;
    let mut ranged = true;
    // SAFETY: plain syscalls; the caller owns the descriptors.
    unsafe {
        for &k in keep.iter().filter(|&&k| k >= 0) {
            if k > from {
                ranged &= libc::syscall(libc::SYS_close_range, from, k - 1, 0) == 0;
            }
            from = k + 1;
        }
        ranged &= libc::syscall(libc::SYS_close_range, from, u32::MAX, 0) == 0;
    }
    if ranged {
        return;
    }
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in open.into_iter().filter(|fd| !keep.contains(fd)) {
        // SAFETY: as above (the directory's own descriptor is closed by
        // now: closing its stale number fails harmlessly).
        unsafe { libc::close(fd) };
    }
}
