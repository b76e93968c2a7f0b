//! `rlock doctor`: look at the Redis deployment for what silently breaks
//! locks (eviction, persistence, replication, clocks, permissions, version,
//! RedLock masters that are one server) and say, per finding, what to
//! change. It reads settings and runs no command on a lock key: the
//! permission check asks the server whether a command would be allowed
//! (ACL DRYRUN, or `redis.acl_check_cmd` in a script that touches no key).
//!
//! What each severity means:
//! - `unsafe`: a lock can be granted twice or lost, or rlock cannot work as
//!   configured (a missing permission, a replica named as the master, a
//!   server that does not answer); `rlock doctor` exits
//!   [`crate::exit_code::UNSAFE`];
//! - `warn`: a risk that depends on what happens next (a failover, a
//!   `maxmemory` set later), or something doctor could not check;
//! - `info` and `ok`: what was found, for the record.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::FromRedisValue;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use serde::Serialize;

use crate::conn::{Conn, Server};
use crate::duration::human;
use crate::lock::{LockName, drift};
use crate::{ConnectOptions, Result};

/// The oldest Redis rlock's scripts run on.
pub const MIN_VERSION: (u32, u32) = (6, 2);

/// Clock samples taken per server (TIME round trips).
const SAMPLES: usize = 5;

/// Memory headroom below which doctor warns, in percent of `maxmemory`:
/// a burst of writes (rlock's, or those of other users of the server) can
/// take the rest, and at `maxmemory` Redis refuses every new lock and
/// waiter (exit 69).
pub const MEMORY_MARGIN_PERCENT: u64 = 10;

mod clock;
mod permissions;
mod probe;
mod report;
mod role;
mod server;
mod topology;

use clock::*;
use permissions::*;
use probe::*;
pub use report::{Facts, Finding, Report, Severity};
pub use role::Role;
use role::role;
use server::*;
use topology::*;

/// Check the deployment `opts` names. `ttl` is the longest TTL (or
/// --min-hold) the locks on it use. Fails only when no server answers at
/// all or every one wants a password we lack (or on bad input); everything
/// else is a finding.
pub fn run(opts: &ConnectOptions, prefix: &str, ttl: Duration) -> Result<Report> {
    run_for(opts, prefix, ttl, None)
}

/// [`run`], checking the user's permissions against `role` (exactly what
/// it needs: docs/deployments.md, "Roles") instead of against every
/// command rlock sends.
pub fn run_for(
    opts: &ConnectOptions,
    prefix: &str,
    ttl: Duration,
    role: Option<Role>,
) -> Result<Report> {
    let probe = LockName::new(prefix, "rlock-doctor")?;
    let servers = Server::open_all(opts)?;
    let mut report = Report::new(ttl);
    report.role = role;
    let ctx = Ctx {
        opts,
        ttl,
        probe: probe.redis_key().to_string(),
        prefix: prefix.to_string(),
        role,
    };
    if opts.cluster {
        // Without the feature, open_all refused --cluster already.
        #[cfg(feature = "cluster")]
        cluster(&ctx, &servers[0], &mut report)?;
    } else if let Some(name) = &opts.sentinel {
        sentinel(&ctx, &servers[0], name, &mut report)?;
    } else {
        redlock_or_one(&ctx, &servers, &mut report)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands doctor checks are those of the job and operator lines
    /// of docs/deployments.md (the test suite runs every rlock command as
    /// those users), plus ROLE and CLUSTER SLOTS for Sentinel and Cluster
    /// connections.
    #[test]
    fn checks_the_readme_acl() {
        let readme = include_str!("../../docs/deployments.md");
        let commands = |user: &str| -> Vec<&str> {
            let line = readme
                .lines()
                .find(|l| l.starts_with(&format!("ACL SETUSER {user} ")))
                .expect("the role's ACL line of docs/deployments.md");
            let mut c: Vec<&str> = line
                .split_whitespace()
                .filter_map(|w| w.strip_prefix('+'))
                .collect();
            c.sort();
            c
        };
        let documented = commands("rlock-job");
        assert_eq!(documented, commands("rlock-operator"));
        let mut checked: Vec<&str> = needed("rlock:{x}", "rlock:")
            .into_iter()
            .filter(|(_, _, need)| !matches!(need, Need::Sentinel | Need::Cluster))
            .map(|(name, _, _)| name)
            .collect();
        checked.sort();
        assert_eq!(documented, checked);
    }

    #[test]
    fn versions_compare() {
        assert_eq!(parse_version("6.2.14"), Some((6, 2)));
        assert_eq!(parse_version("7.0.15"), Some((7, 0)));
        assert!(parse_version("6.0.9").unwrap() < MIN_VERSION);
        assert!(parse_version("10.0.0").unwrap() >= MIN_VERSION);
        assert_eq!(parse_version("x"), None);
    }

    #[test]
    fn memory_headroom_is_ok_warn_or_unsafe() {
        let at = |used: u64, max: u64, policy: &str| {
            let info = parse_info(&format!(
                "used_memory:{used}\r\nmem_not_counted_for_evict:100\r\nmaxmemory:{max}\r\n\
                 maxmemory_policy:{policy}\r\n"
            ));
            let mut r = Report::new(Duration::from_secs(30));
            let mut facts = Facts::default();
            memory(&info, "h:1", &mut r, &mut facts);
            assert_eq!(facts.used_memory, Some(used - 100));
            (r.findings[0].severity, r.findings[0].what.clone())
        };
        let mib = 1024 * 1024;
        assert_eq!(at(5 * mib, 0, "noeviction").0, Severity::Ok);
        assert_eq!(at(50 * mib, 100 * mib, "noeviction").0, Severity::Ok);
        // 90% used, less what does not count: still 10% headroom.
        assert_eq!(at(90 * mib + 100, 100 * mib, "noeviction").0, Severity::Ok);
        let (sev, what) = at(90 * mib + 101, 100 * mib, "noeviction");
        assert_eq!(sev, Severity::Warn);
        assert!(what.contains("under 10% of maxmemory"), "{what}");
        let (sev, what) = at(100 * mib + 100, 100 * mib, "noeviction");
        assert_eq!(sev, Severity::Unsafe);
        assert!(what.contains("refuses every new lock"), "{what}");
        let (_, what) = at(101 * mib, 100 * mib, "allkeys-lru");
        assert!(what.contains("evicts keys"), "{what}");
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(64 * 1024), "64.0 KiB");
        assert_eq!(bytes(3 * mib / 2), "1.50 MiB");
    }

    #[test]
    fn info_parses() {
        let i = parse_info(
            "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\n\r\n# Memory\r\nmaxmemory_policy:noeviction\r\n",
        );
        assert_eq!(i["redis_version"], "7.0.15");
        assert_eq!(i["maxmemory_policy"], "noeviction");
    }

    #[test]
    fn one_line_per_finding_and_a_summary() {
        let mut r = Report::new(Duration::from_secs(30));
        r.add(Severity::Ok, "h:1", "version", "fine".into(), None);
        r.add(
            Severity::Unsafe,
            "h:1",
            "eviction",
            "bad".into(),
            Some("change it".into()),
        );
        assert!(!r.safe);
        assert_eq!(
            r.render(),
            "ok     h:1 version: fine\nunsafe h:1 eviction: bad; fix: change it\n\
             rlock doctor: 1 unsafe finding, 0 warnings\n"
        );
    }
}
