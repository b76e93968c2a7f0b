//! Who waits under RedLock: each waiting acquire noted on every master
//! (lua/redlock_wait.lua, `P{K}:rw`), shown by `status`, `list` and `top`
//! where a majority of the masters lists it, dropped when the wait ends
//! or with its deadline.

use std::process::{Child, Command};

use super::*;

/// `rlock exec KEY -w 60s -- true` over `ms` as `user`: a waiter while
/// the lock is held.
fn waiter_as(ms: &[Redis], key: &str, user: &str) -> Child {
    rl(ms)
        .env("USER", user)
        .args(["exec", key, "-w", "60s", "--", "true"])
        .spawn()
}

/// `status KEY --json` over `ms`.
fn status(ms: &[Redis], key: &str) -> serde_json::Value {
    serde_json::from_str(&rl(ms).args(["status", key, "--json"]).run().ok().stdout).unwrap()
}

/// Wait (up to 15 s) until `status` over `ms` shows `n` waiters.
fn await_waiting(ms: &[Redis], key: &str, n: u64) {
    eventually(
        Duration::from_secs(15),
        &format!("{n} waiter(s) shown for {key:?}"),
        || status(ms, key)["waiting"] == n,
    );
}

fn hostname() -> String {
    let out = Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Every key of every master has an expiry.
fn every_key_expires(ms: &[Redis]) {
    for m in ms {
        for k in m.keys() {
            let ttl: i64 = m.cmd(&["PTTL", &k]);
            assert!(ttl > 0 || ttl == -2, "{k} has PTTL {ttl}");
        }
    }
}

#[test]
fn two_waiters_show_in_status_list_and_top_and_go_when_served() {
    let ms = masters(3);
    let tok = rl(&ms)
        .env("USER", "ann")
        .args(["acquire", "k", "--ttl", "60s"])
        .run()
        .ok()
        .token();
    let bob = waiter_as(&ms, "k", "bob");
    await_waiting(&ms, "k", 1);
    let eve = waiter_as(&ms, "k", "eve");
    await_waiting(&ms, "k", 2);
    every_key_expires(&ms);
    let st = status(&ms, "k");
    assert_eq!(st["holders"][0]["user"], "ann", "{st}");
    let ws = st["waiters"].as_array().expect("a list of waiters");
    // Both as their acquires sent them, the earlier wait first.
    let who: Vec<(&str, u64)> = ws
        .iter()
        .map(|w| (w["user"].as_str().unwrap(), w["pid"].as_u64().unwrap()))
        .collect();
    let pids = [u64::from(bob.id()), u64::from(eve.id())];
    assert_eq!(who, [("bob", pids[0]), ("eve", pids[1])], "{st}");
    for w in ws {
        assert_eq!(w["host"], hostname().as_str(), "{w}");
        assert_eq!(w["priority"], 0, "{w}");
        assert_eq!(w["cmd"], "true", "{w}");
        assert!(w["since"].as_str().unwrap().ends_with('Z'), "{w}");
    }
    assert!(ws[0]["since"].as_str() <= ws[1]["since"].as_str(), "{st}");
    let text = rl(&ms).args(["status", "k"]).run().ok().stdout;
    assert!(text.contains(" user bob priority 0 since "), "{text}");
    let list: serde_json::Value =
        serde_json::from_str(&rl(&ms).args(["list", "k", "--json"]).run().ok().stdout).unwrap();
    assert_eq!(list[0]["waiting"], 2, "{list}");
    assert_eq!(list[0]["waiters"][1]["user"], "eve", "{list}");
    let out = rl(&ms)
        .args(["top", "k", "--once", "--json"])
        .run()
        .ok()
        .stdout;
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!(
        (v["key"].as_str(), v["waiting"].as_u64()),
        (Some("k"), Some(2)),
        "{v}"
    );
    assert_eq!(v["waiters"][0]["user"], "bob", "{v}");
    assert!(v["oldest_wait_ms"].as_u64().is_some(), "{v}");

    rl(&ms).args(["release", "k", "--token", &tok]).run().ok();
    finish(bob, "bob").ok();
    finish(eve, "eve").ok();
    // Each waiter dropped its note as it was served: nobody is shown at
    // once, not after a deadline (2 s or more).
    let st = status(&ms, "k");
    assert_eq!(
        (
            st["waiting"].as_u64(),
            st["waiters"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0)),
        "{st}"
    );
    eventually(Duration::from_secs(5), "every master to be free", || {
        ms.iter().all(|m| !held_on(m, "k"))
    });
    for m in &ms {
        m.assert_nothing_held(&[]);
    }
}

#[test]
fn a_killed_waiter_goes_with_its_deadline() {
    let ms = masters(3);
    rl(&ms).args(["acquire", "k", "--ttl", "60s"]).run().ok();
    let mut w = waiter_as(&ms, "k", "bob");
    await_waiting(&ms, "k", 1);
    kill(w.id(), libc::SIGKILL);
    w.wait().unwrap();
    // Its note stays until its deadline (a few seconds), with an expiry.
    every_key_expires(&ms);
    await_waiting(&ms, "k", 0);
    let key = "rlock:{k}:rw";
    eventually(Duration::from_secs(15), "the notes to expire", || {
        ms.iter().all(|m| m.cmd::<i64>(&["EXISTS", key]) == 0)
    });
}

#[test]
fn a_waiter_a_minority_lists_is_not_shown() {
    let ms = masters(3);
    rl(&ms).args(["acquire", "k", "--ttl", "60s"]).run().ok();
    // Notes made by hand with the script: "both" on two masters of three,
    // "one" on the third only.
    let code = lua_script("redlock_wait.lua");
    let note = |m: &Redis, id: &str, user: &str| {
        let info = format!(r#"{{"host":"h-{user}","pid":7,"user":"{user}"}}"#);
        let left: i64 = m.cmd(&["EVAL", &code, "1", "rlock:{k}:rw", id, "60000", &info]);
        assert!(left > 0);
    };
    note(&ms[0], "both", "bob");
    note(&ms[1], "both", "bob");
    note(&ms[2], "one", "eve");
    let st = status(&ms, "k");
    assert_eq!(st["waiting"], 1, "{st}");
    let users: Vec<&str> = st["waiters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["user"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["bob"], "{st}");
    // The third master alone does list "one" (the note is readable there).
    let alone = rlock(&ms[2])
        .args(["status", "k", "--json"])
        .run()
        .ok()
        .stdout;
    assert!(alone.contains(r#""user":"eve""#), "{alone}");
    // Dropped on one of the two, "both" is on a minority too.
    let left: i64 = ms[1].cmd(&["EVAL", &code, "1", "rlock:{k}:rw", "both", "0", ""]);
    assert_eq!(left, 0);
    assert_eq!(ms[1].cmd::<i64>(&["EXISTS", "rlock:{k}:rw"]), 0);
    let st = status(&ms, "k");
    assert_eq!(st["waiting"], 0, "{st}");
    every_key_expires(&ms);
}

#[test]
fn a_note_leaves_data_rlock_did_not_write_alone() {
    let ms = masters(3);
    let code = lua_script("redlock_wait.lua");
    let eval = |m: &Redis, key: &str| -> redis::RedisResult<i64> {
        redis::cmd("EVAL")
            .arg(&code)
            .arg(1)
            .arg(key)
            .arg("w")
            .arg("60000")
            .arg("{}")
            .query(&mut m.conn())
    };
    // A string, and a hash without an expiry, where the notes would go.
    let _: () = ms[0].cmd(&["SET", "rlock:{s}:rw", "theirs"]);
    let _: () = ms[0].cmd(&["HSET", "rlock:{h}:rw", "f", "theirs"]);
    for key in ["rlock:{s}:rw", "rlock:{h}:rw"] {
        let e = eval(&ms[0], key).expect_err("refused");
        assert!(e.to_string().contains("NOTRLOCK"), "{e}");
        assert_eq!(ms[0].cmd::<i64>(&["PTTL", key]), -1);
    }
    assert_eq!(
        ms[0].cmd::<String>(&["HGET", "rlock:{h}:rw", "f"]),
        "theirs"
    );
    // A waiter on such a lock still waits, and is served: the notes are
    // best effort (shown from the other two masters).
    let _: () = ms[0].cmd(&["SET", "rlock:{k}:rw", "theirs"]);
    let tok = rl(&ms)
        .args(["acquire", "k", "--ttl", "60s"])
        .run()
        .ok()
        .token();
    let w = waiter_as(&ms, "k", "bob");
    await_waiting(&ms, "k", 1);
    rl(&ms).args(["release", "k", "--token", &tok]).run().ok();
    finish(w, "bob").ok();
    assert_eq!(ms[0].cmd::<String>(&["GET", "rlock:{k}:rw"]), "theirs");
}
