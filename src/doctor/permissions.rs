//! Permission checks: would each command rlock sends be allowed (ACL DRYRUN, or the ACL check script)?

#[allow(clippy::wildcard_imports)]
use super::*;

/// Whether a missing permission breaks rlock here.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Need {
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
    /// Nothing breaks without it: the reads' read-only script calls
    /// (EVALSHA_RO, EVAL_RO), which rlock falls back from to EVALSHA after
    /// one refused call per connection (counted in ACL LOG).
    ReadOnly,
}

/// Every command rlock sends or its scripts run (the ACL line of docs/deployments.md,
/// plus what Sentinel and Cluster connections need), with arguments shaped
/// as rlock uses them, on keys of a lock nobody uses.
pub(super) fn needed(probe: &str, prefix: &str) -> Vec<(&'static str, Vec<String>, Need)> {
    let k = probe;
    let h = format!("{k}:h");
    let w = format!("{k}:w:doctor");
    let fence = format!("{k}:fence");
    let ix = crate::lock::index_shard_key(prefix, 0);
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    use Need::*;
    vec![
        ("evalsha", v(&["evalsha", &"0".repeat(40), "1", k]), Always),
        ("eval", v(&["eval", "return 1", "1", k]), Always),
        (
            "evalsha_ro",
            v(&["evalsha_ro", &"0".repeat(40), "1", k]),
            ReadOnly,
        ),
        ("eval_ro", v(&["eval_ro", "return 1", "1", k]), ReadOnly),
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
        // The history (lua/common.lua, log_event; history.lua).
        (
            "ltrim",
            v(&["ltrim", &format!("{k}:log"), "-200", "-1"]),
            Always,
        ),
        (
            "lrange",
            v(&["lrange", &format!("{k}:log"), "-20", "-1"]),
            Always,
        ),
        ("hgetall", v(&["hgetall", &format!("{k}:n")]), Always),
        // The index of locks in use (lua/index.lua, index_drop.lua, list).
        (
            "zscan",
            v(&["zscan", &ix, "0", "match", "*", "count", "1000"]),
            Always,
        ),
        (
            "zremrangebyscore",
            v(&["zremrangebyscore", &ix, "-inf", "(1"]),
            Always,
        ),
        ("pexpireat", v(&["pexpireat", &ix, "1"]), Always),
        ("role", v(&["role"]), Sentinel),
        ("cluster|slots", v(&["cluster", "slots"]), Cluster),
        // redis-rs' Cluster client checks every node connection with PING.
        ("ping", v(&["ping"]), Cluster),
    ]
}

/// Asks, for every command line in ARGV (each given as its word count,
/// then its words), whether the calling user may run it: 1 yes, 0 no, -1
/// not a command this server knows. Touches no key. Redis 7 or newer.
pub(super) const ACL_CHECK: &str = include_str!(concat!(env!("OUT_DIR"), "/lua/acl_check.lua"));

/// Whether the connected user may run every command rlock needs, asked
/// without running any: ACL DRYRUN for the user ACL WHOAMI names, else
/// `redis.acl_check_cmd` in a script.
pub(super) fn permissions(ctx: &Ctx, probe: &mut Probe, at: &str, report: &mut Report) {
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
                    "ACL SETUSER <user> +eval (docs/deployments.md lists every command rlock needs)".into(),
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
    let applies = |need: Need| applies(ctx, need);
    let mut missing = Vec::new();
    let mut optional = Vec::new();
    let mut unrecognized = Vec::new();
    let mut no_ro = Vec::new();
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
            } else if *need == Need::ReadOnly {
                no_ro.push(*name);
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
                 fail (exit 77)",
                missing.join(", ")
            ),
            Some(format!(
                "ACL SETUSER <user> {} (docs/deployments.md lists every command rlock needs)",
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
    if !no_ro.is_empty() {
        report.add(
            Severity::Info,
            at,
            "permissions",
            format!(
                "this user may not run {}: rlock's reads (status, list, history, ...) are \
                 refused once per connection, counted in ACL LOG, then sent with EVALSHA",
                no_ro.join(", ")
            ),
            Some(format!(
                "ACL SETUSER <user> {} (Redis 7 or newer)",
                plus(&no_ro)
            )),
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

/// Whether a missing permission of this kind breaks rlock as `ctx` is
/// configured.
pub(super) fn applies(ctx: &Ctx, need: Need) -> bool {
    match need {
        Need::Always => true,
        Need::MinReplicas => ctx.opts.min_replicas > 0,
        Need::RedLock => ctx.redlock(),
        Need::Sentinel => ctx.opts.sentinel.is_some(),
        Need::Cluster => ctx.opts.cluster,
        Need::Recognize | Need::ReadOnly => false,
    }
}

/// ACL DRYRUN for each command; `None` where the server does not know it.
pub(super) fn dryrun(
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
pub(super) fn acl_check(
    probe: &mut Probe,
    needed: &[(&str, Vec<String>, Need)],
) -> std::result::Result<Vec<Option<bool>>, (bool, String)> {
    acl_check_with("EVAL", probe, needed)
}

/// [`acl_check`] sent with `verb` (EVAL, or EVAL_RO for a user without
/// EVAL); fails with `true` when the user may not run `verb`.
pub(super) fn acl_check_with(
    verb: &str,
    probe: &mut Probe,
    needed: &[(&str, Vec<String>, Need)],
) -> std::result::Result<Vec<Option<bool>>, (bool, String)> {
    let mut cmd = redis::cmd(verb);
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
