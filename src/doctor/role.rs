//! `doctor --role`: does this user have exactly what one role of
//! docs/deployments.md ("Roles") needs? Too little: which rlock command
//! would fail, for want of which permission. Too much: what it could do
//! that the role must not (a job that can break, a monitor that can
//! write). Asked as the permission check asks (ACL DRYRUN, else
//! `redis.acl_check_cmd` in a script): nothing is run on a lock key.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The roles of docs/deployments.md, each one ACL line that Redis itself
/// enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Takes, waits for, renews, releases and checks its own locks; reads
    /// status and history. May not break.
    Job,
    /// A job that may also break locks.
    Operator,
    /// Reads only: status, list, top, metrics, the exporter, history,
    /// doctor. Writes nothing.
    Monitor,
}

impl Role {
    /// Every role, as `--role` names them.
    pub const ALL: [Role; 3] = [Role::Job, Role::Operator, Role::Monitor];

    /// Its name: job, operator, monitor.
    pub fn name(self) -> &'static str {
        match self {
            Role::Job => "job",
            Role::Operator => "operator",
            Role::Monitor => "monitor",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Role> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                crate::Error::invalid(format!("no role {s:?}: job, operator or monitor"))
            })
    }
}

/// Whether a role must, or must not, be allowed a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Want {
    Must,
    MustNot,
    /// Either way (a command the role's line leaves out, harmlessly).
    Either,
    /// Nothing breaks without it (`Need::Recognize`): said as info.
    Nice,
}

/// The commands that write (or pop: BLPOP) a key, or run a script that may:
/// a monitor must be refused each of them on rlock's keys.
const WRITES: &[&str] = &[
    "evalsha",
    "eval",
    "blpop",
    "rpush",
    "pexpire",
    "hset",
    "hdel",
    "hincrby",
    "zadd",
    "zrem",
    "set",
    "del",
    "ltrim",
    "zremrangebyscore",
    "pexpireat",
];

/// The commands the reads' scripts run (lua/status.lua, overview.lua,
/// history.lua) and the read commands the client sends: what a monitor
/// needs (its line in docs/deployments.md#roles).
const MONITOR_READS: &[&str] = &[
    "evalsha_ro",
    "eval_ro",
    "zscan",
    "scan",
    "info",
    "time",
    "type",
    "exists",
    "pttl",
    "get",
    "hget",
    "hmget",
    "hgetall",
    "zrange",
    "zrangebyscore",
    "zscore",
    "zcount",
    "lrange",
    "role",
    "cluster|slots",
    "ping",
];

/// The break's script call: EVALSHA on a lock's keys and its break
/// key `<prefix>!{<name>}`, which only a break declares (lua/break.lua).
pub(super) const BREAK: &str = "break";

/// The commands asked about for a role: those of the permission check
/// ([`needed`], the read-only script calls included) and a break's script
/// call.
pub(super) fn asked(probe: &str, prefix: &str) -> Vec<(&'static str, Vec<String>, Need)> {
    let mut all = needed(probe, prefix);
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let sha = "0".repeat(40);
    let break_key = LockName::new(prefix, "rlock-doctor")
        .map(|l| l.break_permission_key())
        .unwrap_or_else(|_| format!("{prefix}!{{rlock-doctor}}"));
    all.push((
        BREAK,
        v(&["evalsha", &sha, "2", probe, &break_key]),
        Need::Always,
    ));
    all
}

/// What `role` wants of command `name`, where `applies` says whether the
/// setting that needs it is in use (--min-replicas, RedLock, ...).
pub(super) fn want(role: Role, name: &str, need: Need, applies: bool) -> Want {
    let needed = || match need {
        Need::Recognize | Need::ReadOnly => Want::Nice,
        _ if applies => Want::Must,
        _ => Want::Either,
    };
    match (role, name) {
        (Role::Operator, BREAK) => Want::Must,
        (_, BREAK) => Want::MustNot,
        (Role::Monitor, "evalsha_ro" | "eval_ro") => Want::Must,
        (Role::Monitor, n) if WRITES.contains(&n) => Want::MustNot,
        // What only the writers' scripts run (the monitor line leaves it
        // out, harmlessly).
        (Role::Monitor, n) if !MONITOR_READS.contains(&n) => Want::Either,
        _ => needed(),
    }
}

/// The rlock commands that fail for a `role` user refused `name`.
fn fails(role: Role, name: &str) -> &'static str {
    match name {
        BREAK => "break",
        "blpop" | "rpush" => "acquire, exec and rw when they wait",
        "wait" => "every lock command with --min-replicas",
        "info" => "every command under RedLock",
        "role" => "every command with --sentinel",
        "cluster|slots" | "ping" => "every command with --cluster",
        "zscan" => "list, top, metrics and the exporter",
        "scan" => "list with RLOCK_LIST_SCAN=1",
        "time" => "doctor's clock check",
        _ if role == Role::Monitor => "status, history, list, top, metrics and the exporter",
        _ => "acquire, exec, rw, renew, release, check, status and history (their scripts run it)",
    }
}

