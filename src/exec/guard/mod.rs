//! exec's guard: the hold core's one guard (`hold::guard`, whose module
//! doc says what every guard does) with the command's tree as its reach.
//!
//! rlock forks it first thing in [`super::run`], before any thread exists.
//! Besides what every guard does, exec's:
//! - sits in a process group of its own and ignores job-control and
//!   terminal signals, so neither Ctrl-Z nor a kill of rlock's job (a CI
//!   runner killing the process group) stops or kills it with rlock;
//! - is PR_SET_CHILD_SUBREAPER, and starts the command (in a new process
//!   group, the terminal's foreground group in interactive use), so every
//!   descendant stays in its tree until it exits (see [`super::tree`]);
//! - does not start the command if the kill deadline passed before it read
//!   the go (it was stopped or starved meanwhile);
//! - on rlock's death (its end closes without the page's "finished"),
//!   hands the terminal back to rlock's job, SIGKILLs the tree, and once no
//!   process of it is left gives back rlock's holds if rlock sent it how
//!   (see `hold::guard::release`);
//! - reaps everything, reports the command's start, stops and exit, and
//!   reports "empty" once no descendant is left, then stays until rlock's
//!   end closes: rlock releases after that report, and should it die
//!   before (closed without "finished"), the guard gives its holds back.
//!
//! It reads the environment only through the C library's `environ` (no
//! lock): in the binary it is forked while rlock has one thread; a library
//! caller with other threads relies on glibc's fork-safe malloc for the few
//! allocations it makes. The releaser's room is made before the command
//! starts.
//!
//! The parts: [`handle`] rlock's side (the [`Guard`] handle), [`reach`]
//! the guard's set-up and its tree, [`spawn`] how the guard starts the
//! command; the messages are `hold::guard::wire`.

mod handle;
mod reach;
mod spawn;

pub use crate::hold::guard::release::{RELEASER_ARG, Releaser, release_if_killed, releaser_main};
pub(crate) use crate::hold::guard::release::{settings as release_settings, waiting_settings};
pub(crate) use crate::hold::guard::wire::Report;
pub(crate) use handle::{Guard, Launch};

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
