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

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Checked and fine.
    Ok,
    /// Worth knowing; no risk to the locks.
    Info,
    /// A risk under some failures, or a cost; worth a change.
    Warn,
    /// Locks can be granted twice, or lost, in this setup.
    Unsafe,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Unsafe => "unsafe",
        })
    }
}

/// One thing found, on one server (or on the whole deployment).
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// The server it is about (host:port, socket path, "cluster via ...",
    /// "RedLock"); never a password.
    pub server: String,
    /// What was checked: version, eviction, persistence, replication,
    /// sentinel, cluster, clock, permissions, redlock, connection.
    pub check: &'static str,
    /// What was found, and why it matters.
    pub what: String,
    /// What to change, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What was measured on one server.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Facts {
    /// host:port or socket path; never a password.
    pub server: String,
    /// The server's `redis_version` (INFO server).
    pub version: Option<String>,
    /// Its replication role: `master` or `slave` (INFO replication).
    pub role: Option<String>,
    /// Its `run_id`, which changes on every restart.
    pub run_id: Option<String>,
    /// Median round trip of TIME, in milliseconds.
    pub rtt_ms: Option<f64>,
    /// The server's TIME minus this host's clock, in milliseconds
    /// (positive: the server is ahead).
    pub offset_ms: Option<f64>,
}

/// Everything `rlock doctor` found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// No finding is `unsafe`.
    pub safe: bool,
    /// The longest TTL the report assumes (restart delay, clock margin).
    pub ttl_ms: u64,
    /// What was found, in the order checked.
    pub findings: Vec<Finding>,
    /// What was measured on each server.
    pub servers: Vec<Facts>,
}

impl Report {
    fn new(ttl: Duration) -> Report {
        Report {
            safe: true,
            ttl_ms: crate::duration::millis(ttl),
            findings: Vec::new(),
            servers: Vec::new(),
        }
    }

    fn add(
        &mut self,
        severity: Severity,
        server: &str,
        check: &'static str,
        what: String,
        fix: Option<String>,
    ) {
        self.safe &= severity != Severity::Unsafe;
        self.findings.push(Finding {
            severity,
            server: server.to_string(),
            check,
            what,
            fix,
        });
    }

    /// How many findings have this severity.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// One line per finding (`severity server check: what; fix: ...`), and
    /// a summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            out.push_str(&format!(
                "{:<6} {} {}: {}",
                f.severity.to_string(),
                f.server,
                f.check,
                f.what
            ));
            if let Some(fix) = &f.fix {
                out.push_str("; fix: ");
                out.push_str(fix);
            }
            out.push('\n');
        }
        let (bad, warn) = (self.count(Severity::Unsafe), self.count(Severity::Warn));
        let warnings = match warn {
            1 => "1 warning".to_string(),
            n => format!("{n} warnings"),
        };
        if bad == 0 {
            out.push_str(&format!(
                "rlock doctor: nothing unsafe found ({warnings})\n"
            ));
        } else {
            out.push_str(&format!(
                "rlock doctor: {bad} unsafe finding{}, {warnings}\n",
                if bad == 1 { "" } else { "s" }
            ));
        }
        out
    }
}

/// Check the deployment `opts` names. `ttl` is the longest TTL (or
/// --min-hold) the locks on it use. Fails only when no server answers at
/// all or every one wants a password we lack (or on bad input); everything
/// else is a finding.
pub fn run(opts: &ConnectOptions, prefix: &str, ttl: Duration) -> Result<Report> {
    let probe = LockName::new(prefix, "rlock-doctor")?;
    let servers = Server::open_all(opts)?;
    let mut report = Report::new(ttl);
    let ctx = Ctx {
        opts,
        ttl,
        probe: probe.redis_key().to_string(),
        prefix: prefix.to_string(),
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

struct Ctx<'a> {
    opts: &'a ConnectOptions,
    ttl: Duration,
    /// A lock's main key nobody uses, for permission checks.
    probe: String,
    prefix: String,
}

impl Ctx<'_> {
    fn redlock(&self) -> bool {
        self.opts.urls.len() > 1 && !self.opts.cluster && self.opts.sentinel.is_none()
    }
}

/// Where a server's commands go: a connection of its own, or one node of a
/// cluster connection.
enum Probe<'a> {
    Direct(&'a mut Conn),
    #[cfg(feature = "cluster")]
    Node {
        conn: &'a mut redis::cluster::ClusterConnection,
        host: String,
        port: u16,
    },
}

impl Probe<'_> {
    fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        match self {
            Probe::Direct(c) => cmd.query(&mut **c),
            #[cfg(feature = "cluster")]
            Probe::Node { conn, host, port } => {
                let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                routed(conn, cmd, at)
            }
        }
    }

    /// One parameter (CONFIG GET), or why it cannot be read.
    fn config(&mut self, name: &str) -> std::result::Result<String, String> {
        let reply: redis::RedisResult<Vec<String>> =
            self.query(redis::cmd("CONFIG").arg("GET").arg(name));
        match reply {
            Ok(kv) => kv
                .get(1)
                .cloned()
                .ok_or_else(|| format!("CONFIG GET {name} gave nothing")),
            Err(e) => Err(short(&e)),
        }
    }
}

