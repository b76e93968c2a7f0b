//! The command-line definition, part of the binary (the library does not
//! depend on clap). The docs test includes this file too, so the man pages
//! and completions it generates are exactly what the binary parses.
//!
//! Over 600 lines, on purpose, as one file: it is one declaration (clap's
//! derive) whose help texts are the `--help` and man pages users read, and
//! nothing else (no logic: the subcommands are in `cmd/`). The docs test
//! includes it with `#[path]`, under which a child module would be looked
//! for in another folder than the binary's build looks: split, both could
//! not read the same files. And a flag's help belongs beside its
//! definition.

use clap::{Args, CommandFactory, Parser, Subcommand};

use std::ffi::OsString;

use rlock::duration::{Seconds, Span};

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
  69   Redis unreachable, not answering, or refusing us (auth, ACL; a new
       lock or waiter while its memory is above maxmemory)
  70   unexpected reply from Redis, or stdout cannot be written
  75   busy (--no-wait), wait timed out, or superseded (--supersede);
       change with -E
  77   the token does not own this lock (check: another owner holds it)
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

/// Redis-backed distributed locks for shell scripts, cron jobs and CI.
#[derive(Debug, Parser)]
#[command(
    name = "rlock",
    version,
    about,
    after_help = short_help(),
    after_long_help = concat_help()
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: Command,
}

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
        default_value = "redis://127.0.0.1:6379",
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
    #[arg(long, global = true, env = "RLOCK_MIN_REPLICAS", default_value_t = 0, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
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
        default_value = "rlock:",
        value_name = "PREFIX"
    )]
    pub prefix: String,

    /// Give up connecting (or waiting for a reply) after this long: exit 69,
    /// "Redis at HOST:PORT did not answer within D"
    #[arg(long, global = true, default_value = "2s", value_name = "D")]
    pub connect_timeout: Span,

    /// Events each lock's history keeps (about; 0: counters only), see
    /// `rlock history`
    #[arg(long, global = true, env = "RLOCK_HISTORY_EVENTS", default_value_t = 200, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub history_events: u32,

    /// How long a lock's history and counters outlive its last event
    /// (1s to 366d)
    #[arg(
        long,
        global = true,
        env = "RLOCK_HISTORY_RETENTION",
        default_value = "7d",
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
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Take the lock and print its owner token on stdout (and nothing else)
    #[command(after_help = "\
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
  rlock acquire staging-db staging-app    # both (no deadlock): one token per line")]
    Acquire {
        /// Lock name
        key: String,
        /// More locks to take together with the first, in one canonical
        /// order whatever order they are named in (at most 16 in all): one
        /// token per line on stdout, in the order named
        #[arg(value_name = "KEY")]
        more: Vec<String>,
        #[command(flatten)]
        lock: LockOpts,
        #[command(flatten)]
        slots: Slots,
        #[command(flatten)]
        keep: KeepOpts,
    },

    /// Run a command while holding the lock, and exit with its status
    #[command(after_help = "\
The command runs in its own process group, under a guard process, with
RLOCK_KEY, RLOCK_TOKEN and RLOCK_FENCE in its environment. The lease is
renewed every TTL/3; signals INT TERM HUP QUIT USR1 USR2 are passed on to
every process of the command; the lock is released as soon as the command
and everything it started have exited (--kill-leftovers: when the command
exits). The command never outlives the lease: see `rlock --help`, \"The
guard\". A nested `rlock exec` (or acquire) of the same key inside the
command re-enters instead of waiting for its parent; the outermost exec
releases every hold. So does one given the holder's token in RLOCK_TOKEN
(a script that exported the token of its `rlock acquire --keep`).

Which words are the command: options may stand anywhere before it; the
first `--` ends rlock's words (`rlock exec k -- ssh host -- touch x` runs
`ssh host -- touch x`); without a `--` before it, the command starts at
the first word after the key that is not an option, as after flock's file,
and runs to the end. A line with a `--` after the command's first word
reads two ways (`rlock exec k ssh host -- touch x`: flock runs `ssh host
-- touch x` under k, the lock-set form `touch x` under k, ssh, host) and is
refused (64), naming both and how to write each. Write `--` after the key.

