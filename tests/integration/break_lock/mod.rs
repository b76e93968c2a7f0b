//! `rlock break KEY --reason TEXT [--holder ID] [--yes]`: an operator ends
//! a stuck lock's hold(s); the broken holder finds out at its next renewal
//! and says who broke the lock and why; the next waiter gets it at once.

use std::time::Duration;

use crate::keep::{finish_child, script_in_pid_namespace, wait_line};
use crate::util::*;

/// Every key under the test's prefix has a TTL (none is left for ever).
#[track_caller]
fn all_keys_expire(r: &Redis) {
    for k in r.keys() {
        let ttl: i64 = r.cmd(&["PTTL", &k]);
        assert!(
            ttl > 0 || ttl == -2,
            "{k} has PTTL {ttl}: a key without expiry"
        );
    }
}

/// `key`'s history events of kind `event` (the library's history read).
fn events(r: &Redis, key: &str, event: &str) -> Vec<rlock::Event> {
    let mut l = r.locker();
    l.history(key, 100)
        .unwrap()
        .into_iter()
        .filter(|e| e.event == event)
        .collect()
}

/// The fences of `key`'s holders, as `rlock status --json` shows them.
/// The kinds of `key`'s history events, oldest first.
fn kinds(r: &Redis, key: &str) -> Vec<String> {
    let events = r.locker().history(key, 100).unwrap();
    events.into_iter().map(|e| e.event).collect()
}

