//! `rlock top`: a live view of the locks in use.

use clap::Args;

use rlock::duration::Seconds;

pub(crate) use crate::frame::Sort;

pub(crate) const AFTER_HELP: &str = "\
One row per lock held or waited for: lock, held for, TTL left, waiters, the
oldest wait, kind, holder (host:pid; +N more holders), grants in the last
minute, the last event of its history. A narrow terminal (60-80 columns)
keeps LOCK, HELD, TTL and WAIT: long names are cut with …, the columns to
the right are cut instead of wrapping. Control and bidirectional characters
in names and commands are shown escaped (\\x1b, \\u{202e}).

Keys: q quits; j/k or the arrows scroll a row, space/b or PgDn/PgUp a page,
g/G to the top/end; s the next sort (contended, name, held, wait); / types a
filter on lock names (Enter ends it, Esc clears it); w lists each lock's
waiters under it (host:pid, user, priority, how long it has waited,
command). The terminal is restored on q, Ctrl-C and SIGTERM.

--sort contended (the default): more waiters, then the longer oldest wait,
then more grants in the last minute, then more holders, then by name.

--once prints one frame as plain text (no escape codes, rows not cut) and
exits. Without a terminal on stdout, top prints one plain frame as --once
does. --once --json prints JSON lines, one object per lock in --sort order:
the lock's `status --json` object (key, kind, held, holders, waiting,
waiters, ...) plus held_ms, ttl_ms, oldest_wait_ms (null when none),
grants_last_minute, last_event (as a `history --json` line, or null) and
counters.

Exit codes: 0 q or --once, 128+N a signal N (130: Ctrl-C), 64 bad usage,
69 Redis unreachable at start.

Examples:
  rlock top
  rlock top 'deploy-*' -d 5 --sort wait
  rlock top --once | head
  rlock top --once --json | jq -r 'select(.waiting > 0) | .key'";

#[derive(Debug, Args)]
pub(crate) struct Top {
    /// Glob over lock names (Redis MATCH syntax)
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Refresh every D (a bare number is seconds; 0.1s to 1h)
    #[arg(short, long, default_value = "1", value_name = "D")]
    pub delay: Seconds,
    /// Print one plain frame and exit
    #[arg(long)]
    pub once: bool,
    /// With --once: one JSON object per lock, one per line
    #[arg(long, requires = "once")]
    pub json: bool,
    /// Order of the rows (s in the live view cycles through them)
    #[arg(long, value_enum, default_value = "contended", value_name = "KEY")]
    pub sort: Sort,
}