Several locks: `rlock exec KEY --and KEY... -- CMD` (up to 16, each named
once) takes them all, in one order (by name) whatever order they are
named in, so jobs naming them in different orders never deadlock; -n/-w
are for the whole set (busy or timed out: nothing left held or queued). The command starts once all are held;
each is renewed, all are released together, and a loss of any one stops
the command (exit 79, naming it). RLOCK_KEY/TOKEN/FENCE are the first
key's; RLOCK_FENCES lists key=fence for each (\"a=17 b=4\"). `rlock status`
shows the other locks of a holder's set.

Examples:
  rlock exec market -- ./settle.sh
  rlock exec -w 30m staging-db --and staging-app -- ./deploy.sh   # both
  rlock exec -n -E 0 nightly -- ./report.sh     # cron: skip if running elsewhere
  rlock exec --ttl 2m -w 10m deploy -- make deploy
  rlock exec --priority 10 -w 1h deploy -- ./hotfix.sh   # before routine waiters")]
    Exec {
        /// Lock name
        key: String,
        /// Hold lock KEY too (repeatable): a lock set, taken deadlock-free
        #[arg(long = "and", value_name = "KEY")]
        also: Vec<String>,
        #[command(flatten)]
        lock: LockOpts,
        #[command(flatten)]
        slots: Slots,
        #[command(flatten)]
        run: RunOpts,
        #[command(flatten)]
        flock: FlockOpts,
        /// The command and its arguments (after `--`, or right after the key
        /// as after flock's file)
        #[arg(
            conflicts_with = "command_string",
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<OsString>,
    },

    /// Read-write lock: many readers at once, or one writer
    #[command(after_help = "\
Readers share the lock; a writer excludes readers and other writers. Each
reader has its own token, lease and renewal: a crashed reader frees only its
own share. Once a writer waits, new readers queue behind it, so a stream of
readers cannot starve writers (a reader at a higher --priority than the
waiting writer goes first). With CMD, behaves like `rlock exec`; without,
prints a token like `rlock acquire` (release and renew it as usual).
A nested read inside a read, or read/write inside a write, re-enters; a read
that tries to re-enter as a write is refused (exit 64) instead of deadlocking.

Examples:
  rlock rw read catalog -- ./export.sh       # many exporters at once
  rlock rw write catalog -- ./import.sh      # one importer, alone
  tok=$(rlock rw write catalog --ttl 5m)")]
    Rw {
        /// read (shared) or write (exclusive)
        #[arg(value_enum)]
        mode: RwMode,
        /// Lock name
        key: String,
        /// With a command, hold lock KEY too (repeatable), as exec does
        #[arg(long = "and", value_name = "KEY")]
        also: Vec<String>,
        #[command(flatten)]
        lock: LockOpts,
        #[command(flatten)]
        run: RunOpts,
        /// Command to run under the lock (best after `--`); without one,
        /// print a token like `rlock acquire`
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<OsString>,
    },

    /// Release a lock held by a token; releasing a free lock is harmless
    Release {
        /// Lock name
        key: String,
        #[command(flatten)]
        token: TokenOpt,
        /// Keep the lock taken until at least this long after it was granted
        #[arg(long, value_name = "D")]
        min_hold: Option<Span>,
    },

    /// Extend a held lock's TTL; fails if the token no longer owns it
    Renew {
        /// Lock name
        key: String,
        #[command(flatten)]
        token: TokenOpt,
        /// New TTL, counted from now
        #[arg(long, default_value = "30s", value_name = "D")]
        ttl: Span,
    },

    /// Exit 0 if a token still holds the lock, 79 if it holds it no more, 77
    /// if another owner holds it: for scripts about to do something
    /// irreversible
    #[command(after_help = "\
The token is --token; without it, inside `rlock exec` of the lock (nested
execs of other locks included) the token RLOCK_HELD records for it, else
RLOCK_TOKEN: inside `rlock exec` only the key is needed. With -v, the lease time left and the fencing token go to
stderr; with --json, {\"held\":..,\"ttl_ms\":..,\"fence\":..} to stdout.

Examples:
  rlock exec deploy -- sh -c './build && rlock check deploy && ./publish'
  rlock check deploy --token \"$tok\" || exit 1")]
    Check {
        /// Lock name
        key: String,
        #[command(flatten)]
        token: TokenOpt,
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
    },

    /// Show who holds a lock, since when, TTL left, fencing counter, waiters
    Status {
        /// Lock name
        key: String,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },

    /// Show a lock's history: who got it, for how long, how each hold ended
    #[command(after_help = "\
