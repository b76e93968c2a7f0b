//! `rlock acquire`: take locks and print their tokens; `--keep` holds them
//! while the calling script lives.

use clap::Args;

use rlock::duration::Span;

use super::options::{LockOpts, OnLost, Slots};

pub(crate) const AFTER_HELP: &str = "\
With --keep, a small keeper process (\"rlock-keeper\") renews the lease every
TTL/3 while the calling process lives -- the shell running the script, also
from inside $(...) or through a wrapper such as timeout(1) -- or the process
--keep-while names, or anything it started after the grant runs (background
jobs, re-parented children: found by walking /proc), and releases the lock
the moment the last of them exits, however it dies: as flock(1)'s lock
lives with every copy of its descriptor. Refused (64) where no such script can be told: rlock's
output piped inside a subshell, an orphaned rlock, a script of another user,
a parent that is neither a shell nor a script interpreter (find -exec,
xargs), a `sh -c` whose last command is rlock; lock the whole script instead:
  [ -n \"$RLOCK_HELD\" ] || exec rlock exec KEY -- \"$0\" \"$@\"
`rlock release` of the token (on the same host) ends the keeper too. If the
lock is lost (deleted, taken over, or Redis unreachable with TTL/3 of the
lease left), the keeper applies --on-lost to the watched process and all
it started since the grant (term: SIGTERM, SIGKILL after --grace), and
`rlock status` shows the loss for an hour; a guard process does the same if
the keeper is killed or stopped. SIGTERM to the keeper stops the script
first, then releases. With RLOCK_TOKEN exported, a later `rlock exec` or
`rlock acquire` of the same lock in the script re-enters instead of waiting
for the script itself.

Examples:
  tok=$(rlock acquire deploy --ttl 10m)
  rlock acquire -w 30s nightly
  rlock acquire -n deploy --keep >/dev/null || exit 0    # held until the script and its jobs end
  export RLOCK_TOKEN=$(rlock acquire deploy --keep)
  rlock acquire staging-db staging-app    # both (no deadlock): one token per line";

#[derive(Debug, Args)]
pub(crate) struct Acquire {
    /// Lock name
    pub key: String,
    /// More locks to take together with the first, in one canonical
    /// order whatever order they are named in (at most 16 in all): one
    /// token per line on stdout, in the order named
    #[arg(value_name = "KEY")]
    pub more: Vec<String>,
    #[command(flatten)]
    pub lock: LockOpts,
    #[command(flatten)]
    pub slots: Slots,
    #[command(flatten)]
    pub keep: KeepOpts,
}

/// `acquire --keep`: a lock held as long as a process lives.
#[derive(Debug, Args)]
pub(crate) struct KeepOpts {
    /// Leave a keeper process that renews the lock while the calling
    /// process (the script) lives and releases it when that exits
    #[arg(long, help_heading = "Keep")]
    pub keep: bool,
    /// With --keep: keep the lock while process PID lives instead
    #[arg(long, value_name = "PID", requires = "keep", value_parser = clap::value_parser!(i32).range(1..), help_heading = "Keep")]
    pub keep_while: Option<i32>,
    /// With --keep: what the keeper does to the watched process (and what
    /// it started) if the lock is lost [default: term]
    #[arg(
        long,
        value_enum,
        value_name = "ACTION",
        requires = "keep",
        help_heading = "Keep"
    )]
    pub on_lost: Option<OnLost>,
    /// With --keep and --on-lost term: time the script gets to exit after
    /// SIGTERM before SIGKILL (never later than the lease allows) [default: 10s]
    #[arg(long, value_name = "D", requires = "keep", help_heading = "Keep")]
    pub grace: Option<Span>,
    /// With --keep: keep the lock at most this long; then the script (and
    /// what it started) gets SIGTERM, SIGKILL after --grace, and the lock is
    /// released
    #[arg(long, value_name = "D", requires = "keep", help_heading = "Keep")]
    pub max_hold: Option<Span>,
}