fn fences(r: &Redis, key: &str) -> Vec<u64> {
    let st = r.status_json(key);
    st["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["fence"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_broken_exec_exits_79_saying_who_and_why_and_the_waiter_gets_the_lock() {
    let r = Redis::shared();
    // Renewed every 2 s: without the break, the waiter would never get it
    // within its -w (the holder sleeps 60 s).
    let holder = rlock(&r)
        .args(["exec", "--ttl", "6s", "k", "--", "sleep", "60"])
        .spawn();
    eventually(Duration::from_secs(10), "the lock held", || r.held("k"));
    let waiter = rlock(&r)
        .args(["exec", "-w", "30s", "k", "--", "true"])
        .spawn();
    r.await_waiters("k", 1);
    let out = rlock(&r)
        .args(["break", "k", "--reason", "job 4711 hung", "--yes"])
        .run()
        .ok();
    // Marked, not ended: the waiter gets the lock once the holder has
    // stopped its command and released (its next renewal, within 2 s).
    assert!(out.stderr.contains("breaking lock \"k\""), "{}", out.stderr);
    assert!(out.stderr.contains("passes on then"), "{}", out.stderr);
    finish(waiter, "the waiter").ok();
    let broken = finish(holder, "the broken exec").code(79);
    assert!(
        broken.stderr.contains("it was broken by ")
            && broken.stderr.contains("@")
            && broken.stderr.contains("(reason: job 4711 hung)"),
        "{}",
        broken.stderr
    );
    // The history says who broke it and why, with the hold's fence.
    let b = events(&r, "k", "broken");
    assert_eq!(b.len(), 1, "{b:?}");
    assert!(events(&r, "k", "lost").is_empty());
    assert_eq!(b[0].reason.as_deref(), Some("job 4711 hung"));
    assert!(
        b[0].by.as_deref().unwrap_or_default().contains('@'),
        "{b:?}"
    );
    assert!(b[0].fence.is_some_and(|f| f > 0), "{b:?}");
    // Then how the hold ended: released by the stopped exec, not expired.
    let ended = events(&r, "k", "released");
    assert!(
        ended
            .iter()
            .any(|e| e.fence == b[0].fence && e.at >= b[0].at),
        "{ended:?}"
    );
    let n: Option<String> = r.cmd(&["HGET", &format!("{}:n", r.key("k")), "breaks"]);
    assert_eq!(n.as_deref(), Some("1"));
    // The renewal read the notice and removed it; nothing left without TTL.
    let left: Vec<String> = r.cmd(&["HKEYS", &format!("{}:n", r.key("k"))]);
    assert!(!left.iter().any(|f| f.starts_with("b:")), "{left:?}");
    all_keys_expire(&r);
    r.assert_nothing_held(&[]);
}

#[test]
fn holder_names_one_semaphore_holder_by_fence_or_pid_at_host() {
    let r = Redis::shared();
    let acquire = || {
        rlock(&r)
            .args(["acquire", "sem", "--limit", "3", "--ttl", "60s"])
            .run()
            .ok()
            .token()
    };
    let (a, b, c) = (acquire(), acquire(), acquire());
    let f = fences(&r, "sem");
    assert_eq!(f.len(), 3);
    let first = f.iter().min().unwrap().to_string();
    rlock(&r)
        .args(["break", "sem", "--holder", &first, "--reason", "r", "--yes"])
        .run()
        .ok();
    // The first holder (lowest fence: `a`) is gone, and told why.
    rlock(&r)
        .args(["renew", "sem", "--token", &a])
        .run()
        .fails(79, "broken by");
    // Held until its holder gives it back (it runs no command to stop).
    assert_eq!(fences(&r, "sem").len(), 3);
    rlock(&r)
        .args(["release", "sem", "--token", &a])
        .run()
        .fails(79, "broken by");
    for t in [&b, &c] {
        rlock(&r).args(["check", "sem", "--token", t]).run().ok();
    }
    // An ID that matches nobody: exit 1, nothing broken.
    rlock(&r)
        .args(["break", "sem", "--holder", &first, "--reason", "r", "--yes"])
        .run()
        .fails(1, "no holder");
    assert_eq!(fences(&r, "sem").len(), 2);
    // PID@HOST: every hold of that process (`acquire` records its
    // caller, this test, as the holder: both holds are its).
    let st = r.status_json("sem");
    let h = &st["holders"][0];
    let id = format!("{}@{}", h["pid"], h["host"].as_str().unwrap());
    let same = st["holders"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["pid"] == h["pid"] && x["host"] == h["host"])
        .count();
    assert!(same >= 1);
    rlock(&r)
        .args(["break", "sem", "--holder", &id, "--reason", "r", "--yes"])
        .run()
        .ok();
    // Marked, held until their holder gives them back.
    let st = r.status_json("sem");
    let marked = st["holders"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["breaking"]["reason"] == "r")
        .count();
    assert_eq!(marked, same, "{st}");
    all_keys_expire(&r);
}

#[test]
fn breaking_a_read_write_lock_ends_every_reader_and_lets_the_writer_in() {
    let r = Redis::shared();
    let read = || {
        rlock(&r)
            .args(["rw", "read", "cat", "--ttl", "60s"])
            .run()
            .ok()
            .token()
    };
    let (a, b) = (read(), read());
    let writer = rlock(&r)
        .args(["rw", "write", "-w", "30s", "cat", "--", "true"])
        .spawn();
    r.await_waiters("cat", 1);
    let out = rlock(&r)
        .args(["break", "cat", "--reason", "readers hung", "--yes"])
        .run()
        .ok();
    assert!(out.stderr.contains("breaking lock"), "{}", out.stderr);
    // The readers hold until they give it back (or their leases end).
    assert!(r.held("cat"));
    for t in [&a, &b] {
        rlock(&r)
            .args(["release", "cat", "--token", t])
            .run()
            .fails(79, "readers hung");
    }
    finish(writer, "the writer").ok();
    all_keys_expire(&r);
    r.assert_nothing_held(&[]);
}

#[test]
fn a_broken_keeper_stops_its_script_and_status_shows_who_broke_it() {
    let r = Redis::shared();
    let d = crate::keep::tmp("broken");
    let mut sh = script_in_pid_namespace(&r, "bash", &d, crate::keep::KEPT_UNTIL_SIGNALLED);
    wait_line(&d, "pid");
    rlock(&r)
        .args(["break", "k", "--reason", "script stuck", "--yes"])
        .run()
        .ok();
    assert_eq!(wait_line(&d, "signalled"), "TERM");
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(5), "{}", out.1);
    // The keeper gives the lock back once the script is gone (it was held,
    // marked, meanwhile), and records the loss for `status`.
    eventually(Duration::from_secs(10), "the keeper's release", || {
        !r.held("k") && r.status_json("k")["last_lost"].is_object()
    });
    // The history has the break once, and no `lost` beside it; then the
    // keeper's release, how the hold ended.
    assert_eq!(events(&r, "k", "broken").len(), 1);
    assert!(events(&r, "k", "lost").is_empty());
    assert_eq!(events(&r, "k", "released").len(), 1);
    let st = r.status_json("k");
    let why = st["last_lost"]["why"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.contains("broken by") && why.contains("script stuck"),
        "{st}"
    );
    all_keys_expire(&r);
}