/// The findings (severity, what, fix) for `role`, given each command
/// asked about (`name`, what the role wants) and whether the user may run
/// it (None: the server does not know the command).
pub(super) fn judge(
    role: Role,
    prefix: &str,
    asked: &[(&str, Want, Option<bool>)],
) -> Vec<(Severity, String, Option<String>)> {
    let r = role.name();
    let line = format!("the {r} line of docs/deployments.md#roles");
    let mut out = Vec::new();
    let mut missing: Vec<&str> = Vec::new();
    let mut extra: Vec<&str> = Vec::new();
    let mut nice: Vec<&str> = Vec::new();
    for (name, want, allowed) in asked {
        match (want, allowed) {
            (Want::Must, Some(false)) => missing.push(name),
            (Want::MustNot, Some(true)) => extra.push(name),
            (Want::Nice, Some(false)) => nice.push(name),
            _ => {}
        }
    }
    for name in &missing {
        let what = match *name {
            BREAK => format!(
                "too little for the {r} role: `rlock break` fails (exit 77): this user may not \
                 use the break permission keys {prefix}!{{*"
            ),
            n => format!(
                "too little for the {r} role: {} fail (exit 77): this user may not run {n} on \
                 rlock's keys",
                fails(role, n)
            ),
        };
        let fix = match *name {
            BREAK => format!("ACL SETUSER <user> ~{prefix}!{{* ({line})"),
            n => format!("ACL SETUSER <user> +{n} ({line})"),
        };
        out.push((Severity::Unsafe, what, Some(fix)));
    }
    if extra.contains(&BREAK) {
        out.push((
            Severity::Unsafe,
            format!(
                "too much for the {r} role: can break locks (`rlock break`): its ACL covers the \
                 break permission keys {prefix}!{{*, which only an operator's may"
            ),
            Some(format!(
                "ACL SETUSER <user> resetkeys ~{prefix}{{* ({line})"
            )),
        ));
    }
    let writes: Vec<&str> = extra.iter().copied().filter(|n| *n != BREAK).collect();
    if !writes.is_empty() {
        out.push((
            Severity::Unsafe,
            format!(
                "too much for the {r} role: can write rlock's keys ({}): it could take, renew, \
                 release or break locks",
                writes.join(", ")
            ),
            Some(format!(
                "ACL SETUSER <user> -{} with %R~{prefix}* ({line})",
                writes.join(" -")
            )),
        ));
    }
    if !nice.is_empty() {
        out.push((
            Severity::Info,
            format!(
                "this user may not run {}: rlock works, but takes data it did not write at a \
                 lock's fencing key, a wake-up list or a queue key of a lock in use for its own",
                nice.join(", ")
            ),
            Some(format!("ACL SETUSER <user> +{}", nice.join(" +"))),
        ));
    }
    if missing.is_empty() && extra.is_empty() {
        out.push((
            Severity::Ok,
            format!(
                "this user has exactly what the {r} role needs on keys under {prefix:?} \
                 (docs/deployments.md#roles)"
            ),
            None,
        ));
    }
    out
}

