//! The guard: a small process that is the command's parent, a child
//! subreaper for its whole tree, and a dead-man switch on the lease.
//!
//! rlock forks it first thing in [`super::run`], before any thread exists,
//! and talks to it over a SOCK_SEQPACKET socket pair (one datagram per
//! message, so no framing). The guard:
//! - sits in a process group of its own and ignores job-control and
//!   terminal signals, so neither Ctrl-Z nor a kill of rlock's job (a CI
//!   runner killing the process group) stops or kills it with rlock;
//! - is PR_SET_CHILD_SUBREAPER, and starts the command (in a new process
//!   group, the terminal's foreground group in interactive use), so every
//!   descendant stays in its tree until it exits (see [`super::tree`]);
//! - holds a CLOCK_BOOTTIME timer at the kill deadline rlock last sent
//!   (moved after every confirmed renewal), and SIGKILLs the whole tree when
//!   it fires, whatever rlock is doing: stopped, starved, blocked on a full
//!   stderr, or the machine just resumed from suspend;
//! - does not start the command if that deadline passed before it read
//!   the request to (it was stopped or starved meanwhile);
//! - SIGKILLs the tree when rlock's end of the socket closes (rlock died),
//!   and once no process of it is left, gives back rlock's holds of the
//!   lock if rlock sent it how (see [`release`]);
//! - reaps everything, reports the command's stops and exit, and reports
//!   "empty" once no descendant is left, then exits.
//!
//! The guard never prints, reads the environment only through the C
//! library's `environ` (no lock), and takes no lock that another thread of
//! the forking process could hold: in the binary it is forked while rlock
//! has one thread; a library caller with other threads relies on glibc's
//! fork-safe malloc for the few allocations it makes. It runs no Redis
//! client: the release after rlock's death is made by a process it forks
//! and that execs at once (see [`release`]), whose room the guard makes
//! before the command starts.
//!
//! The parts: [`wire`] the messages both ways (encode and decode side by
//! side), [`handle`] rlock's side (the [`Guard`] handle), [`process`] the
//! guard's side (its loop), [`spawn`] how the guard starts the command,
//! [`release`] the release after rlock's death.

mod handle;
mod process;
mod release;
mod spawn;
mod wire;

pub(crate) use handle::{Guard, Launch};
pub(crate) use process::close_all_but;
pub(crate) use release::settings as release_settings;
pub use release::{RELEASER_ARG, Releaser, release_if_killed, releaser_main};
pub(crate) use wire::Report;

use super::tree;
use crate::{Error, Released, Result};

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The guard was killed (its socket closed). Reap it: from then on, every
/// process left of the command's tree is rlock's child or descendant (a
/// subreaper's orphans come to it, see [`tree::Subreaper`]). SIGKILL and
/// reap them all, then give the lock back with `release`; if one does not
/// die (uninterruptible sleep), releasing could let a rival in beside it,
/// so the lease ends within its TTL instead.
pub(super) fn guard_killed(
    guard: Guard,
    key: &str,
    release: impl FnOnce() -> Result<Released>,
) -> Error {
    drop(guard);
    let all_dead = tree::kill_all(std::process::id().cast_signed());
    tree::reap_children();
    let why = if all_dead {
        let _ = release();
        "the guard process was killed; rlock killed every process of the command \
         and released the lock"
    } else {
        "the guard process was killed; a process of the command did not die, so \
         the lock is left to expire with its TTL"
    };
    Error::Lost {
        key: key.into(),
        why: why.into(),
    }
}
