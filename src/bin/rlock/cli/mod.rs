//! The command-line definition (clap's derive), part of the binary: the
//! library does not depend on clap. One file per subcommand or family, as
//! `cmd/` has one per subcommand: each holds its arguments and the help
//! text people read beside them (no logic). `global.rs` has the options
//! every subcommand takes and the top-level help, `options.rs` the groups
//! several share. The man pages and completions are rendered from this
//! same definition by a unit test (`generate.rs`).

use clap::{Parser, Subcommand};

mod acquire;
mod breaking;
mod exec;
#[cfg(test)]
mod generate;
mod global;
mod metrics;
mod options;
mod query;
mod release;
mod rw;
mod top;

pub(crate) use acquire::{Acquire, KeepOpts};
pub(crate) use breaking::Break;
pub(crate) use exec::Exec;
pub(crate) use global::Global;
pub(crate) use metrics::Metrics;
pub(crate) use options::{LockOpts, OnLost, RunOpts};
pub(crate) use query::{Check, Doctor, History, List, Status};
pub(crate) use release::{Release, Renew};
pub(crate) use rw::{Rw, RwMode};
pub(crate) use top::Top;

/// Redis-backed distributed locks for shell scripts, cron jobs and CI.
#[derive(Debug, Parser)]
#[command(
    name = "rlock",
    version,
    about,
    after_help = global::short_help(),
    after_long_help = global::concat_help()
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Take the lock and print its owner token on stdout (and nothing else)
    #[command(after_help = acquire::AFTER_HELP)]
    Acquire(Acquire),

    /// Run a command while holding the lock, and exit with its status
    #[command(after_help = exec::AFTER_HELP)]
    Exec(Exec),

    /// Read-write lock: many readers at once, or one writer
    #[command(after_help = rw::AFTER_HELP)]
    Rw(Rw),

    /// Release a lock held by a token; releasing a free lock is harmless
    Release(Release),

    /// Extend a held lock's TTL; fails if the token no longer owns it
    Renew(Renew),

    /// Exit 0 if a token still holds the lock, 79 if it holds it no more, 77
    /// if another owner holds it: for scripts about to do something
    /// irreversible
    #[command(after_help = query::CHECK_AFTER)]
    Check(Check),

    /// Show who holds a lock, since when, TTL left, fencing counter, waiters
    Status(Status),

    /// Show a lock's history: who got it, for how long, how each hold ended
    #[command(after_help = query::HISTORY_AFTER)]
    History(History),

    /// End a stuck lock's hold(s) by force; the next waiter gets it once they stopped
    #[command(after_help = breaking::AFTER_HELP)]
    Break(Break),

    /// Check the Redis deployment for settings that silently break locks
    #[command(after_help = query::DOCTOR_AFTER)]
    Doctor(Doctor),

    /// List the locks that are held or waited for
    List(List),

    /// A live view of the locks in use, most contended first (like top)
    #[command(after_help = top::AFTER_HELP)]
    Top(Top),

    /// Print Prometheus metrics for the locks in use (text format 0.0.4)
    #[command(after_help = metrics::AFTER_HELP)]
    Metrics(Metrics),
}

impl Command {
    /// The lock name the command works on, if it has one.
    pub(crate) fn key(&self) -> Option<&str> {
        match self {
            Command::Acquire(Acquire { key, .. })
            | Command::Exec(Exec { key, .. })
            | Command::Rw(Rw { key, .. })
            | Command::Release(Release { key, .. })
            | Command::Renew(Renew { key, .. })
            | Command::Check(Check { key, .. })
            | Command::Status(Status { key, .. })
            | Command::Break(Break { key, .. }) => Some(key),
            Command::History(History { key, .. }) => key.as_deref(),
            Command::List(_) | Command::Doctor(_) | Command::Top(_) | Command::Metrics(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
