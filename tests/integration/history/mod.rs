//! `rlock history`: every event of a lock, written by the script call that
//! changes the lock, read back through the real binary (`--json` parsed
//! with serde_json), and the history's bounds (cap, retention) and
//! counters (P{K}:n).

use std::time::Duration;

use serde_json::Value;

use crate::util::*;

/// `rlock history KEY --json [more]`: one object per line.
fn history(r: &Redis, key: &str, more: &[&str]) -> Vec<Value> {
    let run = rlock(r)
        .args(["history", key, "--json"])
        .args(more)
        .run()
        .ok();
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn events(h: &[Value]) -> Vec<&str> {
    h.iter().map(|e| e["event"].as_str().unwrap()).collect()
}

/// The counter `field` in P{K}:n (0 if absent).
fn counter(r: &Redis, key: &str, field: &str) -> i64 {
    let v: Option<i64> = r.cmd(&["HGET", &format!("{}:n", r.key(key)), field]);
    v.unwrap_or(0)
}

/// Grants with no end event yet, as the scripts count them (open_grants
/// in lua/part/log.lua): every grant ended once, none twice.
fn open_grants(r: &Redis, key: &str) -> i64 {
    counter(r, key, "grants")
        - ["released", "overruns", "expired", "closed"]
            .iter()
            .map(|c| counter(r, key, c))
            .sum::<i64>()
}

/// Delete the lock's state, as an admin's DEL would, but not its history.
fn delete_state(r: &Redis, key: &str) {
    for k in r.keys() {
        if k.starts_with(&r.key(key)) && !k.ends_with(":log") && !k.ends_with(":n") {
            let _: () = r.cmd(&["DEL", &k]);
        }
    }
}

/// `at` is RFC 3339 in UTC with milliseconds: 2026-11-25T20:31:02.123Z.
fn assert_rfc3339_ms(at: &str) {
    let b = at.as_bytes();
    assert_eq!(b.len(), 24, "{at}");
    assert!(at.ends_with('Z') && b[10] == b'T' && b[19] == b'.', "{at}");
    assert!(humantime::parse_rfc3339(at).is_ok(), "{at}");
}

/// Two runs of exec: granted and released each, oldest first, with the
/// command's exit code, held and waited times, the holder (host, pid,
/// user, cmd) and the fence; counters match.
#[test]
fn exec_records_granted_and_released_with_its_exit_code_oldest_first() {
    let r = Redis::shared();
    rlock(&r)
        .args(["exec", "job", "--", "sh", "-c", "exit 3"])
        .run()
        .code(3);
    rlock(&r).args(["exec", "job", "--", "true"]).run().ok();
    let h = history(&r, "job", &[]);
    assert_eq!(events(&h), ["granted", "released", "granted", "released"]);
    for e in &h {
        assert_rfc3339_ms(e["at"].as_str().unwrap());
        for k in ["host", "pid", "user", "cmd", "fence"] {
            assert!(!e[k].is_null(), "{k} missing in {e}");
        }
        assert!(!e.to_string().contains("token"), "{e}");
    }
    assert_eq!(h[0]["cmd"], "sh -c exit 3");
    assert_eq!(h[1]["exit_code"], 3);
    assert_eq!(h[3]["exit_code"], 0);
    assert!(h[0]["waited_ms"].is_u64() && h[0].get("held_ms").is_none());
    assert!(h[1]["held_ms"].is_u64() && h[1].get("waited_ms").is_none());
    assert_eq!(h[0]["fence"], h[1]["fence"]);
    assert!(h[2]["fence"].as_u64() > h[0]["fence"].as_u64());
    assert_eq!(h[0]["pid"], h[1]["pid"]);
    assert_ne!(h[0]["pid"], h[2]["pid"]);
    let ats: Vec<&str> = h.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] <= w[1]), "{ats:?}");
    assert_eq!(counter(&r, "job", "grants"), 2);
    assert_eq!(counter(&r, "job", "released"), 2);
    assert_eq!(open_grants(&r, "job"), 0);
    // The text form: a header and one aligned row per event.
    let text = rlock(&r).args(["history", "job"]).run().ok().stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].starts_with("TIME (UTC)") && lines[0].contains("EVENT"));
    let col = lines[0].find("EVENT").unwrap();
    for l in &lines[1..] {
        assert!(
            l[col..].starts_with("granted") || l[col..].starts_with("released"),
            "{text}"
        );
    }
    assert!(lines[2].contains("exit 3"), "{text}");
}

