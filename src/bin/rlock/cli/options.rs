//! Option groups more than one subcommand takes: the lock's (acquire,
//! exec, rw), the command's (exec, rw), the owner token (release, renew,
//! check).

use clap::Args;

use rlock::duration::{Seconds, Span};

// The defaults of the options below, which `fast.rs` fills in too.
pub(crate) const DEFAULT_TTL: &str = "30s";
pub(crate) const DEFAULT_PRIORITY: i32 = 0;
pub(crate) const DEFAULT_CONFLICT_EXIT_CODE: u8 = 75;
pub(crate) const DEFAULT_LIMIT: u32 = 1;
pub(crate) const DEFAULT_ON_LOST: OnLost = OnLost::Term;
pub(crate) const DEFAULT_GRACE: &str = "10s";

#[derive(Debug, Args)]
pub(crate) struct LockOpts {
    /// Lease time; the lock frees itself this long after the last renewal
    #[arg(long, default_value = DEFAULT_TTL, value_name = "D", help_heading = "Lock")]
    pub ttl: Span,

    /// Wait at most this long for a busy lock (default: forever); a bare
    /// number is seconds, as in flock(1) (`-w 0.5`; `0`: do not wait)
    #[arg(
        short,
        long,
        visible_alias = "timeout",
        value_name = "D",
        help_heading = "Lock"
    )]
    pub wait: Option<Seconds>,

    /// Fail at once if the lock is busy (wins over -w, as in flock)
    #[arg(
        short = 'n',
        long,
        visible_aliases = ["nb", "nonblock"],
        help_heading = "Lock"
    )]
    pub no_wait: bool,

    /// Keep the lock taken until at least this long after the grant, even if
    /// released sooner (exec: if the command succeeded); the lease just ends
    /// later on the server, nothing stays running
    #[arg(long, value_name = "D", help_heading = "Lock")]
    pub min_hold: Option<Span>,

    /// CI "newest wins" queue: while waiting, a newer --supersede waiter of
    /// the same lock replaces this one, which then exits with the -E code
    /// ("superseded by host H pid P"); joining, this one replaces the older.
    /// Holders are never touched. Everybody else waits in the queue as
    /// usual. Not with -n or -w 0, nor RedLock (several --url)
    #[arg(long, conflicts_with = "no_wait", help_heading = "Lock")]
    pub supersede: bool,

    /// Wait-queue priority, an integer from -1000 to 1000 (default 0):
    /// waiters with a higher one are served first, equal ones in arrival
    /// order. A holder is never pre-empted, and a steady stream of higher
    /// priorities keeps a lower one waiting (bound it with -w). With several
    /// keys, the same for each. Not with RedLock (several --url: no queue)
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_PRIORITY,
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(i32).range(-1000..=1000),
        help_heading = "Lock"
    )]
    pub priority: i32,

    /// Exit code when the lock is busy, the wait times out, or a newer
    /// --supersede waiter replaced this one
    #[arg(
        short = 'E',
        long,
        default_value_t = DEFAULT_CONFLICT_EXIT_CODE,
        value_name = "CODE",
        help_heading = "Lock"
    )]
    pub conflict_exit_code: u8,
}

#[derive(Debug, Args)]
pub(crate) struct Slots {
    /// Let up to N holders in at once (counting semaphore)
    #[arg(long, default_value_t = DEFAULT_LIMIT, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000), help_heading = "Lock")]
    pub limit: u32,
}

#[derive(Debug, Args)]
pub(crate) struct RunOpts {
    /// What to do with the command if the lock is lost while it runs
    #[arg(
        long,
        value_enum,
        default_value_t = DEFAULT_ON_LOST,
        value_name = "ACTION",
        help_heading = "Command"
    )]
    pub on_lost: OnLost,
    /// When the command exits, end what it left running (SIGTERM, then
    /// SIGKILL after --grace) instead of holding the lock until it exits
    #[arg(long, help_heading = "Command")]
    pub kill_leftovers: bool,
    /// Time the command gets to exit after SIGTERM before SIGKILL
    #[arg(
        long,
        default_value = DEFAULT_GRACE,
        value_name = "D",
        help_heading = "Command"
    )]
    pub grace: Span,
    /// Hold the lock at most this long: then the command (and what it
    /// started) gets SIGTERM, SIGKILL after --grace, the lock is released,
    /// and rlock exits 124, as timeout(1) does
    #[arg(long, value_name = "D", help_heading = "Command")]
    pub max_hold: Option<Span>,
}

/// What to do with the command if the lock is lost while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnLost {
    /// SIGTERM to every process of the command, SIGKILL after --grace
    Term,
    /// SIGKILL to every process of the command at once
    Kill,
    /// Let the command, and what it started, run on; only report the loss
    Ignore,
}

/// Its name on the command line (for clap's default).
impl std::fmt::Display for OnLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum;
        match self.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => Ok(()),
        }
    }
}

impl From<OnLost> for rlock::exec::OnLost {
    fn from(o: OnLost) -> Self {
        match o {
            OnLost::Term => rlock::exec::OnLost::Term,
            OnLost::Kill => rlock::exec::OnLost::Kill,
            OnLost::Ignore => rlock::exec::OnLost::Ignore,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct TokenOpt {
    /// Owner token printed by `rlock acquire`. Without it: inside `rlock
    /// exec` of the lock (at any depth), the token RLOCK_HELD records for
    /// it; else $RLOCK_TOKEN
    // Not `env = "RLOCK_TOKEN"`: RLOCK_HELD comes before it (see
    // rlock::exec::owner_token), so clap must not fill it in.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}