/// The role check on one server, in place of the permission check.
pub(super) fn role(ctx: &Ctx, role: Role, probe: &mut Probe, at: &str, report: &mut Report) {
    let asked = asked(&ctx.probe, &ctx.prefix);
    let verdicts = dryrun(probe, &asked)
        .or_else(|dry| {
            acl_check(probe, &asked).map_err(|(_, lua)| format!("ACL DRYRUN: {dry}; EVAL: {lua}"))
        })
        .or_else(|why| {
            acl_check_with("EVAL_RO", probe, &asked)
                .map_err(|(_, ro)| format!("{why}; EVAL_RO: {ro}"))
        });
    let verdicts = match verdicts {
        Ok(v) => v,
        Err(why) => {
            report.add(
                Severity::Warn,
                at,
                "role",
                format!(
                    "cannot ask the server which commands this user may run, so not whether it \
                     fits the {} role ({why})",
                    role.name()
                ),
                Some(
                    "run doctor --role on Redis 7 or newer (ACL DRYRUN or redis.acl_check_cmd)"
                        .into(),
                ),
            );
            return;
        }
    };
    let judged: Vec<(&str, Want, Option<bool>)> = asked
        .iter()
        .zip(verdicts)
        .map(|((name, _, need), ok)| (*name, want(role, name, *need, applies(ctx, *need)), ok))
        .collect();
    for (severity, what, fix) in judge(role, &ctx.prefix, &judged) {
        report.add(severity, at, "role", what, fix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The monitor's line in docs/deployments.md (the Redis 7 one) gives
    /// exactly the commands [`MONITOR_READS`] says a monitor needs (less
    /// what only --sentinel and --cluster add).
    #[test]
    fn monitor_reads_are_the_documented_line() {
        let doc = include_str!("../../docs/deployments.md");
        let line = doc
            .lines()
            .find(|l| l.starts_with("ACL SETUSER rlock-monitor ") && l.contains("%R~"))
            .expect("the monitor line of docs/deployments.md#roles");
        let mut documented: Vec<&str> = line
            .split_whitespace()
            .filter_map(|w| w.strip_prefix('+'))
            .collect();
        let mut reads: Vec<&str> = MONITOR_READS
            .iter()
            .copied()
            .filter(|n| !matches!(*n, "role" | "cluster|slots"))
            .collect();
        documented.sort_unstable();
        reads.sort_unstable();
        assert_eq!(documented, reads);
    }

    /// Every command asked about, allowed where `allowed` says (by name).
    fn user(role: Role, allowed: &dyn Fn(&str) -> bool) -> Vec<(Severity, String, Option<String>)> {
        let asked = asked("rlock:{rlock-doctor}", "rlock:");
        let judged: Vec<(&str, Want, Option<bool>)> = asked
            .iter()
            .map(|(n, _, need)| {
                (
                    *n,
                    want(role, n, *need, *need == Need::Always),
                    Some(allowed(n)),
                )
            })
            .collect();
        judge(role, "rlock:", &judged)
    }

    fn reads(n: &str) -> bool {
        !WRITES.contains(&n) && n != BREAK && n != "wait"
    }

    #[test]
    fn each_role_passes_with_exactly_its_permissions() {
        for (role, allowed) in [
            (Role::Job, &(|n: &str| n != BREAK) as &dyn Fn(&str) -> bool),
            (Role::Operator, &|_: &str| true),
            (Role::Monitor, &reads),
        ] {
            let found = user(role, allowed);
            assert_eq!(found.len(), 1, "{role:?}: {found:?}");
            assert_eq!(found[0].0, Severity::Ok);
            assert!(found[0].1.contains("exactly what the"), "{found:?}");
        }
    }

    #[test]
    fn a_job_that_can_break_is_too_much() {
        let found = user(Role::Job, &|_| true);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, Severity::Unsafe);
        assert!(
            found[0]
                .1
                .starts_with("too much for the job role: can break"),
            "{found:?}"
        );
        assert!(
            found[0].2.as_ref().unwrap().contains("~rlock:{*"),
            "{found:?}"
        );
    }

    #[test]
    fn an_operator_that_cannot_break_is_too_little() {
        let found = user(Role::Operator, &|n| n != BREAK);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].1.contains("`rlock break` fails (exit 77)"),
            "{found:?}"
        );
        assert!(
            found[0].2.as_ref().unwrap().contains("~rlock:!{*"),
            "{found:?}"
        );
    }

    #[test]
    fn a_monitor_that_can_write_is_too_much_and_one_without_reads_too_little() {
        let found = user(Role::Monitor, &|n| reads(n) || n == "evalsha" || n == "set");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].1.contains("can write rlock's keys (evalsha, set)"),
            "{found:?}"
        );
        let found = user(Role::Monitor, &|n| reads(n) && n != "evalsha_ro");
        assert!(found[0].1.contains("may not run evalsha_ro"), "{found:?}");
        assert!(found[0].1.contains("status, history, list"), "{found:?}");
        // A job's line is too much for a monitor: it can write.
        let found = user(Role::Monitor, &|n| {
            n != BREAK && n != "evalsha_ro" && n != "eval_ro"
        });
        assert!(found.iter().any(|f| f.1.contains("can write")), "{found:?}");
    }

    #[test]
    fn a_job_missing_a_command_names_what_fails() {
        let found = user(Role::Job, &|n| n != BREAK && n != "blpop" && n != "hset");
        let text: Vec<&str> = found.iter().map(|f| f.1.as_str()).collect();
        assert!(
            text[0].contains("acquire, exec and rw when they wait"),
            "{text:?}"
        );
        assert!(text[0].contains("may not run blpop"), "{text:?}");
        assert!(text[1].contains("hset"), "{text:?}");
        assert!(found.iter().all(|f| f.0 == Severity::Unsafe), "{found:?}");
    }

    #[test]
    fn roles_are_named() {
        for r in Role::ALL {
            assert_eq!(r.name().parse::<Role>().unwrap(), r);
        }
        assert!("admin".parse::<Role>().is_err());
    }
}
