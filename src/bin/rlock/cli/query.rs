//! The subcommands that read: check, status, history, doctor, list.

use clap::Args;

use rlock::duration::Span;

use super::options::TokenOpt;

pub(crate) const CHECK_AFTER: &str = "\
The token is --token; without it, inside `rlock exec` of the lock (nested
execs of other locks included) the token RLOCK_HELD records for it, else
RLOCK_TOKEN: inside `rlock exec` only the key is needed. With -v, the lease time left and the fencing token go to
stderr; with --json, {\"held\":..,\"ttl_ms\":..,\"fence\":..} to stdout.

Examples:
  rlock exec deploy -- sh -c './build && rlock check deploy && ./publish'
  rlock check deploy --token \"$tok\" || exit 1";

#[derive(Debug, Args)]
pub(crate) struct Check {
    /// Lock name
    pub key: String,
    #[command(flatten)]
    pub token: TokenOpt,
    /// Print JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct Status {
    /// Lock name
    pub key: String,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

pub(crate) const HISTORY_AFTER: &str = "\
Events, oldest first, with the server's time (UTC): granted (waited W),
released (held D, exit code of exec's command), expired (a lease ran out
with nobody releasing it: a crashed or stopped holder), lost (an exec or
keeper found its lock gone, and why), timeout (a waiter gave up),
superseded (a --supersede waiter replaced by a newer one), broken (freed
by `rlock break`: by whom, why), overran (stopped by --max-hold). Each
lock keeps about --history-events events (default 200) for
--history-retention after its last one (default 7d). Command lines are
redacted as in `status`; tokens never show.

--all shows every lock's events (the locks in use and those with history
kept), merged in time order, the lock's name in each row; --since D only
the events of the last D (by this machine's clock); --follow keeps
printing new events as they happen, every second, like `tail -f` (of one
lock, or with --all of every lock).

--json prints one object per line: event, at (RFC 3339, UTC, ms), host,
pid, user, cmd, fence, and where they apply waited_ms, held_ms,
exit_code, by, reason, ci; with --all, lock too.

Examples:
  rlock history deploy
  rlock history --all --since 1h
  rlock history --all --follow --json
  rlock history deploy --limit 100 --json | jq -r 'select(.event==\"expired\")'";

#[derive(Debug, Args)]
pub(crate) struct History {
    /// Lock name
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub key: Option<String>,
    /// Every lock's events, in time order, each with its lock's name
    #[arg(long)]
    pub all: bool,
    /// Show the last N events (1 to 100000; with --all, of all locks)
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub limit: u32,
    /// Only events of the last D (e.g. 1h, 30m; by this machine's clock)
    #[arg(long, value_name = "D")]
    pub since: Option<Span>,
    /// Keep printing new events as they happen (until interrupted)
    #[arg(long)]
    pub follow: bool,
    /// Print one JSON object per line instead of text
    #[arg(long)]
    pub json: bool,
}

pub(crate) const DOCTOR_AFTER: &str = "\
Checks every server the connection flags name (one Redis, each RedLock
master, the master the Sentinels name, every Cluster master) for:
eviction (maxmemory-policy), memory headroom (used memory against
maxmemory: a warning under 10%, unsafe at the limit, where new locks are
refused), persistence (AOF, appendfsync) and the delay a restart needs, replication (role, replicas, --min-replicas,
min-replicas-to-write), Sentinel and Cluster topology, the clock (offset
from the server's TIME, round trip) against rlock's drift margin,
permissions (ACL DRYRUN or redis.acl_check_cmd: nothing is run on a lock
key), the Redis version (6.2 or newer) and, for RedLock, that the masters
are distinct servers. One line per finding: severity (ok, info, warn,
unsafe), server, check, what was found, and what to change. Some checks
need CONFIG GET: run doctor as an admin user for all of them.

With --role job|operator|monitor, the permissions are checked against
that role's ACL line (docs/deployments.md#roles) instead: too little
(which rlock command would fail, for want of which permission) and too
much (a job that can break, a monitor that can write) are both unsafe.

Exit codes: 0 nothing unsafe (warnings allowed), 78 something unsafe
(with --role: the user has too little or too much for it), 69 no server
answered, 64 bad usage.

Examples:
  rlock doctor
  rlock --url redis://a:6379,redis://b:6379,redis://c:6379 doctor --ttl 10m
  rlock --sentinel mymaster --url redis://s1:26379 doctor --json
  RLOCK_URL=redis://rlock-job:secret@redis:6379 rlock doctor --role job";

#[derive(Debug, Args)]
pub(crate) struct Doctor {
    /// The longest TTL (or --min-hold) your locks use: the restart delay
    /// and the clock margin are worked out for it
    #[arg(long, default_value = "30s", value_name = "D")]
    pub ttl: Span,
    /// Check that this Redis user has exactly what ROLE needs, no more
    /// and no less (the ACL lines of docs/deployments.md#roles), instead of
    /// every permission rlock can use
    #[arg(long, value_name = "ROLE", value_parser = ["job", "operator", "monitor"])]
    pub role: Option<String>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct List {
    /// Glob over lock names (Redis MATCH syntax)
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Print JSON (one array) instead of text
    #[arg(long)]
    pub json: bool,
}
