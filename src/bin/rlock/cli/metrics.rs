//! `rlock metrics`: Prometheus metrics for the locks in use.

use clap::Args;

pub(crate) const AFTER_HELP: &str = "\
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
  * * * * * rlock metrics > /var/lib/node_exporter/rlock.prom.$$ && mv /var/lib/node_exporter/rlock.prom.$$ /var/lib/node_exporter/rlock.prom";

#[derive(Debug, Args)]
pub(crate) struct Metrics {
    /// Glob over lock names (Redis MATCH syntax)
    #[arg(default_value = "*")]
    pub pattern: String,
}