Events, oldest first, with the server's time (UTC): granted (waited W),
released (held D, exit code of exec's command), expired (a lease ran out
with nobody releasing it: a crashed or stopped holder), lost (an exec or
keeper found its lock gone, and why), timeout (a waiter gave up),
superseded (a --supersede waiter replaced by a newer one), broken (freed
by `rlock break`: by whom, why), overran (stopped by --max-hold). Each
lock keeps about --history-events events (default 200) for
--history-retention after its last one (default 7d). Command lines are
redacted as in `status`; tokens never show.

--json prints one object per line: event, at (RFC 3339, UTC, ms), host,
pid, user, cmd, fence, and where they apply waited_ms, held_ms,
exit_code, by, reason, ci.

Examples:
  rlock history deploy
  rlock history deploy --limit 100 --json | jq -r 'select(.event==\"expired\")'")]
    History {
        /// Lock name
        key: String,
        /// Show the last N events (1 to 100000)
        #[arg(long, default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
        /// Print one JSON object per line instead of text
        #[arg(long)]
        json: bool,
    },

    /// End a stuck lock's hold(s) by force; the next waiter gets it once they stopped
    #[command(after_help = "\
For an operator, when a holder hangs: breaks every hold of the lock (every
holder of a semaphore or read-write lock), or with --holder the one named.
A broken hold is not renewed any more, and stays held until its holder has
stopped and released it, or its lease ends, whichever comes first: the next
waiter never runs beside the broken holder, and waits at most one TTL.
Each broken holder finds out at its next renewal (within a third of its
TTL): `rlock exec` stops its command as for any lost lock (--on-lost: TERM
with CONT, KILL after --grace), releases, and exits 79, saying who broke the
lock and why; an `acquire --keep` keeper stops its script the same way.
`rlock status` shows the hold as being broken (by whom, since when)
meanwhile; the history records `broken`, then how the hold ended. A parked
hold (released, kept by --min-hold) has nobody to stop: it ends at once.
There is no immediate hand-over.

--holder ID: a holder as `rlock status` and `list` show it: its fence
(`fence 7`: --holder 7, unique per grant) or PID@HOST (every hold of that
process). An ID that matches no holder breaks nothing: exit 1.

On a terminal, asks \"break lock K held by ...? [y/N]\" first (no: exit 1,
nothing broken); --yes skips the question, and is required when stdin is
not a terminal (64 otherwise). A free lock: \"nothing to break\", exit 0.
The breaker is recorded as user@host ($USER, $LOGNAME, else the uid's name).

Examples:
  rlock status deploy
  rlock break deploy --reason \"job 4711 hung since 02:00\"
  rlock break gpu-runners --holder 42 --reason \"runner lost its GPU\" --yes")]
    Break {
        /// Lock name
        key: String,
        /// Why the lock is broken: told to the broken holder, kept in the
        /// lock's history
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Only this holder: its fence as status shows it, or PID@HOST
        #[arg(long, value_name = "ID")]
        holder: Option<String>,
        /// Do not ask for confirmation (required without a terminal)
        #[arg(short = 'y', long)]
        yes: bool,
    },

    /// Check the Redis deployment for settings that silently break locks
    #[command(after_help = "\
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

Exit codes: 0 nothing unsafe (warnings allowed), 78 something unsafe,
69 no server answered, 64 bad usage.

Examples:
  rlock doctor
  rlock --url redis://a:6379,redis://b:6379,redis://c:6379 doctor --ttl 10m
  rlock --sentinel mymaster --url redis://s1:26379 doctor --json")]
    Doctor {
        /// The longest TTL (or --min-hold) your locks use: the restart delay
        /// and the clock margin are worked out for it
        #[arg(long, default_value = "30s", value_name = "D")]
        ttl: Span,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },

    /// List the locks that are held or waited for
    List {
        /// Glob over lock names (Redis MATCH syntax)
        #[arg(default_value = "*")]
        pattern: String,
        /// Print JSON (one array) instead of text
        #[arg(long)]
        json: bool,
    },

    /// A live view of the locks in use, most contended first (like top)
    #[command(after_help = "\