/// A command that cannot start: rlock exits 127 (not found) or 126 (not
/// executable: a directory), and the `released` of its short hold says so.
#[test]
fn a_command_that_cannot_start_is_released_with_127_or_126() {
    let r = Redis::shared();
    rlock(&r)
        .args(["exec", "nostart", "--", "/nonexistent/cmd"])
        .run()
        .code(127);
    rlock(&r)
        .args(["exec", "nostart", "--", "/"])
        .run()
        .code(126);
    let h = history(&r, "nostart", &[]);
    assert_eq!(events(&h), ["granted", "released", "granted", "released"]);
    assert_eq!(h[1]["exit_code"], 127, "{h:?}");
    assert_eq!(h[3]["exit_code"], 126, "{h:?}");
}

/// `acquire` prints a token; no form of the history shows it.
#[test]
fn no_token_shows_in_the_history() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "t", "--ttl", "10s"])
        .run()
        .ok()
        .token();
    rlock(&r).args(["release", "t", "--token", &tok]).run().ok();
    for json in [false, true] {
        let mut args = vec!["history", "t"];
        if json {
            args.push("--json");
        }
        let out = rlock(&r).args(args).run().ok().stdout;
        assert!(out.contains("released"), "{out}");
        assert!(!out.contains(&tok), "{out}");
    }
    let raw: redis::Value = r.cmd(&["LRANGE", &format!("{}:log", r.key("t")), "0", "-1"]);
    assert!(!format!("{raw:?}").contains(&tok));
}

/// A lease that runs out with nobody releasing it shows `expired`: found
/// by the history read itself when the whole state ran out unnoticed, and
/// by the next acquire's prune when a waiter kept the state alive.
#[test]
fn a_lease_nobody_released_shows_expired() {
    let r = Redis::shared();
    // The acquire's process exits at once; its lease (200 ms) runs out.
    rlock(&r)
        .args(["acquire", "gone", "--ttl", "200ms"])
        .run()
        .ok();
    std::thread::sleep(Duration::from_millis(400));
    let h = history(&r, "gone", &[]);
    assert_eq!(events(&h), ["granted", "expired"]);
    assert_eq!(h[1]["fence"], h[0]["fence"]);
    assert_eq!(h[1]["pid"], h[0]["pid"]);
    // Read again: settled once, not twice.
    assert_eq!(events(&history(&r, "gone", &[])), ["granted", "expired"]);
    assert_eq!(counter(&r, "gone", "expired"), 1);
    assert_eq!(open_grants(&r, "gone"), 0);

    // Unnoticed too, then a fresh acquire settles it before its grant.
    rlock(&r)
        .args(["acquire", "gone", "--ttl", "200ms"])
        .run()
        .ok();
    std::thread::sleep(Duration::from_millis(400));
    rlock(&r).args(["exec", "gone", "--", "true"]).run().ok();
    let h = history(&r, "gone", &[]);
    assert_eq!(
        events(&h),
        [
            "granted", "expired", "granted", "expired", "granted", "released"
        ]
    );

    // Pruned by a waiter's acquire: the holder's lease ends while it waits.
    rlock(&r)
        .args(["acquire", "pruned", "--ttl", "700ms"])
        .run()
        .ok();
    rlock(&r)
        .args(["exec", "pruned", "-w", "10s", "--", "true"])
        .run()
        .ok();
    let h = history(&r, "pruned", &[]);
    assert_eq!(events(&h), ["granted", "expired", "granted", "released"]);
    assert!(h[1]["held_ms"].as_u64().unwrap() >= 600, "{}", h[1]);
    assert!(h[2]["waited_ms"].as_u64().unwrap() > 0, "{}", h[2]);
}

