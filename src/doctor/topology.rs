//! The deployment's shape: RedLock masters that are one server, Sentinel, Cluster.

#[allow(clippy::wildcard_imports)]
use super::*;

/// One Redis, or RedLock over several.
pub(super) fn redlock_or_one(ctx: &Ctx, servers: &[Server], report: &mut Report) -> Result<()> {
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

/// RedLock: the masters are distinct servers, and enough of them.
pub(super) fn redlock(n: usize, ids: &[(String, Option<String>)], report: &mut Report) {
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
pub(super) fn sentinel(ctx: &Ctx, server: &Server, name: &str, report: &mut Report) -> Result<()> {
    let label = server.label.clone();
    let mut named: Vec<(String, String)> = Vec::new();
    let mut down = 0;
    for a in server.ask_sentinels() {
        let at = a.at;
        // The master (conn's one Sentinel query), then CKQUORUM on the
        // same connection.
        let answer = a.reply.map(|(addr, mut c)| {
            let quorum = match redis::cmd("SENTINEL")
                .arg("CKQUORUM")
                .arg(name)
                .query::<String>(&mut c)
            {
                Ok(s) => s,
                Err(e) => short(&e),
            };
            (addr, quorum)
        });
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
pub(super) fn cluster(ctx: &Ctx, server: &Server, report: &mut Report) -> Result<()> {
    let label = server.label.clone();
    let mut conn = server.connect()?;
    let Conn::Cluster(c) = &mut conn else {
        return Err(crate::Error::Protocol(
            "a cluster connection expected".into(),
        ));
    };
    let random = || RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let failed = |e: redis::RedisError, what: &str| {
        crate::Error::unavailable(format!("{what} on {label}"), e)
    };
    // Through `run`: a first seed that knows no slots is passed over.
    // A user refused CLUSTER INFO (the roles' lines lack it: locking does
    // not send it) gets the slots' coverage checked without the state.
    let info = match c.run(|c| routed::<String>(c, redis::cmd("CLUSTER").arg("INFO"), random())) {
        Ok(text) => Some(parse_info(&text)),
        Err(e) if crate::error::is_refused_by_acl(&e) => {
            report.add(
                Severity::Warn,
                &label,
                "cluster",
                format!(
                    "this user may not run CLUSTER INFO ({}): cluster_state not checked, only \
                     which slots have a master",
                    short(&e)
                ),
                Some("check as a user with +cluster|info".into()),
            );
            None
        }
        Err(e) => return Err(failed(e, "CLUSTER INFO")),
    };
    // The one CLUSTER SLOTS parser (conn's), through `run` too.
    let slots = c.slots().map_err(|e| failed(e, "CLUSTER SLOTS"))?;
    let covered = slots.covered();
    let masters = slots.masters();
    let c = c.inner();
    let state = info.as_ref().map_or("not read", |i| {
        i.get("cluster_state").map_or("?", String::as_str)
    });
    if (info.is_none() || state == "ok") && covered == 16384 {
        report.add(
            Severity::Ok,
            &label,
            "cluster",
            format!(
                "cluster_state {state}, all 16384 slots served by {} masters",
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
    let lonely = masters.iter().filter(|m| m.replicas == 0).count();
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
    for m in &masters {
        let (host, port, replicas) = (&m.host, m.port, m.replicas);
        let at = format!("{host}:{port}");
        let mut probe = Probe::Node {
            conn: c,
            host: host.clone(),
            port,
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
        if replicas > 0 && !timeout_checked {
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
/// exceed it (docs/deployments.md, "Size the TTL to the failover").
#[cfg(feature = "cluster")]
pub(super) fn failover_time(ctx: &Ctx, probe: &mut Probe, label: &str, report: &mut Report) {
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
