//! The job, operator and monitor roles of docs/deployments.md ("Roles"):
//! each user is made from its line in the doc, word for word, so the doc
//! and the test cannot drift. Redis itself refuses a job's break (its ACL
//! does not cover the break permission key break.lua names), with nothing
//! changed; `doctor --role` tells each role's user from the others.

use crate::tls_acl::role_acl;
use crate::util::*;

/// A server whose settings keep locks (doctor finds nothing unsafe in
/// them), with the three role users of the doc; the monitor's only where
/// the server accepts its line (not Redis 6.2: see `monitor_line`).
fn with_roles() -> Redis {
    let r = Redis::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    for role in ["job", "operator"] {
        let acl = role_acl(role);
        let args: Vec<&str> = acl.iter().map(String::as_str).collect();
        let _: () = r.cmd(&args);
    }
    if redis_version() >= (7, 0) {
        let acl = role_acl("monitor");
        let args: Vec<&str> = acl.iter().map(String::as_str).collect();
        let _: () = r.cmd(&args);
    }
    r
}

/// `redis://rlock-<role>:<role>-secret@...`, the doc's user and password.
fn url(r: &Redis, role: &str) -> String {
    format!("redis://rlock-{role}:{role}-secret@127.0.0.1:{}", r.port)
}

fn as_role(r: &Redis, role: &str, args: &[&str]) -> Run {
    bare_rlock()
        .env("RLOCK_URL", &url(r, role))
        .args(args)
        .run()
}

/// Redis 6.2 has no read-only key patterns (`%R~`) and no EVALSHA_RO: it
/// refuses the monitor's line, as docs/deployments.md says.
#[test]
fn monitor_line() {
    let r = Redis::start();
    let acl = role_acl("monitor");
    let mut c = redis::cmd(&acl[0]);
    for a in &acl[1..] {
        c.arg(a);
    }
    let res: redis::RedisResult<()> = c.query(&mut r.conn());
    if redis_version() < (7, 0) {
        let e = res.unwrap_err();
        assert!(e.to_string().contains("Syntax error"), "{e}");
    } else {
        res.unwrap();
    }
}

#[test]
fn a_job_may_do_everything_but_break_and_its_break_changes_nothing() {
    let r = with_roles();
    let job = |args: &[&str]| as_role(&r, "job", args);
    // Everything a job does.
    let tok = job(&["acquire", "k"]).ok().token();
    job(&["renew", "k", "--token", &tok]).ok();
    job(&["check", "k", "--token", &tok]).ok();
    job(&["status", "k"]).ok();
    job(&["history", "k"]).ok();
    job(&["list"]).ok();
    // A waiter is woken by the release (BLPOP; RPUSH in the script).
    let waiter = bare_rlock()
        .env("RLOCK_URL", &url(&r, "job"))
        .args(["acquire", "k"])
        .spawn();
    r.await_waiters("k", 1);
    job(&["release", "k", "--token", &tok]).ok();
    let held = finish(waiter, "waiter").ok().token();
    job(&["exec", "-w", "0", "other", "--", "true"]).ok();
    job(&["rw", "read", "cat", "--", "true"]).ok();

    // Its break: refused by Redis before break.lua runs.
    let before = r.keys();
    let log_before: i64 = r.cmd(&["LLEN", "rlock:{k}:log"]);
    let run = job(&["break", "k", "--reason", "not mine", "--yes"])
        .fails(77, "this Redis user may not break locks (NOPERM");
    assert!(
        run.stderr
            .trim_end()
            .ends_with("break needs the operator role, see docs/deployments.md#roles"),
        "{}",
        run.stderr
    );
    // Nothing changed: the holder holds and renews, no event, no new key.
    assert_eq!(r.keys(), before);
    let log_after: i64 = r.cmd(&["LLEN", "rlock:{k}:log"]);
    assert_eq!(log_after, log_before);
    job(&["renew", "k", "--token", &held]).ok();
    assert!(!job(&["history", "k"]).ok().stdout.contains("broken"));
    assert!(r.held("k"));

    // The operator's break works, and its holder learns of it as ever.
    as_role(&r, "operator", &["break", "k", "--reason", "ops", "--yes"]).ok();
    job(&["renew", "k", "--token", &held]).fails(79, "broken by");
    job(&["release", "k", "--token", &held]).fails(79, "broken by");
    assert!(job(&["history", "k"]).ok().stdout.contains("broken"));
    // The permission key is only declared: nothing is stored there.
    let stored: i64 = r.cmd(&["EXISTS", "rlock:!{k}"]);
    assert_eq!(stored, 0);
    r.assert_nothing_held(&[]);
}