/// Several grants whose state runs out unnoticed (three semaphore slots,
/// nobody releasing) are settled once each, with each grant's own fence
/// and holder, by whichever call comes first; a released one between
/// them is not. The uncontended path keeps no record per grant: the
/// counters hash has the counters only, and the history's expiry
/// deadline `e` (one per lock, lua/part/log.lua).
#[test]
fn unnoticed_expiries_settle_once_each_with_their_grants_fences() {
    let r = Redis::shared();
    rlock(&r)
        .args(["exec", "sem", "--limit", "3", "--", "true"])
        .run()
        .ok();
    for _ in 0..3 {
        rlock(&r)
            .args(["acquire", "sem", "--limit", "3", "--ttl", "300ms"])
            .run()
            .ok();
    }
    let fields: Vec<String> = r.cmd(&["HKEYS", &format!("{}:n", r.key("sem"))]);
    let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["e", "grants", "released"]);
    assert_eq!(open_grants(&r, "sem"), 3);
    std::thread::sleep(Duration::from_millis(600));
    let h = history(&r, "sem", &[]);
    assert_eq!(
        events(&h),
        [
            "granted", "released", "granted", "granted", "granted", "expired", "expired", "expired"
        ]
    );
    let fences = |es: &[Value]| {
        let mut f: Vec<String> = es.iter().map(|e| e["fence"].to_string()).collect();
        f.sort_unstable();
        f
    };
    assert_eq!(fences(&h[2..5]), fences(&h[5..]));
    assert!(h[5..].iter().all(|e| e["pid"].is_u64()), "{h:?}");
    assert_eq!(counter(&r, "sem", "expired"), 3);
    assert_eq!(open_grants(&r, "sem"), 0);
    // Read again, and a fresh grant: nothing more to settle.
    rlock(&r)
        .args(["exec", "sem", "--limit", "3", "--", "true"])
        .run()
        .ok();
    assert_eq!(events(&history(&r, "sem", &[])).len(), 10);
    assert_eq!(counter(&r, "sem", "expired"), 3);
    assert_eq!(open_grants(&r, "sem"), 0);
}

/// An `rlock exec` killed with SIGKILL (its command dies with it): its
/// guard kills the command and gives the lock back (the history says
/// `released`); with the guard gone too, the lease would run out
/// (`expired`). Here the guard's release comes first.
#[test]
fn a_killed_exec_shows_released_by_its_guard() {
    let r = Redis::shared();
    let started = tmp_dir("history", "crash").join("started");
    let _ = std::fs::remove_file(&started);
    let child = rlock(&r)
        .args([
            "exec",
            "crash",
            "--ttl",
            "20s",
            "--",
            "sh",
            "-c",
            &format!("touch {}; exec sleep 30", started.display()),
        ])
        .spawn();
    // The command runs: its guard has what a release needs (sent before
    // the go; a kill between the grant and the go leaves it to the lease).
    eventually(Duration::from_secs(10), "the command to start", || {
        started.exists()
    });
    kill(child.id(), libc::SIGKILL);
    let _ = finish(child, "rlock exec crash");
    // Far sooner than the 20 s lease.
    eventually(Duration::from_secs(10), "the guard's release", || {
        !r.held("crash")
    });
    let h = history(&r, "crash", &[]);
    assert_eq!(events(&h), ["granted", "released"], "{h:?}");
    assert!(
        h[0]["cmd"].as_str().unwrap().ends_with("exec sleep 30"),
        "{h:?}"
    );
}