One row per lock held or waited for: lock, kind, holder (host:pid; +N more
holders), held for, TTL left, waiters, the oldest wait, grants in the last
minute, the last event of its history. Most contended first: more waiters,
then the longer oldest wait, then more grants in the last minute, then more
holders, then by name. q quits; the terminal is restored on q, Ctrl-C and
SIGTERM; a narrow terminal cuts rows short instead of wrapping.

--once prints one frame as plain text (no escape codes, rows not cut) and
exits. Without a terminal on stdout, top prints one plain frame as --once
does.

Exit codes: 0 q or --once, 128+N a signal N (130: Ctrl-C), 64 bad usage,
69 Redis unreachable at start.

Examples:
  rlock top
  rlock top 'deploy-*' -d 5
  rlock top --once | head")]
    Top {
        /// Glob over lock names (Redis MATCH syntax)
        #[arg(default_value = "*")]
        pattern: String,
        /// Refresh every D (a bare number is seconds; 0.1s to 1h)
        #[arg(short, long, default_value = "1", value_name = "D")]
        delay: Seconds,
        /// Print one plain frame and exit
        #[arg(long)]
        once: bool,
    },

    /// Print Prometheus metrics for the locks in use (text format 0.0.4)
    #[command(after_help = "\
For node_exporter's textfile collector or any scraper. Per lock (label
`lock`): gauges rlock_lock_holders, rlock_lock_waiters,
rlock_lock_oldest_wait_seconds, rlock_lock_held_seconds (the longest
current hold) and counters rlock_lock_grants_total,
rlock_lock_losses_total, rlock_lock_timeouts_total,
rlock_lock_breaks_total, rlock_lock_overruns_total (from the lock's
history: they restart when its history expires). Only locks held or waited
for are listed.

Example (cron, every minute; write then rename, so the collector never
reads half a file):
  * * * * * rlock metrics > /var/lib/node_exporter/rlock.prom.$$ && mv /var/lib/node_exporter/rlock.prom.$$ /var/lib/node_exporter/rlock.prom")]
    Metrics {
        /// Glob over lock names (Redis MATCH syntax)
        #[arg(default_value = "*")]
        pattern: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct LockOpts {
    /// Lease time; the lock frees itself this long after the last renewal
    #[arg(long, default_value = "30s", value_name = "D", help_heading = "Lock")]
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
        default_value_t = 0,
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
        default_value_t = 75,
        value_name = "CODE",
        help_heading = "Lock"
    )]
    pub conflict_exit_code: u8,
}

/// flock(1)'s own options, so that `flock` -> `rlock exec` is a one-word
/// change in a crontab line.
#[derive(Debug, Args)]
pub(crate) struct FlockOpts {
    /// Take a shared (read) lock: `rlock exec -s K` is `rlock rw read K`
    #[arg(
        short = 's',
        long,
        conflicts_with = "exclusive",
        help_heading = "flock(1) options"
    )]
    pub shared: bool,
    /// Take an exclusive lock (the default)
    #[arg(
        short = 'x',
        short_alias = 'e',
        long,
        help_heading = "flock(1) options"
    )]
    pub exclusive: bool,
    /// Run CMD through `sh -c`, as flock -c does
    #[arg(
        short = 'c',
        long = "command",
        value_name = "CMD",
        help_heading = "flock(1) options"
    )]
    pub command_string: Option<OsString>,
    /// Accepted: rlock never passes a lock descriptor to the command
    #[arg(short = 'o', long, help_heading = "flock(1) options")]
    pub close: bool,
    /// Refused: rlock must stay alive to renew the lease
    #[arg(short = 'F', long, help_heading = "flock(1) options")]
    pub no_fork: bool,
    /// Refused: rlock locks are released with `rlock release`
    #[arg(short = 'u', long, help_heading = "flock(1) options")]
    pub unlock: bool,
    /// Refused: rlock locks are not file descriptors
    #[arg(long, value_name = "FD", help_heading = "flock(1) options")]
    pub fd: Option<String>,
}

const NO_DESCRIPTORS: &str = "rlock locks are not file descriptors: hold one for the \
     rest of the script with tok=$(rlock acquire KEY --keep), or across some commands with \
     tok=$(rlock acquire KEY) ... rlock release KEY --token \"$tok\"";

