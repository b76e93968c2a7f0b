//! `rlock acquire KEY --keep`: a lock that lives exactly as long as a
//! process (the calling script), as a flock(1) lock lives with its shell's
//! descriptor.
//!
//! # The keeper
//!
//! After the grant, rlock starts a small *keeper* process and exits; the
//! keeper renews the lease every TTL/3 on one connection of its own for as
//! long as the *watched* process lives, and releases every hold of the
//! token (re-entries included) the moment it exits, however it dies
//! (SIGKILL included).
//!
//! - It is started with fork+exec of the program itself (the binary's
//!   hidden `__keep` subcommand, see [`spawn`]), not a bare fork: under
//!   RedLock, requests to a slow master run on detached threads that may
//!   outlive the call (see `quorum.rs`), and a forked child of a
//!   multi-threaded process may find a lock held forever. The settings,
//!   the token included, go through a pipe on its stdin, never argv; the
//!   watched process's pidfd and the release socket are inherited.
//! - It is detached from everything of the caller: a session of its own
//!   (`setsid`: neither Ctrl-C nor a hangup of the script's terminal, nor a
//!   kill of its process group, reaches it; the script's death does, which
//!   is the point), stdio on /dev/null (so `tok=$(rlock acquire k --keep)`
//!   returns at once: the keeper holds no end of the pipe), every other
//!   descriptor closed, cwd `/`, named `rlock-keeper`.
//! - It waits in one `poll` on the watched process's pidfd (readable the
//!   moment it exits), the release socket and a signalfd, with a timeout at
//!   the next renewal: no busy loop. Without pidfd_open (Linux < 5.3) it
//!   checks the process with `kill(pid, 0)` and its start time every 250ms.
//! - SIGTERM, SIGINT, SIGHUP or SIGQUIT to the keeper: it releases and
//!   exits (a systemd stop of the unit, an admin's kill).
//!
//! # Which process is watched
//!
//! By default rlock's parent: the shell that runs the script. A `$(...)`
//! makes the shell fork a subshell for the command substitution; bash and
//! dash usually exec rlock directly in it (so the parent is the script
//! itself), but a subshell that stays (`$(rlock acquire k --keep; echo)`)
//! would be the parent and exit at once. So when the parent runs the same
//! executable with the same command line as the grandparent, and (where
//! /proc shows them) has the same stack and argument addresses — a forked
//! copy, not a new exec of the same program, which address space
//! randomization places elsewhere — and the grandparent reads our stdout
//! (holds the read end of the `$(...)` pipe; a script whose own stdout is
//! a pipe holds the write end of the one a subshell's rlock inherits), the
//! grandparent is watched instead. A `( ... )`
//! subshell is a forked copy too, but nobody above reads its output
//! through a pipe it holds: it is watched itself, as flock(1)'s lock in
//! `( flock 9; ... ) 9>f` ends with the subshell.
//! `--keep-while PID` names the process outright.
//!
//! # Release, and loss
//!
//! `rlock release KEY --token T` on the same host tells the keeper first,
//! over an abstract unix socket named after a hash of the token (the token
//! itself never leaves the process): `release LOCK` (its Redis key)
//! makes the keeper of that lock stop renewing and answer "ok" (a keeper
//! of another lock does not answer: the token names one lock); then the
//! release runs; then "released" ends the keeper quietly, or "held N" (N
//! holds remain) or "held" (the release failed) sets it renewing again,
//! unless its own grant was a re-entry and fewer than its grant's count
//! remain: then its hold was the one given back, and it ends quietly too.
//! Only the keeper's own user (or root) is heard.
//! A release from another host (or network namespace) cannot reach it: the
//! keeper sees the lock gone at its next renewal and treats it as a loss.
//!
//! On a loss (a renewal finds the lock gone or taken, or no renewal was
//! confirmed before the lease's validity ended, e.g. Redis unreachable)
//! the keeper writes a record `P{K}:lost` (JSON: host, pid, when, why,
//! action; it expires after an hour) that `rlock status` shows, applies
//! `--on-lost` to the watched process and every process it started (TERM,
//! KILL, or nothing), and exits. It never re-acquires.

mod caller;
mod guard;
mod keeper;
mod protocol;

use std::time::Duration;

use crate::exec::OnLost;
pub use crate::lock::LostRecord;
pub use caller::Watched;
pub use keeper::{Started, keeper_main, record_loss, spawn};
pub use protocol::{adopt, release};

/// The binary's first argument that runs [`keeper_main`] (internal).
pub const KEEPER_ARG: &str = "__keep";

/// How long a loss record stays in Redis.
pub const LOST_RECORD_TTL: Duration = Duration::from_secs(3600);

/// How the keeper keeps and what it does on a loss.
#[derive(Debug)]
pub struct Keep {
    /// The process whose life the lease lasts.
    pub watched: Watched,
    /// What to do to it if the lock is lost.
    pub on_lost: OnLost,
    /// Under [`OnLost::Term`], how long it has to exit after SIGTERM
    /// before SIGKILL (never later than the lease allows).
    pub grace: Duration,
}