/// A waiter that gives up (-w) shows `timeout`, with how long it waited.
#[test]
fn a_waiter_that_gives_up_shows_timeout() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "busy", "--ttl", "30s"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["exec", "busy", "-w", "300ms", "--", "true"])
        .run()
        .code(75);
    rlock(&r)
        .args(["release", "busy", "--token", &tok])
        .run()
        .ok();
    let h = history(&r, "busy", &[]);
    assert_eq!(events(&h), ["granted", "timeout", "released"]);
    assert!(h[1]["waited_ms"].as_u64().unwrap() >= 300, "{}", h[1]);
    assert_eq!(h[1]["cmd"], "true");
    assert!(h[1].get("fence").unwrap().is_null());
    assert_eq!(counter(&r, "busy", "timeouts"), 1);
    // -n never queues: nothing to record.
    rlock(&r)
        .args(["acquire", "busy", "--ttl", "30s"])
        .run()
        .ok();
    rlock(&r)
        .args(["exec", "busy", "-n", "--", "true"])
        .run()
        .code(75);
    assert_eq!(counter(&r, "busy", "timeouts"), 1);
}

/// A --supersede waiter replaced by a newer one shows `superseded`, by
/// whom.
#[test]
fn a_replaced_supersede_waiter_shows_superseded() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "ci", "--ttl", "30s"])
        .run()
        .ok()
        .token();
    let old = rlock(&r)
        .args(["exec", "--supersede", "ci", "--", "echo", "old"])
        .spawn();
    r.await_waiters("ci", 1);
    let new = rlock(&r)
        .args(["exec", "--supersede", "ci", "--", "echo", "new"])
        .spawn();
    finish(old, "old waiter").code(75);
    rlock(&r)
        .args(["release", "ci", "--token", &tok])
        .run()
        .ok();
    finish(new, "new waiter").ok();
    let h = history(&r, "ci", &[]);
    assert_eq!(
        events(&h),
        ["granted", "superseded", "released", "granted", "released"]
    );
    assert_eq!(h[1]["cmd"], "echo old");
    assert!(h[1]["by"].as_str().unwrap().contains('@'), "{}", h[1]);
    assert_eq!(h[3]["cmd"], "echo new");
    assert_eq!(counter(&r, "ci", "superseded"), 1);
}

/// exec finds its lock gone at a renewal: `lost`, with the reason.
#[test]
fn an_exec_that_finds_its_lock_gone_shows_lost() {
    let r = Redis::shared();
    let child = rlock(&r)
        .args(["exec", "del", "--ttl", "600ms", "--", "sleep", "30"])
        .spawn();
    eventually(Duration::from_secs(10), "exec holds the lock", || {
        r.held("del")
    });
    delete_state(&r, "del");
    finish(child, "rlock exec del").code(79);
    let h = history(&r, "del", &[]);
    assert_eq!(events(&h), ["granted", "lost"], "{h:?}");
    assert_eq!(h[1]["reason"], "it expired or was deleted");
    assert_eq!(h[1]["fence"], h[0]["fence"]);
    assert_eq!(h[1]["cmd"], "sleep 30");
    assert_eq!(counter(&r, "del", "losses"), 1);
    assert_eq!(open_grants(&r, "del"), 0);
}

/// The library's release note: `overran` instead of `released` (counted
/// in overruns), and an exit code on a plain release.
#[test]
fn a_release_noted_as_overran_shows_overran() {
    let r = Redis::shared();
    let mut l = r.locker();
    let req = rlock::Request::new(Duration::from_secs(10)).unwrap();
    let lease = l.acquire("over", &req, None, &mut |_| {}).unwrap();
    let how = rlock::Release::at_once()
        .all_holds(true)
        .noted(rlock::ReleaseNote {
            exit_code: Some(143),
            overran: true,
        });
    l.release_with("over", &lease.token, &how).unwrap();
    let lease = l.acquire("over", &req, None, &mut |_| {}).unwrap();
    l.release("over", &lease.token).unwrap();
    let h = l.history("over", 10).unwrap();
    let names: Vec<&str> = h.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, ["granted", "overran", "granted", "released"]);
    assert_eq!(h[1].exit_code, Some(143));
    assert_eq!(h[3].exit_code, None);
    assert_eq!(counter(&r, "over", "overruns"), 1);
    assert_eq!(counter(&r, "over", "released"), 1);
    assert_eq!(counter(&r, "over", "grants"), 2);
}

mod all;
mod bounds;