impl FlockOpts {
    /// The flock(1) options rlock cannot honour, refused with the reason;
    /// `key` and `command` catch the descriptor form `flock 9`.
    pub(crate) fn refuse(&self, key: &str, command: &[OsString]) -> Result<(), String> {
        if self.no_fork {
            return Err(
                "--no-fork (-F) cannot work: rlock must stay alive while the \
                 command runs, to renew the lease; drop the flag"
                    .into(),
            );
        }
        if self.unlock {
            return Err(format!(
                "--unlock (-u) has no counterpart: {NO_DESCRIPTORS}"
            ));
        }
        if let Some(fd) = &self.fd {
            return Err(format!("--fd {fd}: {NO_DESCRIPTORS}"));
        }
        if command.is_empty() && self.command_string.is_none() {
            if key.chars().all(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "`rlock exec {key}` without a command looks like flock's descriptor \
                     form: {NO_DESCRIPTORS}"
                ));
            }
            return Err("no command given: rlock exec KEY [--] CMD [ARGS...], or -c CMD".into());
        }
        Ok(())
    }

    /// The command to run: `sh -c CMD` for -c, else what followed the key.
    pub(crate) fn command(&self, command: &[OsString]) -> Vec<OsString> {
        match &self.command_string {
            Some(c) => vec!["sh".into(), "-c".into(), c.clone()],
            None => command.to_vec(),
        }
    }
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

#[derive(Debug, Args)]
pub(crate) struct Slots {
    /// Let up to N holders in at once (counting semaphore)
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000), help_heading = "Lock")]
    pub limit: u32,
}

#[derive(Debug, Args)]
pub(crate) struct RunOpts {
    /// What to do with the command if the lock is lost while it runs
    #[arg(
        long,
        value_enum,
        default_value = "term",
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
        default_value = "10s",
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

impl From<OnLost> for rlock::exec::OnLost {
    fn from(o: OnLost) -> Self {
        match o {
            OnLost::Term => rlock::exec::OnLost::Term,
            OnLost::Kill => rlock::exec::OnLost::Kill,
            OnLost::Ignore => rlock::exec::OnLost::Ignore,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RwMode {
    /// Shared: many readers at once
    Read,
    /// Exclusive: one writer, no readers
    Write,
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

fn short_help() -> String {
    format!("{ENVIRONMENT}\n{AFTER_HELP}")
}

fn concat_help() -> String {
    format!("{}\n\n{AFTER_LONG_HELP}", short_help())
}

impl Command {
    /// The lock name the command works on, if it has one.
    pub(crate) fn key(&self) -> Option<&str> {
        match self {
            Command::Acquire { key, .. }
            | Command::Exec { key, .. }
            | Command::Rw { key, .. }
            | Command::Release { key, .. }
            | Command::Renew { key, .. }
            | Command::Check { key, .. }
            | Command::Status { key, .. }
            | Command::History { key, .. }
            | Command::Break { key, .. } => Some(key),
            Command::List { .. }
            | Command::Doctor { .. }
            | Command::Top { .. }
            | Command::Metrics { .. } => None,
        }
    }
}

/// The clap command, for generating the man page and completions.
#[allow(dead_code)] // used by the docs test, which includes this file
pub(crate) fn command() -> clap::Command {
    Cli::command()
}

/// The subcommands that take a new grant, where `--min-replicas` applies.
#[allow(dead_code)]
const GRANTS: &[&str] = &["acquire", "exec", "rw", "doctor"];

/// Subcommand `name` as its man page shows it: with the global options
/// (--url, --prefix, TLS...; each with its environment variable) that
/// apply to it — `--min-replicas` for the commands in [`GRANTS`], the
/// history limits for every command that writes a lock's history (all but
/// doctor) — and not the others, which it accepts but ignores.
#[allow(dead_code)] // used by the docs test, which includes this file
pub(crate) fn page_of(name: &str) -> clap::Command {
    let grants = GRANTS.contains(&name);
    let writes = name != "doctor";
    // Hidden at the top before clap copies the globals into every
    // subcommand (build); hiding them in a built subcommand breaks it.
    let mut top = Cli::command()
        .mut_arg("min_replicas", |a| a.hide(!grants))
        .mut_arg("history_events", |a| a.hide(!writes))
        .mut_arg("history_retention", |a| a.hide(!writes));
    top.build();
    top.find_subcommand(name)
        .unwrap_or_else(|| panic!("no subcommand {name}"))
        .clone()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        super::command().debug_assert();
    }
}
