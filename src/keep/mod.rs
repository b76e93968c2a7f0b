//! `rlock acquire KEY --keep`: a lock that lives as long as a process (the
//! calling script) or anything it started after the grant, as a flock(1)
//! lock lives as long as any copy of its descriptor.
//!
//! # The keeper
//!
//! After the grant, rlock starts a small *keeper* process and exits; the
//! keeper renews the lease every TTL/3 on one connection of its own for as
//! long as the *watched* process or any process of its *cover* lives (see
//! "What the lock covers"), and gives back its holds (see "Whose holds")
//! once the last of them exits, however it dies (SIGKILL included).
//!
//! - It is started with fork+exec of the program itself (the binary's
//!   hidden `__keep` subcommand, see [`spawn`]), not a bare fork: under
//!   RedLock, requests to a slow master run on detached threads that may
//!   outlive the call (see `src/lock/quorum/`), and a forked child of a
//!   multi-threaded process may find a lock held forever. The settings,
//!   the token included, go through a pipe on its stdin, never argv; the
//!   watched process's pidfd and the release socket are inherited.
//! - It is detached from everything of the caller: a session of its own
//!   (`setsid`: neither Ctrl-C nor a hangup of the script's terminal, nor a
//!   kill of its process group, reaches it; the script's death does, which
//!   is the point), stdio on /dev/null (so `tok=$(rlock acquire k --keep)`
//!   returns at once: the keeper holds no end of the pipe), every other
//!   descriptor closed, cwd `/`, named `rlock-keeper`. An enclosing `rlock
//!   exec` leaves it out of its tree (`exec::tree::is_keeper`): no signal
//!   it passes on reaches the keeper, and it neither kills nor waits for it.
//! - It waits in one `poll` on the watched process's pidfd (readable the
//!   moment it exits), the release socket and a signalfd, with a timeout at
//!   the next renewal: no busy loop. Without pidfd_open (Linux < 5.3) it
//!   checks the process with `kill(pid, 0)` and its start time every 250ms.
//! - SIGTERM, SIGINT, SIGHUP or SIGQUIT to the keeper (a systemd stop, an
//!   admin's kill): it stops the script as on a loss, and releases once the
//!   script is gone (`hold::Event::Stop`).
//! - What to do and when is not decided here: the keeper's loop is a
//!   driver of the hold core (`crate::hold`, `Holder::Keep`), as exec's
//!   supervisor is. It turns the pidfd and the cover's walks (everything
//!   gone: `Event::Empty`), the renewals' results, the release socket
//!   (`Event::Releasing`, `Event::ReleaseEnded`), its stop signals and the
//!   clock into the core's events, carries out its actions (`Terminate`,
//!   `Kill`: `Cover::stop`; `Deadline`: the guard's; `Report`:
//!   the loss record), and once the core finishes does with the lock what
//!   `hold::State::end` says: release, give a broken hold back, or leave
//!   it to its lease.
//!
//! # Which process is watched ([`Watched::caller`])
//!
//! By default rlock's parent: the shell that runs the script, looked for
//! through wrappers (a parent whose command line ends with ours, as
//! `timeout 60 rlock ...` has). A `$(...)` makes the shell fork a subshell
//! for the command substitution; bash and dash usually exec rlock directly
//! in it (so the parent is the script itself), but a subshell that stays
//! (`$(rlock acquire k --keep; echo)`) would be the parent and exit at
//! once. So when the parent runs the same executable with the same command
//! line as the grandparent, and (where /proc shows them) has the same stack
//! and argument addresses — a forked copy, not a new exec of the same
//! program, which address space randomization places elsewhere — and the
//! grandparent reads our stdout (holds the read end of the `$(...)` pipe; a
//! script whose own stdout is a pipe holds the write end of the one a
//! subshell's rlock inherits), the grandparent is watched instead. A `(
//! ... )` subshell is a forked copy too, but nobody above reads its output
//! through a pipe it holds: it is watched itself, as flock(1)'s lock in `(
//! flock 9; ... ) 9>f` ends with the subshell. Refused (`detect::usable`;
//! each refusal names the whole-script idiom, `exec rlock exec`): a
//! subshell whose pipeline reads our output (`$(rlock ... | tail -n1)`:
//! it ends with the pipeline); an orphan (our parent is in another
//! session, or is pid 1 of another session: we were re-parented to init
//! or a subreaper; a container's pid 1 that is the script shares its
//! session); a process of another user (kill(2) could not reach it); a
//! program that is neither a shell nor a script interpreter (`find
//! -exec`, `xargs`, a subreaper: it runs a command and exits or moves
//! on); a shell whose `-c` string's last command is this rlock (it exits
//! as we do; `detect/shell.rs`); exec's guard. And the parent must still
//! be ours once the pidfd is open (`getppid` again). `--keep-while PID`
//! names the process outright (not init, not another user's; inside
//! `rlock exec`, one of the exec's command's processes).
//!
//! # What the lock covers (`cover.rs`)
//!
//! The watched process and every process started after the grant
//! (`caller::Grant::before`) below it or below a covered one, kept as
//! (pid, start time) pairs after they are re-parented; and, where the
//! watched process leads its own process group, the members of that group
//! in its session and of its uid started after the grant (they were made
//! in it by its members, even if re-parented before a walk saw them). The
//! keeper walks /proc every `cover::WALK_EVERY` (0.1 s) from the covered
//! processes down, and over every process at each renewal, when the
//! watched process exits and before it gives the lock up. What it cannot
//! see (a double fork out of the group completed between two walks) is
//! listed in `cover.rs` and docs/guide.md.
//!
//! # Whose holds
//!
//! The keeper owns its grant and the holds of re-entries in its script that
//! tell it so (`acquire`, `acquire --keep`: "adopt LOCK" on its socket), and
//! gives back exactly those. A re-entered `rlock exec` (the script's `rlock
//! exec K -- job &`) owns its own hold, renews it and gives it back when its
//! command is done: were the keeper to give back every hold of the token,
//! as it once did, the lock would be free under the running job — two
//! holders.
//!
//! # Release, and loss
//!
//! `rlock release KEY --token T` on the same host tells the keeper first,
//! over an abstract unix socket named after a hash of the token (the token
//! itself never leaves the process): `release LOCK` (its Redis key)
//! makes the keeper of that lock stop renewing and answer "ok" (a keeper
//! of another lock does not answer: the token names one lock); then the
//! release runs; then "released" ends the keeper quietly; "held N" (N
//! holds remain) means one of the keeper's own was given back (a script
//! releases its own holds), so it ends quietly once it has none left, else
//! renews on; "held" (the release failed) sets it renewing again. Only the
//! keeper's own user (or root) is heard. A release from another host (or
//! network namespace) cannot reach it: the keeper sees the lock gone at its
//! next renewal and treats it as a loss.
//!
//! On a loss (a renewal finds the lock gone or taken, or no renewal was
//! confirmed with TTL/3 of the lease left, e.g. Redis unreachable) the
//! keeper applies `--on-lost` to the watched process and its cover
//! (`Cover::stop`; `Grant::before`: a later start tick, or the grant's
//! tick and a newer pid; nothing else is ever signalled, and each process
//! through a pidfd checked against its start time): TERM with CONT, then
//! KILL after `--grace` (never later than the lease's kill point, as
//! exec's); KILL; or nothing. It writes a
//! record `P{K}:lost` (JSON: host, pid, when, why, action; it expires after
//! an hour) that `rlock status` shows, and exits. It never re-acquires.
//!
//! # Two holders: what prevents each path
//!
//! - The script outlives the lease because the keeper stopped renewing:
//!   killed or stopped, its guard (see `guard.rs`) stops the script before
//!   the lease ends; unreachable Redis, the keeper itself does at TTL/3
//!   before the end; both killed together is the one uncovered case
//!   (docs/guide.md, "Limits").
//! - The keeper releases while the script, or something it started, still
//!   works: only when the watched process and its whole cover are gone (a
//!   full walk of /proc confirms it first), on the script's own release,
//!   or after stopping all of them (the hold core's `Stop`, loss and
//!   `--max-hold` decisions: a stop, a loss, a break, `--max-hold`); one
//!   that outlives its SIGKILL by a second is left to the lease
//!   (`hold::End::LeaveToLease`), never released.
//! - A process the script started outlives the stop: the keeper walks
//!   again while it waits and signals what it finds; killed or stopped,
//!   its guard signals the cover the keeper last published on their
//!   shared board plus what its own walk finds, before the lease ends.
//! - The keeper gives back a hold it does not own: see "Whose holds".
//! - The keeper watches the wrong process, one that ends first: refused
//!   where it cannot tell (see "Which process is watched").

mod caller;
mod cover;
mod detect;
mod guard;
mod keeper;
mod loss;
mod protocol;
mod spawn;

use std::time::Duration;

use crate::exec::OnLost;
pub use crate::lock::LostRecord;
pub use caller::{Watched, script_pid};
pub use loss::record_loss;
pub use protocol::{adopt, release};
pub use spawn::{Started, keeper_main, spawn};

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
    /// How much history the keeper's calls keep (its renewals and its
    /// release write events, see `rlock history`).
    pub history: crate::lock::HistoryLimits,
    /// Keep the lock at most this long from the grant: then the watched
    /// process and what it started get SIGTERM (SIGKILL after `grace`),
    /// and the lock is released.
    pub max_hold: Option<Duration>,
}