/// A command sent to the cluster node `at` chooses, its reply converted.
#[cfg(feature = "cluster")]
fn routed<T: FromRedisValue>(
    conn: &mut redis::cluster::ClusterConnection,
    cmd: &redis::Cmd,
    at: RoutingInfo,
) -> redis::RedisResult<T> {
    let reply = conn.route_command(cmd, at)?.extract_error()?;
    Ok(redis::from_redis_value(reply)?)
}

/// An error in a few words, for a finding.
fn short(e: &redis::RedisError) -> String {
    let text = e.to_string();
    let text = text.split(" - ").next().unwrap_or(&text).trim();
    crate::conn::redact_text(text)
}

/// INFO, parsed into field -> value.
type Info = HashMap<String, String>;

fn parse_info(text: &str) -> Info {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// One Redis, or RedLock over several.
fn redlock_or_one(ctx: &Ctx, servers: &[Server], report: &mut Report) -> Result<()> {
    let mut answered = 0;
    let mut first_err = None;
    let mut ids: Vec<(String, Option<String>)> = Vec::new();
    for server in servers {
        let mut conn = match server.connect().and_then(|c| answering(server, c)) {
            Ok(c) => c,
            Err(e) => {
                report.add(
                    Severity::Unsafe,
                    &server.label,
                    "connection",
                    format!("does not answer or refuses us, not checked ({e})"),
                    Some(
                        "bring it back, give its password (RLOCK_PASSWORD), or remove it \
                         from the URLs"
                            .into(),
                    ),
                );
                first_err.get_or_insert(e);
                continue;
            }
        };
        answered += 1;
        let facts = node(ctx, &mut Probe::Direct(&mut conn), &server.label, report);
        ids.push((server.url.clone(), facts.run_id.clone()));
        report.servers.push(facts);
    }
    if answered == 0 {
        return Err(first_err.expect("at least one server"));
    }
    if ctx.redlock() {
        redlock(servers.len(), &ids, report);
    }
    Ok(())
}

/// `conn` if its server answers a PING. One that accepted the connection
/// but sends nothing back in time (frozen, SIGSTOP, a hung host) is down:
/// without this, every check's timeout read as "INFO refused", "TIME
/// refused", and the report said nothing unsafe. An error reply (an ACL
/// without +ping) is an answer, but for a missing password.
fn answering(server: &Server, mut conn: Conn) -> Result<Conn> {
    let what = || format!("cannot use Redis at {}", server.label);
    match redis::cmd("PING").query::<redis::Value>(&mut conn) {
        Err(e) if e.is_timeout() => Err(crate::Error::Unavailable {
            context: "PING".into(),
            cause: crate::error::no_answer(e, &server.label, server.timeout),
        }),
        Err(e) if e.is_io_error() || e.is_connection_dropped() => Err(crate::Error::Unavailable {
            context: what(),
            cause: e,
        }),
        // A server that wants a password we did not give accepts the
        // connection and refuses every command: for rlock it is as good as
        // down (exit 69), not a server with a few unreadable settings.
        Err(e) if crate::error::wants_auth(&e) => Err(crate::Error::from_redis(e, &what())),
        _ => Ok(conn),
    }
}

/// RedLock: the masters are distinct servers, and enough of them.
fn redlock(n: usize, ids: &[(String, Option<String>)], report: &mut Report) {
    const WHO: &str = "RedLock";
    let mut twins = false;
    for (i, (a, id)) in ids.iter().enumerate() {
        let Some(id) = id else { continue };
        if let Some((b, _)) = ids[..i].iter().find(|(_, x)| x.as_ref() == Some(id)) {
            twins = true;
            report.add(
                Severity::Unsafe,
                WHO,
                "redlock",
                format!(
                    "{b} and {a} reach the same Redis server (run_id {id}): RedLock needs \
                     independent masters, and rlock refuses to lock (exit 64)"
                ),
                Some("give each master once, and use independent servers".into()),
            );
        }
    }
    let unknown = ids.iter().filter(|(_, id)| id.is_none()).count();
    if unknown > 0 {
        report.add(
            Severity::Warn,
            WHO,
            "redlock",
            format!("{unknown} master(s) did not give their run_id: cannot tell whether the masters are distinct servers"),
            Some("allow +info for this user".into()),
        );
    } else if !twins && ids.len() == n {
        report.add(
            Severity::Ok,
            WHO,
            "redlock",
            format!("{n} distinct masters (run_id differs)"),
            None,
        );
    }
    let majority = n / 2 + 1;
    if n == 2 {
        report.add(
            Severity::Warn,
            WHO,
            "redlock",
            "2 masters: a majority is both, so either one down stops all locking".into(),
            Some("use 3 or 5 independent masters".into()),
        );
    } else if n.is_multiple_of(2) {
        report.add(
            Severity::Info,
            WHO,
            "redlock",
            format!(
                "{n} masters (majority {majority}) tolerate no more failures than {}",
                n - 1
            ),
            Some(format!("use {} or {} masters", n - 1, n + 1)),
        );
    } else {
        report.add(
            Severity::Ok,
            WHO,
            "redlock",
            format!(
                "{n} masters, majority {majority}: locking goes on with {} down",
                n - majority
            ),
            None,
        );
    }
}

/// Sentinel: what each Sentinel says, then the master they name.
fn sentinel(ctx: &Ctx, server: &Server, name: &str, report: &mut Report) -> Result<()> {
    let label = server.label.clone();
    let clients = server.sentinel_clients();
    let mut named: Vec<(String, String)> = Vec::new();
    let mut down = 0;
    for client in clients {
        let at = client.get_connection_info().addr().to_string();
        let answer = (|| -> redis::RedisResult<(Option<(String, u16)>, String)> {
            let mut c = client.get_connection_with_timeout(server.timeout)?;
            c.set_read_timeout(Some(server.timeout))?;
            c.set_write_timeout(Some(server.timeout))?;
            let addr = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(name)
                .query(&mut c)?;
            let quorum = match redis::cmd("SENTINEL")
                .arg("CKQUORUM")
                .arg(name)
                .query::<String>(&mut c)
            {
                Ok(s) => s,
                Err(e) => short(&e),
            };
            Ok((addr, quorum))
        })();
        match answer {
            Ok((Some((host, port)), quorum)) => {
                if !quorum.starts_with("OK") {
                    report.add(
                        Severity::Warn,
                        &format!("Sentinel {at}"),
                        "sentinel",
                        format!("CKQUORUM {name}: {quorum}: a failover may not be possible"),
                        Some(
                            "run enough Sentinels (3 or more) to reach the quorum and a majority"
                                .into(),
                        ),
                    );
                }
                named.push((at, format!("{host}:{port}")));
            }
            Ok((None, _)) => {
                down += 1;
                report.add(
                    Severity::Warn,
                    &format!("Sentinel {at}"),
                    "sentinel",
                    format!("knows no master named {name:?}"),
                    Some("check --sentinel and the Sentinel's monitor line".into()),
                );
            }
            Err(e) => {
                down += 1;
                report.add(
                    Severity::Warn,
                    &format!("Sentinel {at}"),
                    "sentinel",
                    format!("does not answer ({})", short(&e)),
                    Some("bring it back or remove it from the URLs".into()),
                );
            }
        }
    }
    let mut masters: Vec<&str> = named.iter().map(|(_, m)| m.as_str()).collect();
    masters.sort();
    masters.dedup();
    match masters.len() {
        0 => {}
        1 => report.add(
            Severity::Ok,
            &label,
            "sentinel",
            format!(
                "{} of {} Sentinels answer and name master {}",
                named.len(),
                named.len() + down,
                masters[0]
            ),
            None,
        ),
        _ => report.add(
            Severity::Warn,
            &label,
            "sentinel",
            format!(
                "the Sentinels disagree on the master ({}): a failover under way, or a split",
                named
                    .iter()
                    .map(|(s, m)| format!("{s} names {m}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some("run doctor again once the failover is over; if it persists, check the Sentinels' network".into()),
        ),
    }
    let mut conn = server.connect()?;
    let facts = node(ctx, &mut Probe::Direct(&mut conn), &label, report);
    report.servers.push(facts);
    Ok(())
}

/// Redis Cluster: state, slot coverage, every master reachable, and each
/// master checked as a server of its own.
#[cfg(feature = "cluster")]
fn cluster(ctx: &Ctx, server: &Server, report: &mut Report) -> Result<()> {
    let label = server.label.clone();
    let mut conn = server.connect()?;
    let Conn::Cluster(c) = &mut conn else {
        return Err(crate::Error::Protocol(
            "a cluster connection expected".into(),
        ));
    };
    let random = || RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let failed = |e: redis::RedisError, what: &str| crate::Error::Unavailable {
        context: format!("{what} on {label}"),
        cause: e,
    };
    // Through `run`: a first seed that knows no slots is passed over.
    let info: String = c
        .run(|c| routed(c, redis::cmd("CLUSTER").arg("INFO"), random()))
        .map_err(|e| failed(e, "CLUSTER INFO"))?;
    let info = parse_info(&info);
    let c = c.inner();
    let slots: Vec<Vec<redis::Value>> = routed(c, redis::cmd("CLUSTER").arg("SLOTS"), random())
        .map_err(|e| failed(e, "CLUSTER SLOTS"))?;
    // Each range is [start, end, [host, port, id, ...], replicas...].
    let mut masters: Vec<(String, u16, usize)> = Vec::new();
    let mut covered = 0u32;
    for range in slots {
        let mut it = range.into_iter();
        let (Some(start), Some(end), Some(node)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let start = u32::from_redis_value(start).unwrap_or(0);
        let end = u32::from_redis_value(end).unwrap_or(0);
        covered += end.saturating_sub(start) + 1;
        let replicas = it.count();
        let node = Vec::<redis::Value>::from_redis_value(node).unwrap_or_default();
        let mut n = node.into_iter();
        if let (Some(h), Some(p)) = (n.next(), n.next())
            && let (Ok(h), Ok(p)) = (String::from_redis_value(h), u16::from_redis_value(p))
        {
            match masters.iter_mut().find(|(mh, mp, _)| *mh == h && *mp == p) {
                Some(m) => m.2 = m.2.min(replicas),
                None => masters.push((h, p, replicas)),
            }
        }
    }
    masters.sort();
    let state = info.get("cluster_state").map_or("?", String::as_str);
    if state == "ok" && covered == 16384 {
        report.add(
            Severity::Ok,
            &label,
            "cluster",
            format!(
                "cluster_state ok, all 16384 slots served by {} masters",
                masters.len()
            ),
            None,
        );
    } else {
        report.add(
            Severity::Unsafe,
            &label,
            "cluster",
            format!(
                "cluster_state {state}, {covered} of 16384 slots have a master: locks in the \
                 others fail (exit 69)"
            ),
            Some(
                "assign every slot and bring failed nodes back (redis-cli --cluster check)".into(),
            ),
        );
    }
    let lonely = masters.iter().filter(|m| m.2 == 0).count();
    if lonely > 0 {
        report.add(
            Severity::Info,
            &label,
            "cluster",
            format!(
                "{lonely} of {} masters have no replica: if one fails, the locks in its slots \
                 wait for it to come back",
                masters.len()
            ),
            None,
        );
    }
    let mut timeout_checked = false;
    for (host, port, replicas) in &masters {
        let at = format!("{host}:{port}");
        let mut probe = Probe::Node {
            conn: c,
            host: host.clone(),
            port: *port,
        };
        if let Err(e) = probe.query::<redis::Value>(&redis::cmd("TIME")) {
            report.add(
                Severity::Unsafe,
                &at,
                "cluster",
                format!(
                    "this master does not answer ({}): locks in its slots fail",
                    short(&e)
                ),
                Some("bring it back, or let its replica take over".into()),
            );
            continue;
        }
        if *replicas > 0 && !timeout_checked {
            timeout_checked = true;
            failover_time(ctx, &mut probe, &label, report);
        }
        let facts = node(ctx, &mut probe, &at, report);
        report.servers.push(facts);
    }
    Ok(())
}

/// A cluster failover takes about 2-3 node timeouts; a running exec must
/// land one renewal within the last TTL/3 of its lease, so TTL/3 should
/// exceed it (README, "Size the TTL to the failover").
#[cfg(feature = "cluster")]
fn failover_time(ctx: &Ctx, probe: &mut Probe, label: &str, report: &mut Report) {
    let Ok(ms) = probe
        .config("cluster-node-timeout")
        .map(|v| v.parse::<u64>().unwrap_or(0))
    else {
        return;
    };
    let node_timeout = Duration::from_millis(ms);
    let failover = node_timeout * 3;
    if ctx.ttl / 3 < failover {
        report.add(
            Severity::Warn,
            label,
            "cluster",
            format!(
                "cluster-node-timeout {}: a failover takes up to about {}, longer than TTL/3 \
                 ({}): an exec running through one loses its lock",
                human(node_timeout),
                human(failover),
                human(ctx.ttl / 3)
            ),
            Some(format!(
                "use --ttl {} or more, or a lower cluster-node-timeout",
                human(failover * 3)
            )),
        );
    }
}

/// Every check on one server; returns what was measured.
fn node(ctx: &Ctx, probe: &mut Probe, at: &str, report: &mut Report) -> Facts {
    let mut facts = Facts {
        server: at.to_string(),
        ..Facts::default()
    };
    match probe.query::<String>(&redis::cmd("INFO")) {
        Ok(text) => {
            let info = parse_info(&text);
            facts.version = info.get("redis_version").cloned();
            facts.role = info.get("role").cloned();
            facts.run_id = info.get("run_id").cloned().filter(|s| !s.is_empty());
            version(&info, at, report);
            eviction(&info, at, report);
            persistence(ctx, &info, probe, at, report);
            replication(ctx, &info, probe, at, report);
        }
        Err(e) => report.add(
            Severity::Warn,
            at,
            "version",
            format!(
                "INFO refused ({}): version, eviction, persistence and replication not checked",
                short(&e)
            ),
            Some("allow +info for this user, or run doctor as an admin user".into()),
        ),
    }
    clock(ctx, probe, at, report, &mut facts);
    permissions(ctx, probe, at, report);
    facts
}

fn parse_version(v: &str) -> Option<(u32, u32)> {
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??))
}

fn version(info: &Info, at: &str, report: &mut Report) {
    let Some(v) = info.get("redis_version") else {
        report.add(
            Severity::Warn,
            at,
            "version",
            "INFO gives no redis_version: not a redis-server?".into(),
            None,
        );
        return;
    };
    let (major, minor) = MIN_VERSION;
    let shown = match info.get("valkey_version") {
        Some(valkey) => format!("Valkey {valkey} (Redis {v})"),
        None => format!("Redis {v}"),
    };
    match parse_version(v) {
        Some(have) if have >= MIN_VERSION => report.add(
            Severity::Ok,
            at,
            "version",
            format!("{shown} (rlock needs {major}.{minor} or newer)"),
            None,
        ),
        Some(_) => report.add(
            Severity::Unsafe,
            at,
            "version",
            format!("{shown}: rlock needs {major}.{minor} or newer; its scripts fail here"),
            Some(format!("upgrade to Redis {major}.{minor} or newer")),
        ),
        None => report.add(
            Severity::Warn,
            at,
            "version",
            format!("cannot read the version {v:?}"),
            None,
        ),
    }
}

fn eviction(info: &Info, at: &str, report: &mut Report) {
    let Some(policy) = info.get("maxmemory_policy") else {
        return;
    };
    let max: u64 = info
        .get("maxmemory")
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let shown = info
        .get("maxmemory_human")
        .cloned()
        .unwrap_or_else(|| format!("{max} bytes"));
    let fix = Some(
        "CONFIG SET maxmemory-policy noeviction, and `maxmemory-policy noeviction` in \
         redis.conf (or give locks a Redis of their own)"
            .to_string(),
    );
    let targets = if policy.starts_with("volatile") {
        "; a volatile-* policy evicts only keys with a TTL, which is what every lock key is"
    } else {
        ""
    };
    if policy == "noeviction" {
        report.add(
            Severity::Ok,
            at,
            "eviction",
            "maxmemory-policy noeviction: a full Redis refuses new locks (exit 69) but \
             never deletes a held one"
                .into(),
            None,
        );
    } else if max > 0 {
        report.add(
            Severity::Unsafe,
            at,
            "eviction",
            format!(
                "maxmemory-policy {policy} with maxmemory {shown}: when memory fills up \
                 Redis deletes keys, held locks among them, and a second holder gets the \
                 lock{targets}"
            ),
            fix,
        );
    } else {
        report.add(
            Severity::Warn,
            at,
            "eviction",
            format!(
                "maxmemory-policy {policy}, but maxmemory is 0 (no limit), so nothing is \
                 evicted now; once a maxmemory is set, held locks can be evicted{targets}"
            ),
            fix,
        );
    }
}

fn persistence(ctx: &Ctx, info: &Info, probe: &mut Probe, at: &str, report: &mut Report) {
    let secs = ctx.ttl.as_secs() + u64::from(ctx.ttl.subsec_nanos() > 0);
    let delay = format!(
        "and keep a restarted Redis out of service for the longest TTL (or --min-hold) your \
         locks use, {} here, so every lock granted before the restart has expired: Redis \
         cannot wait by itself, so e.g. ExecStartPre=/bin/sleep {secs} (or RestartSec={secs}s) \
         in its systemd unit",
        human(ctx.ttl)
    );
    let aof = info.get("aof_enabled").map(String::as_str) == Some("1");
    if !aof {
        let what = match probe.config("save") {
            Ok(save) if !save.trim().is_empty() => format!(
                "no AOF, RDB snapshots only (save {save:?}): a restart brings back the locks \
                 of the last snapshot and forgets those granted since, so they can be \
                 granted again"
            ),
            Ok(_) => "no persistence (appendonly no, save \"\"): a restart empties Redis and \
                      forgets every held lock, so each can be granted again"
                .to_string(),
            Err(_) => "no AOF (appendonly no): a restart forgets the locks granted since the \
                       last RDB snapshot, if any, so they can be granted again"
                .to_string(),
        };
        report.add(
            Severity::Unsafe,
            at,
            "persistence",
            what,
            Some(format!(
                "CONFIG SET appendonly yes and appendfsync everysec (and the same in \
                 redis.conf), {delay}"
            )),
        );
        return;
    }
    match probe.config("appendfsync") {
        Ok(fsync) if fsync == "always" || fsync == "everysec" => report.add(
            Severity::Ok,
            at,
            "persistence",
            format!(
                "appendonly yes, appendfsync {fsync}: a restart keeps held locks{}",
                if fsync == "everysec" {
                    " (a crash of the machine can lose the last second's grants)"
                } else {
                    ""
                }
            ),
            None,
        ),
        Ok(fsync) => report.add(
            Severity::Unsafe,
            at,
            "persistence",
            format!(
                "appendonly yes but appendfsync {fsync}: the kernel decides when the AOF \
                 reaches the disk (some 30 s on Linux), and a crash of the machine forgets \
                 the locks granted meanwhile"
            ),
            Some(format!(
                "CONFIG SET appendfsync everysec (and in redis.conf), {delay}"
            )),
        ),
        Err(why) => report.add(
            Severity::Warn,
            at,
            "persistence",
            format!("appendonly yes, but appendfsync cannot be read ({why})"),
            Some(
                "make sure redis.conf says appendfsync everysec or always (or run doctor as \
                 a user allowed CONFIG GET)"
                    .into(),
            ),
        ),
    }
}

fn replication(ctx: &Ctx, info: &Info, probe: &mut Probe, at: &str, report: &mut Report) {
    let role = info.get("role").map_or("?", String::as_str);
    if role != "master" {
        let of = match (info.get("master_host"), info.get("master_port")) {
            (Some(h), Some(p)) => format!(" of {h}:{p}"),
            _ => String::new(),
        };
        report.add(
            Severity::Unsafe,
            at,
            "replication",
            format!(
                "role {role}: this is a replica{of}; rlock's writes are refused (READONLY), \
                 or with replica-read-only no, held here alone where the master never sees them"
            ),
            Some("point --url at the master, or give the Sentinels with --sentinel".into()),
        );
        return;
    }
    let replicas: u32 = info
        .get("connected_slaves")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let want = ctx.opts.min_replicas;
    if want > replicas {
        report.add(
            Severity::Unsafe,
            at,
            "replication",
            format!(
                "--min-replicas {want}, but {replicas} replica(s) connected: every acquire \
                 fails (exit 69)"
            ),
            Some(format!(
                "connect {want} replica(s), or lower --min-replicas to {replicas}"
            )),
        );
    } else if replicas == 0 {
        report.add(
            Severity::Ok,
            at,
            "replication",
            "role master, no replicas: if it fails, locks wait for it to come back".into(),
            None,
        );
    } else if want == 0 {
        let fix = if ctx.opts.cluster {
            "use fencing tokens where a second holder would do harm (--min-replicas is not \
             supported with --cluster)"
                .to_string()
        } else {
            "use --min-replicas 1 (RLOCK_MIN_REPLICAS=1): every grant and renewal is then \
             confirmed with WAIT"
                .to_string()
        };
        report.add(
            Severity::Warn,
            at,
            "replication",
            format!(
                "role master, {replicas} replica(s), --min-replicas not in use: replication \
                 is asynchronous, and a failover to a replica that had not yet received a \
                 grant lets a second holder take the lock"
            ),
            Some(fix),
        );
    } else {
        report.add(
            Severity::Ok,
            at,
            "replication",
            format!(
                "role master, {replicas} replica(s), --min-replicas {want}: each grant and \
                 renewal is confirmed on {want} (WAIT narrows the failover gap; it is not consensus)"
            ),
            None,
        );
    }
    if replicas > 0 || ctx.opts.sentinel.is_some() {
        match probe.config("min-replicas-to-write") {
            Ok(n) if n == "0" => report.add(
                Severity::Info,
                at,
                "replication",
                "min-replicas-to-write 0: a master cut off from its replicas keeps granting \
                 locks that a promoted replica will not know"
                    .into(),
                Some(
                    "CONFIG SET min-replicas-to-write 1 and min-replicas-max-lag 10 (and in \
                     redis.conf) to bound that window"
                        .into(),
                ),
            ),
            Ok(n) => report.add(
                Severity::Ok,
                at,
                "replication",
                format!(
                    "min-replicas-to-write {n}: a master cut off from its replicas stops \
                     granting locks"
                ),
                None,
            ),
            Err(why) => report.add(
                Severity::Info,
                at,
                "replication",
                format!("min-replicas-to-write cannot be read ({why})"),
                None,
            ),
        }
    }
}

/// This host's clock against the server's TIME, and the round trip.
fn clock(ctx: &Ctx, probe: &mut Probe, at: &str, report: &mut Report, facts: &mut Facts) {
    let mut samples: Vec<(Duration, f64)> = Vec::new();
    for _ in 0..SAMPLES {
        let before = SystemTime::now();
        let started = Instant::now();
        let reply: redis::RedisResult<(u64, u64)> = probe.query(&redis::cmd("TIME"));
        let rtt = started.elapsed();
        let (secs, micros) = match reply {
            Ok(t) => t,
            Err(e) => {
                report.add(
                    Severity::Warn,
                    at,
                    "clock",
                    format!("TIME refused ({}): clock not checked", short(&e)),
                    Some("allow +time for this user (rlock's scripts need it)".into()),
                );
                return;
            }
        };
        let server_ms = secs as f64 * 1e3 + micros as f64 / 1e3;
        let local = before.duration_since(UNIX_EPOCH).unwrap_or_default() + rtt / 2;
        samples.push((rtt, server_ms - local.as_secs_f64() * 1e3));
    }
    let mut rtts: Vec<Duration> = samples.iter().map(|s| s.0).collect();
    rtts.sort();
    let rtt = rtts[rtts.len() / 2];
    // The sample with the shortest round trip bounds the offset best.
    let offset = samples.iter().min_by_key(|s| s.0).map_or(0.0, |s| s.1);
    // Tenths of a millisecond; never "-0.0".
    let offset = (offset * 10.0).round() / 10.0 + 0.0;
    facts.rtt_ms = Some((rtt.as_secs_f64() * 1e6).round() / 1e3);
    facts.offset_ms = Some(offset);
    let margin = drift(ctx.ttl);
    let measured = format!(
        "offset {offset:+.1}ms from the server's TIME, round trip {} (median of {SAMPLES})",
        show(rtt)
    );
    let why = "leases are timed by the server's clock and this host's monotonic clock, \
               so an offset does not shorten them";
    if rtt > ctx.ttl / 3 {
        report.add(
            Severity::Unsafe,
            at,
            "clock",
            format!(
                "{measured}: longer than TTL/3 ({}), so exec's renewals cannot be confirmed in time",
                human(ctx.ttl / 3)
            ),
            Some("use a longer --ttl, or a Redis closer to this host".into()),
        );
    } else if offset.abs() > margin.as_secs_f64() * 1e3 {
        report.add(
            Severity::Warn,
            at,
            "clock",
            format!(
                "{measured}; {why}, but an offset beyond the drift margin ({} at TTL {}) \
                 says a clock is not synchronized, and Redis expires keys by its wall clock: \
                 when the server's clock is stepped to correct it, held locks end that much \
                 early",
                show(margin),
                human(ctx.ttl)
            ),
            Some("run NTP (chrony, systemd-timesyncd) on this host and the server, slewing rather than stepping".into()),
        );
    } else if rtt > margin {
        report.add(
            Severity::Warn,
            at,
            "clock",
            format!(
                "{measured}: the round trip exceeds the drift margin ({} at TTL {}); a \
                 lease still counts from when its request was sent, so it stays safe, but \
                 each keeps less than TTL - margin of validity",
                show(margin),
                human(ctx.ttl)
            ),
            Some("use a Redis closer to this host, or a longer --ttl".into()),
        );
    } else {
        report.add(
            Severity::Ok,
            at,
            "clock",
            format!(
                "{measured}: within the drift margin ({} at TTL {}); {why}",
                show(margin),
                human(ctx.ttl)
            ),
            None,
        );
    }
}

/// A duration with sub-millisecond precision.
fn show(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        format!("{:.2}ms", d.as_secs_f64() * 1e3)
    } else {
        human(d)
    }
}

/// Whether a missing permission breaks rlock here.
#[derive(Clone, Copy, PartialEq)]
enum Need {
    Always,
    /// Only with --min-replicas.
    MinReplicas,
    /// Only under RedLock (telling masters apart).
    RedLock,
    /// Only with --sentinel.
    Sentinel,
    /// Only with --cluster.
    Cluster,
    /// Nothing breaks without it: the scripts then cannot tell data rlock
    /// did not write at a lock's fence key, a wake-up list or a queue key
    /// of a lock in use from rlock's own, and take it as rlock's.
    Recognize,
}

/// Every command rlock sends or its scripts run (the README's ACL line,
/// plus what Sentinel and Cluster connections need), with arguments shaped
/// as rlock uses them, on keys of a lock nobody uses.
fn needed(probe: &str, prefix: &str) -> Vec<(&'static str, Vec<String>, Need)> {
    let k = probe;
    let h = format!("{k}:h");
    let w = format!("{k}:w:doctor");
    let fence = format!("{k}:fence");
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    use Need::*;
    vec![
        ("evalsha", v(&["evalsha", &"0".repeat(40), "1", k]), Always),
        ("eval", v(&["eval", "return 1", "1", k]), Always),
        ("wait", v(&["wait", "0", "0"]), MinReplicas),
        ("info", v(&["info", "server"]), RedLock),
        ("blpop", v(&["blpop", &w, "1"]), Always),
        (
            "scan",
            v(&[
                "scan",
                "0",
                "match",
                &format!("{prefix}*"),
                "count",
                "1000",
                "type",
                "hash",
            ]),
            Always,
        ),
        ("rpush", v(&["rpush", &w, "1"]), Always),
        ("pexpire", v(&["pexpire", &w, "1000"]), Always),
        ("time", v(&["time"]), Always),
        ("type", v(&["type", k]), Always),
        ("hget", v(&["hget", k, "f"]), Always),
        ("hmget", v(&["hmget", k, "f"]), Always),
        ("hset", v(&["hset", k, "f", "1"]), Always),
        ("hdel", v(&["hdel", k, "f"]), Always),
        ("hincrby", v(&["hincrby", k, "f", "1"]), Always),
        ("hexists", v(&["hexists", k, "f"]), Always),
        ("zadd", v(&["zadd", &h, "1", "m"]), Always),
        ("zrem", v(&["zrem", &h, "m"]), Always),
        ("zrange", v(&["zrange", &h, "0", "-1"]), Always),
        ("zrangebyscore", v(&["zrangebyscore", &h, "0", "1"]), Always),
        ("zscore", v(&["zscore", &h, "m"]), Always),
        ("zrank", v(&["zrank", &h, "m"]), Always),
        ("zcard", v(&["zcard", &h]), Always),
        ("zcount", v(&["zcount", &h, "0", "1"]), Always),
        ("get", v(&["get", &fence]), Always),
        ("set", v(&["set", &format!("{k}:r:doctor"), "1"]), Always),
        ("del", v(&["del", k]), Always),
        ("exists", v(&["exists", k]), Always),
        ("pttl", v(&["pttl", &fence]), Recognize),
        ("role", v(&["role"]), Sentinel),
        ("cluster|slots", v(&["cluster", "slots"]), Cluster),
    ]
}

/// Asks, for every command line in ARGV (each given as its word count,
/// then its words), whether the calling user may run it: 1 yes, 0 no, -1
/// not a command this server knows. Touches no key. Redis 7 or newer.
const ACL_CHECK: &str = r#"
if redis.acl_check_cmd == nil then
  return redis.error_reply('NOACLCHECK redis.acl_check_cmd needs Redis 7')
end
local out, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local ok, allowed = pcall(redis.acl_check_cmd, unpack(ARGV, i + 1, i + n))
  if not ok then
    out[#out + 1] = -1
  elseif allowed then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
  i = i + n + 1
end
return out
"#;

/// Whether the connected user may run every command rlock needs, asked
/// without running any: ACL DRYRUN for the user ACL WHOAMI names, else
/// `redis.acl_check_cmd` in a script.
fn permissions(ctx: &Ctx, probe: &mut Probe, at: &str, report: &mut Report) {
    let needed = needed(&ctx.probe, &ctx.prefix);
    let verdicts = dryrun(probe, &needed).or_else(|dry| {
        acl_check(probe, &needed)
            .map_err(|(refused, lua)| (refused, format!("ACL DRYRUN: {dry}; EVAL: {lua}")))
    });
    let verdicts = match verdicts {
        Ok(v) => v,
        // EVAL refused: every lock needs it, and nothing else can be asked.
        Err((true, why)) => {
            report.add(
                Severity::Unsafe,
                at,
                "permissions",
                format!(
                    "this user may not run eval, which every lock needs; the other commands \
                     cannot be checked ({why})"
                ),
                Some(
                    "ACL SETUSER <user> +eval (the README lists every command rlock needs)".into(),
                ),
            );
            return;
        }
        Err((false, why)) => {
            report.add(
                Severity::Warn,
                at,
                "permissions",
                format!("cannot ask the server which commands this user may run ({why})"),
                Some("run every rlock command once as this user, or upgrade to Redis 7".into()),
            );
            return;
        }
    };
    let applies = |need: Need| match need {
        Need::Always => true,
        Need::MinReplicas => ctx.opts.min_replicas > 0,
        Need::RedLock => ctx.redlock(),
        Need::Sentinel => ctx.opts.sentinel.is_some(),
        Need::Cluster => ctx.opts.cluster,
        Need::Recognize => false,
    };
    let mut missing = Vec::new();
    let mut optional = Vec::new();
    let mut unrecognized = Vec::new();
    for ((name, _, need), ok) in needed.iter().zip(&verdicts) {
        if *ok == Some(false) {
            if applies(*need) {
                missing.push(*name);
            } else if *need == Need::MinReplicas {
                optional.push(format!("{name} (needed for --min-replicas)"));
            } else if *need == Need::RedLock {
                optional.push(format!("{name} (needed under RedLock)"));
            } else if *need == Need::Recognize {
                unrecognized.push(*name);
            }
        }
    }
    let plus = |names: &[&str]| {
        names
            .iter()
            .map(|n| format!("+{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if !missing.is_empty() {
        report.add(
            Severity::Unsafe,
            at,
            "permissions",
            format!(
                "this user may not run {} on rlock's keys: the rlock commands that need it \
                 fail (exit 69)",
                missing.join(", ")
            ),
            Some(format!(
                "ACL SETUSER <user> {} (the README lists every command rlock needs)",
                plus(&missing)
            )),
        );
    } else {
        report.add(
            Severity::Ok,
            at,
            "permissions",
            format!(
                "this user may run every command rlock needs on keys under {:?}",
                ctx.prefix
            ),
            None,
        );
    }
    if !unrecognized.is_empty() {
        report.add(
            Severity::Info,
            at,
            "permissions",
            format!(
                "this user may not run {}: rlock works, but takes data it did not write at \
                 a lock's fencing key, a wake-up list or a queue key of a lock in use for its \
                 own, and ACL LOG counts each refusal",
                unrecognized.join(", ")
            ),
            Some(format!("ACL SETUSER <user> {}", plus(&unrecognized))),
        );
    }
    if !optional.is_empty() {
        let names: Vec<&str> = optional
            .iter()
            .filter_map(|o| o.split(' ').next())
            .collect();
        report.add(
            Severity::Info,
            at,
            "permissions",
            format!("this user may not run {}", optional.join(", ")),
            Some(format!(
                "ACL SETUSER <user> {} if you use that",
                plus(&names)
            )),
        );
    }
}

/// ACL DRYRUN for each command; `None` where the server does not know it.
fn dryrun(
    probe: &mut Probe,
    needed: &[(&str, Vec<String>, Need)],
) -> std::result::Result<Vec<Option<bool>>, String> {
    let user: String = probe
        .query(redis::cmd("ACL").arg("WHOAMI"))
        .map_err(|e| short(&e))?;
    let mut out = Vec::new();
    for (_, argv, _) in needed {
        let reply: redis::RedisResult<redis::Value> =
            probe.query(redis::cmd("ACL").arg("DRYRUN").arg(&user).arg(argv));
        out.push(match reply {
            Ok(redis::Value::Okay) => Some(true),
            Ok(redis::Value::SimpleString(s)) if s == "OK" => Some(true),
            Ok(_) => Some(false),
            // DRYRUN itself refused or unknown (before Redis 7): give up.
            Err(e) if e.code() == Some("NOPERM") || out.is_empty() => return Err(short(&e)),
            // A command this server does not know.
            Err(_) => None,
        });
    }
    Ok(out)
}

/// `redis.acl_check_cmd` for each command, in one script. Fails with
/// `true` when the user may not run EVAL.
fn acl_check(
    probe: &mut Probe,
    needed: &[(&str, Vec<String>, Need)],
) -> std::result::Result<Vec<Option<bool>>, (bool, String)> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(ACL_CHECK).arg(0);
    for (_, argv, _) in needed {
        cmd.arg(argv.len()).arg(argv);
    }
    let reply: Vec<i64> = probe
        .query(&cmd)
        .map_err(|e| (e.code() == Some("NOPERM"), short(&e)))?;
    Ok(reply
        .iter()
        .map(|v| match v {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands doctor checks are those of the README's ACL line (the
    /// test suite runs every rlock command as that user), plus ROLE and
    /// CLUSTER SLOTS for Sentinel and Cluster connections.
    #[test]
    fn checks_the_readme_acl() {
        let readme = include_str!("../README.md");
        let line = readme
            .lines()
            .find(|l| l.starts_with("ACL SETUSER rlock "))
            .expect("the README's ACL line");
        let mut documented: Vec<&str> = line
            .split_whitespace()
            .filter_map(|w| w.strip_prefix('+'))
            .collect();
        let mut checked: Vec<&str> = needed("rlock:{x}", "rlock:")
            .into_iter()
            .filter(|(_, _, need)| !matches!(need, Need::Sentinel | Need::Cluster))
            .map(|(name, _, _)| name)
            .collect();
        documented.sort();
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
