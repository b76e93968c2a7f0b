//! `rlock top`: a live view of the locks in use.

use clap::Args;

use rlock::duration::Seconds;

pub(crate) const AFTER_HELP: &str = "\
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
  rlock top --once | head";

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
}
