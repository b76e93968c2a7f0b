//! `rlock metrics`: Prometheus metrics for the locks in use or with history.

use std::path::PathBuf;

use clap::Args;

pub(crate) const AFTER_HELP: &str = "\
For node_exporter's textfile collector or any scraper. Every lock held,
waited for or with history kept (--history-retention, default 7d, after
its last event) has a series per family, label `lock`: gauges
rlock_lock_holders, rlock_lock_waiters, rlock_lock_oldest_wait_seconds,
rlock_lock_held_seconds (the longest current hold),
rlock_lock_lease_left_seconds (0: not held), rlock_lock_renewed_seconds_ago
(not held: no sample), rlock_lock_limit (1: a mutex, N: a semaphore; idle
or read-write: no sample) and counters rlock_lock_grants_total,
rlock_lock_released_total, rlock_lock_expired_total (leases that ran out
unreleased), rlock_lock_losses_total, rlock_lock_timeouts_total,
rlock_lock_superseded_total, rlock_lock_breaks_total,
rlock_lock_overruns_total. Counters come from the lock's history: they
start again from 0 when it expires (a counter reset to Prometheus).

--group PATTERN (repeatable) folds the locks the glob matches into one
series per family, labelled lock=\"PATTERN\" (counters, holders, waiters,
limits summed; the oldest wait, held time and renewal age the largest; the
lease left the shortest): use it for locks named per job or per host, one
series per lock name would grow without bound.

--listen serves GET /metrics over HTTP, reading Redis at each scrape, one
scrape at a time, with rlock_up (1: Redis answered, 0: it did not; still
HTTP 200) and rlock_scrape_duration_seconds. SIGTERM or SIGINT end it
(exit 0). --textfile writes a temporary file in PATH's directory and
renames it over PATH; when Redis does not answer nothing is written and
rlock exits 69, so node_textfile_mtime_seconds shows the file going stale.

Examples:
  rlock metrics --listen 0.0.0.0:9650
  * * * * * rlock metrics --textfile /var/lib/prometheus/node-exporter/rlock.prom";

#[derive(Debug, Args)]
pub(crate) struct Metrics {
    /// Glob over lock names (Redis MATCH syntax)
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Fold the locks this glob matches into one series per family,
    /// lock="PATTERN" (repeatable; the first that matches)
    #[arg(long = "group", value_name = "PATTERN")]
    pub groups: Vec<String>,

    /// Serve the metrics over HTTP at ADDR (IP:PORT or HOST:PORT), path /metrics
    #[arg(long, value_name = "ADDR", conflicts_with = "textfile")]
    pub listen: Option<String>,

    /// Write the metrics to PATH atomically (temporary file, then rename)
    #[arg(long, value_name = "PATH")]
    pub textfile: Option<PathBuf>,
}
