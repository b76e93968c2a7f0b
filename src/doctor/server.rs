//! Per-server checks: version, eviction, memory headroom, persistence, replication.

#[allow(clippy::wildcard_imports)]
use super::*;

/// Every check on one server; returns what was measured.
pub(super) fn node(ctx: &Ctx, probe: &mut Probe, at: &str, report: &mut Report) -> Facts {
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
            memory(&info, at, report, &mut facts);
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
    match ctx.role {
        Some(r) => role(ctx, r, probe, at, report),
        None => permissions(ctx, probe, at, report),
    }
    facts
}

pub(super) fn parse_version(v: &str) -> Option<(u32, u32)> {
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??))
}

pub(super) fn version(info: &Info, at: &str, report: &mut Report) {
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

pub(super) fn eviction(info: &Info, at: &str, report: &mut Report) {
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

/// Memory in use against `maxmemory`: at the limit, Redis refuses every
/// new lock and waiter (lua/common.lua), or with an eviction policy
/// deletes keys to make room.
pub(super) fn memory(info: &Info, at: &str, report: &mut Report, facts: &mut Facts) {
    let num = |k: &str| info.get(k).and_then(|v| v.parse::<u64>().ok());
    let (Some(used), Some(max)) = (num("used_memory"), num("maxmemory")) else {
        return;
    };
    // What Redis weighs against maxmemory: replication and AOF buffers
    // do not count.
    let used = used.saturating_sub(num("mem_not_counted_for_evict").unwrap_or(0));
    facts.used_memory = Some(used);
    facts.maxmemory = Some(max);
    if max == 0 {
        report.add(
            Severity::Ok,
            at,
            "memory",
            format!(
                "{} used, no maxmemory: Redis refuses nothing for memory (the host's memory \
                 is the limit)",
                bytes(used)
            ),
            None,
        );
        return;
    }
    let percent = used.saturating_mul(100) / max;
    let measured = format!(
        "{} used of maxmemory {} ({percent}%)",
        bytes(used),
        bytes(max)
    );
    let evicts = info
        .get("maxmemory_policy")
        .is_some_and(|p| p != "noeviction");
    let at_limit = if evicts {
        "Redis evicts keys to make room, held locks among them (see eviction)"
    } else {
        "Redis refuses every new lock and waiter (exit 69); held locks still renew and release"
    };
    let fix = || {
        Some(
            "free memory (delete what other programs left, or give locks a Redis of their \
             own) or raise maxmemory (CONFIG SET maxmemory, and in redis.conf)"
                .to_string(),
        )
    };
    if used >= max {
        report.add(
            Severity::Unsafe,
            at,
            "memory",
            format!("{measured}: at the limit, {at_limit}"),
            fix(),
        );
    } else if (max - used).saturating_mul(100) < max * MEMORY_MARGIN_PERCENT {
        report.add(
            Severity::Warn,
            at,
            "memory",
            format!(
                "{measured}: headroom {} is under {MEMORY_MARGIN_PERCENT}% of maxmemory; at \
                 the limit, {at_limit}",
                bytes(max - used)
            ),
            fix(),
        );
    } else {
        report.add(
            Severity::Ok,
            at,
            "memory",
            format!("{measured}: headroom {}", bytes(max - used)),
            None,
        );
    }
}

/// A byte count for people: `812 B`, `64.0 KiB`, `1.50 MiB`, `2.00 GiB`.
pub(super) fn bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let x = n as f64;
    if n < 1024 {
        format!("{n} B")
    } else if x < KIB * KIB {
        format!("{:.1} KiB", x / KIB)
    } else if x < KIB * KIB * KIB {
        format!("{:.2} MiB", x / (KIB * KIB))
    } else {
        format!("{:.2} GiB", x / (KIB * KIB * KIB))
    }
}

pub(super) fn persistence(
    ctx: &Ctx,
    info: &Info,
    probe: &mut Probe,
    at: &str,
    report: &mut Report,
) {
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

pub(super) fn replication(
    ctx: &Ctx,
    info: &Info,
    probe: &mut Probe,
    at: &str,
    report: &mut Report,
) {
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