/// `check` of a broken token says who broke it and why, in the text and
/// in --json, while the hold is being broken (its mark).
#[test]
fn check_of_a_broken_token_says_who_broke_it() {
    let r = Redis::start();
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["break", "k", "--reason", "audit", "--yes"])
        .env("USER", "ops")
        .run()
        .ok();
    let check = |json: bool| {
        rlock(&r)
            .args(["check", "k", "--token", &tok])
            .args(json.then_some("--json"))
            .run()
            .fails(79, "broken by ops@")
    };
    let run = check(false);
    assert!(run.stderr.contains("(reason: audit)"), "{}", run.stderr);
    let out: serde_json::Value = serde_json::from_str(&check(true).stdout).unwrap();
    assert_eq!(out["held"], false, "{out}");
    assert_eq!(out["why"], "broken", "{out}");
    assert!(out["by"].as_str().unwrap().starts_with("ops@"), "{out}");
    assert_eq!(out["reason"], "audit", "{out}");
    // Given back by its holder, who was told (release.lua): the notice
    // is gone with the hold.
    rlock(&r)
        .args(["release", "k", "--token", &tok])
        .run()
        .fails(79, "broken by ops@");
    assert!(!r.held("k"));
    // A token that was only released says "gone", as before.
    let plain = rlock(&r).args(["acquire", "k"]).run().ok().token();
    rlock(&r)
        .args(["release", "k", "--token", &plain])
        .run()
        .ok();
    let out = rlock(&r)
        .args(["check", "k", "--json", "--token", &plain])
        .run()
        .code(79)
        .stdout;
    assert!(out.contains(r#""why":"gone""#), "{out}");
    all_keys_expire(&r);
}

#[test]
fn a_free_lock_has_nothing_to_break() {
    let r = Redis::shared();
    let out = rlock(&r)
        .args(["break", "free", "--reason", "r", "--yes"])
        .run()
        .ok();
    assert!(out.stderr.contains("nothing to break"), "{}", out.stderr);
    assert!(r.keys().is_empty(), "{:?}", r.keys());
}

#[test]
fn bad_input_is_64_and_breaks_nothing() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "k", "--ttl", "60s"])
        .run()
        .ok()
        .token();
    // No --yes, stdin not a terminal (the harness gives /dev/null).
    rlock(&r)
        .args(["break", "k", "--reason", "r"])
        .run()
        .fails(64, "--yes");
    // --reason is required, and not empty.
    rlock(&r)
        .args(["break", "k", "--yes"])
        .run()
        .fails(64, "--reason");
    rlock(&r)
        .args(["break", "k", "--reason", " ", "--yes"])
        .run()
        .fails(64, "reason");
    rlock(&r)
        .args(["break", "k", "--reason", "a\nb", "--yes"])
        .run()
        .fails(64, "control characters");
    // A holder ID of neither form.
    rlock(&r)
        .args(["break", "k", "--holder", "x", "--reason", "r", "--yes"])
        .run()
        .fails(64, "PID@HOST");
    rlock(&r).args(["check", "k", "--token", &tok]).run().ok();
}

mod elsewhere;
mod timing;
