//! The options every subcommand takes (connection, history, verbosity)
//! and the top-level help: environment, exit codes, how rlock works.

use clap::Args;

use rlock::duration::Span;

/// The environment variables every subcommand reads (also in each
/// subcommand's man page).
pub(crate) const ENVIRONMENT: &str = "\
Environment:
  RLOCK_URL            Redis URL(s), comma-separated (like --url)
  RLOCK_PASSWORD       Redis password; keeps the secret off argv
  RLOCK_PREFIX         key prefix (like --prefix)
  RLOCK_TOKEN          owner token for release/renew/check without --token,
                       after the one RLOCK_HELD records for the lock inside
                       `rlock exec`; exec and acquire re-enter a lock it holds
  RLOCK_CLUSTER        1: the URLs are Redis Cluster seed nodes (like --cluster)
  RLOCK_SENTINEL       master name: the URLs are Sentinels (like --sentinel)
  RLOCK_MIN_REPLICAS   like --min-replicas
  RLOCK_HISTORY_EVENTS, RLOCK_HISTORY_RETENTION   like --history-events,
                       --history-retention
  RLOCK_TLS_CA, RLOCK_TLS_CERT, RLOCK_TLS_KEY   like --tls-ca, --tls-cert, --tls-key
";

const AFTER_HELP: &str = "\
Exit codes:
  0    success (exec: the command's own exit code is passed through)
  1    break: answered no, or --holder matched no holder; nothing broken
  64   bad usage or input (also: key holds foreign data, --limit or lock
       kind mismatch, read-to-write upgrade)
  69   Redis unreachable, not answering, or refusing us (auth; a new lock
       or waiter while its memory is above maxmemory)
  70   unexpected reply from Redis, or stdout cannot be written
  75   busy (--no-wait), wait timed out, or superseded (--supersede);
       change with -E
  77   the token does not own this lock (check: another owner holds it),
       or the Redis user's ACL refused it (NOPERM; break without the
       operator role: docs/deployments.md#roles)
  78   doctor: something unsafe was found
  79   the lock was lost (expired or deleted while held; check: the token
       holds it no more)
  124  exec, rw: the command ran past --max-hold and was stopped
  126  exec: the command could not be executed
  127  exec: the command was not found
  128+N  a signal N ended the wait, or killed exec's command (130: SIGINT)

Examples:
  tok=$(rlock acquire deploy --ttl 10m)
  ...; rlock release deploy --token \"$tok\"
  rlock exec -n -E 0 nightly -- ./report.sh            # cron: skip quietly if busy
  rlock acquire -n deploy --keep >/dev/null || exit 0   # until the script and its jobs end
  rlock status market --json";

const AFTER_LONG_HELP: &str = "\
Waiting:
  Waiters queue in Redis by --priority, then in arrival order (FIFO), and
  block on a wake-up list; a release wakes the next in line. Each sleep is
  bounded by the holder's TTL (a crashed holder costs at most its TTL) and
  by a 5s heartbeat. A waiter woken for its turn has 800ms to claim it, so
  one that died while queued holds up the next in line by at most that,
  once the lock is free (server clock); one that times out or is
  interrupted leaves the queue at
  once.

Signals (exec):
  INT TERM HUP QUIT USR1 USR2 sent to rlock are passed on to every process of
  the command. After a passed-on INT/TERM/HUP/QUIT the command has --grace to
  exit, then gets SIGKILL; a second INT or TERM sends SIGKILL at once (one
  line says which). While
  waiting for a lock, INT/TERM/HUP/QUIT end the wait with exit 128+N and leave
  nothing behind. rlock changes no signal disposition: the command starts
  with the ones rlock was started with, and a signal ignored then (nohup, a
  script's `cmd &`) is neither passed on nor ends a wait.

The guard (exec):
  The command runs in a process group of its own under a small guard
  process (\"rl-guard\", which `pkill rlock` leaves alone) that rlock forks
  first. The guard is a subreaper: whatever the command starts stays in its
  tree even if it leaves the group or daemonizes. It holds a CLOCK_BOOTTIME
  timer at the kill deadline (the lease's validity deadline minus TTL/20, at
  most 250ms), moved on by each confirmed renewal, and SIGKILLs the whole
  tree when it fires, or when rlock dies. So the command never outlives the
  lease, even if rlock is killed, stopped (SIGSTOP, Ctrl-Z), starved,
  blocked on a full stderr, or the machine was suspended.
  Leftovers: the lock is held, and renewed, until every process the command
  started has exited, as flock(1) holds it while any holder of its file
  descriptor lives; --kill-leftovers ends them (TERM to each, those forked
  meanwhile too; KILL after --grace) when the command exits instead. The
  exit code is the command's.
  Interactive use (rlock in the foreground of its terminal): the command's
  group becomes the terminal's foreground group, as a shell starts a job.
  Ctrl-C and Ctrl-Z reach the command; when it stops, rlock stops its own
  job too, and on fg/bg continues the command, unless the lease ran out
  meanwhile (a stopped job renews nothing: the guard kills the command).

Lock loss (exec):
  The lease is trusted until request sent + TTL - drift (1% + 2ms), on
  CLOCK_BOOTTIME, moved on by each confirmed renewal (every TTL/3). It is
  lost when a renewal finds it gone or owned by another, or when no renewal
  is confirmed with less than TTL/3 of validity left. Then --on-lost term
  sends SIGTERM to every process of the command, and SIGKILL after --grace
  but never after the kill deadline; kill sends SIGKILL at once; ignore lets
  the command and everything it started finish. Under term and kill, what
  the command leaves running when it exits after the loss is SIGKILLed then;
  under ignore nothing is (--kill-leftovers still applies). rlock never
  re-acquires a lost lock, says so in one line, and exits 79 once no
  process of the command is left; its release then waits no longer than
  the lease has left. A release that finds the lock gone is a loss too,
  unless Redis answered it only after
  the lease's end and every process of the command had exited before that
  end: then the exit code is the command's, and one line says the release
  came late. Renewals never shorten a lease. A grant whose reply arrives after its validity deadline
  is given back, never used.

Keys:
  Lock K under prefix P uses P{K} (hash), P{K}:h, P{K}:q, P{K}:qa, P{K}:qw (zsets),
  P{K}:w:<token> (lists), P{K}:r:<request> (a call's answer, for resends;
  expires), P{K}:lost (the last loss an `acquire --keep` keeper saw, shown
  by status; expires after 1h) and P{K}:fence (the last fencing value;
  expires once its grant's TTL is over and the server's clock passed it).
  The {K} hash tag keeps them in one Redis Cluster slot. Data rlock did not
  write at any of them is refused (exit 64) and left as it is.";

// The defaults of the options below, which `fast.rs` fills in too.
pub(crate) const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
pub(crate) const DEFAULT_MIN_REPLICAS: u32 = 0;
pub(crate) const DEFAULT_PREFIX: &str = "rlock:";
pub(crate) const DEFAULT_CONNECT_TIMEOUT: &str = "2s";
pub(crate) const DEFAULT_HISTORY_EVENTS: u32 = 200;
pub(crate) const DEFAULT_HISTORY_RETENTION: &str = "7d";

#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub(crate) struct Global {
    /// Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or
    /// unix:///path; several (repeated, or comma-separated) mean RedLock
    /// over independent masters
    #[arg(
        long,
        global = true,
        env = "RLOCK_URL",
        value_delimiter = ',',
        value_name = "URL",
        default_value = DEFAULT_URL,
        hide_env_values = true
    )]
    pub url: Vec<String>,

    /// The URLs are seed nodes of one Redis Cluster (not RedLock masters)
    #[arg(long, global = true, env = "RLOCK_CLUSTER", value_parser = clap::builder::FalseyValueParser::new())]
    pub cluster: bool,

    /// The URLs are Sentinels; lock on the master they know by this name
    #[arg(
        long,
        global = true,
        env = "RLOCK_SENTINEL",
        value_name = "MASTER_NAME",
        conflicts_with = "cluster"
    )]
    pub sentinel: Option<String>,

    /// Confirm each new grant on N replicas (WAIT) or fail and release it
    #[arg(long, global = true, env = "RLOCK_MIN_REPLICAS", default_value_t = DEFAULT_MIN_REPLICAS, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub min_replicas: u32,

    /// CA certificate (PEM) to trust for rediss:// instead of the system's
    #[arg(long, global = true, env = "RLOCK_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,

    /// Client certificate (PEM) for rediss:// servers that require one
    #[arg(long, global = true, env = "RLOCK_TLS_CERT", value_name = "FILE")]
    #[arg(requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// Private key (PEM) of the client certificate
    #[arg(long, global = true, env = "RLOCK_TLS_KEY", value_name = "FILE")]
    #[arg(requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// Prefix of every Redis key rlock writes
    #[arg(
        long,
        global = true,
        env = "RLOCK_PREFIX",
        default_value = DEFAULT_PREFIX,
        value_name = "PREFIX"
    )]
    pub prefix: String,

    /// Give up connecting (or waiting for a reply) after this long: exit 69,
    /// "Redis at HOST:PORT did not answer within D"
    #[arg(long, global = true, default_value = DEFAULT_CONNECT_TIMEOUT, value_name = "D")]
    pub connect_timeout: Span,

    /// Events each lock's history keeps (about; 0: counters only), see
    /// `rlock history`
    #[arg(long, global = true, env = "RLOCK_HISTORY_EVENTS", default_value_t = DEFAULT_HISTORY_EVENTS, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub history_events: u32,

    /// How long a lock's history and counters outlive its last event
    /// (1s to 366d)
    #[arg(
        long,
        global = true,
        env = "RLOCK_HISTORY_RETENTION",
        default_value = DEFAULT_HISTORY_RETENTION,
        value_name = "D"
    )]
    pub history_retention: Span,

    /// Print nothing on stderr but errors
    // help_heading = None: under Options, not the struct's Connection.
    #[arg(short, long, global = true, help_heading = None)]
    pub quiet: bool,

    /// Say on stderr what happens (acquired, waiting, released)
    #[arg(short, long, global = true, conflicts_with = "quiet", help_heading = None)]
    pub verbose: bool,

    /// `-E 0` was given to the subcommand: a wait that ends busy is a
    /// quiet success (set by `main`, not a flag).
    #[arg(skip)]
    pub busy_is_success: bool,
}

pub(super) fn short_help() -> String {
    format!("{ENVIRONMENT}\n{AFTER_HELP}")
}

pub(super) fn concat_help() -> String {
    format!("{}\n\n{AFTER_LONG_HELP}", short_help())
}