#[test]
fn a_monitor_cannot_take_or_break_a_lock() {
    if redis_version() < (7, 0) {
        return; // no monitor line there (see `monitor_line`)
    }
    let r = with_roles();
    let tok = as_role(&r, "job", &["acquire", "k"]).ok().token();
    let before = r.keys();
    as_role(&r, "monitor", &["acquire", "-n", "m"]).fails(77, "NOPERM");
    as_role(&r, "monitor", &["release", "k", "--token", &tok]).fails(77, "NOPERM");
    assert_eq!(r.keys(), before);
    as_role(&r, "job", &["release", "k", "--token", &tok]).ok();
    r.assert_nothing_held(&[]);
}

/// `doctor --role R` as role `user`'s user: its report.
fn doctor(r: &Redis, user: &str, role: &str) -> Run {
    as_role(r, user, &["doctor", "--role", role])
}

/// The report's `role:` lines.
fn role_lines(run: &Run) -> Vec<&str> {
    run.stdout
        .lines()
        .filter(|l| l.contains(" role: "))
        .collect()
}

#[test]
fn doctor_role_tells_each_role_from_the_others() {
    let r = with_roles();
    if redis_version() < (7, 0) {
        // Neither ACL DRYRUN nor redis.acl_check_cmd: it cannot ask.
        let run = doctor(&r, "job", "job");
        let lines = role_lines(&run);
        assert!(
            lines.len() == 1 && lines[0].starts_with("warn "),
            "{}",
            run.stdout
        );
        assert!(lines[0].contains("cannot ask the server"), "{}", run.stdout);
        return;
    }
    for role in ["job", "operator", "monitor"] {
        let run = doctor(&r, role, role);
        assert_eq!(run.code, 0, "{role}: {}\n{}", run.stdout, run.stderr);
        let lines = role_lines(&run);
        assert_eq!(lines.len(), 1, "{role}: {}", run.stdout);
        assert!(
            lines[0].starts_with("ok ")
                && lines[0].contains(&format!("exactly what the {role} role needs")),
            "{role}: {}",
            run.stdout
        );
    }
    let unsafe_line = |user: &str, role: &str, needle: &str| {
        let run = doctor(&r, user, role);
        assert_eq!(run.code, 78, "{user} as {role}: {}", run.stdout);
        assert!(
            role_lines(&run)
                .iter()
                .any(|l| l.starts_with("unsafe ") && l.contains(needle)),
            "{user} as {role}: want {needle:?} in\n{}",
            run.stdout
        );
    };
    unsafe_line(
        "operator",
        "job",
        "too much for the job role: can break locks",
    );
    unsafe_line(
        "job",
        "operator",
        "too little for the operator role: `rlock break` fails",
    );
    unsafe_line(
        "job",
        "monitor",
        "too much for the monitor role: can write rlock's keys",
    );
    unsafe_line("monitor", "job", "too little for the job role");
    // JSON names the role.
    let run = as_role(&r, "job", &["doctor", "--role", "job", "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["role"], "job");
    // Not a role: a usage error.
    as_role(&r, "job", &["doctor", "--role", "admin"]).fails(64, "admin");
}
