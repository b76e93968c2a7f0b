//! Who waits, in status, list and top; escaped names; top at 60 and 80
//! columns in tmux.

use super::*;

/// A waiter for `key` run as `user`, at `priority`.
fn waiter_as(r: &Redis, key: &str, user: &str, priority: &str) -> Child {
    rlock(r)
        .env("USER", user)
        .args([
            "exec",
            key,
            "-w",
            "60s",
            "--priority",
            priority,
            "--",
            "true",
        ])
        .spawn()
}

#[test]
fn status_list_and_top_show_who_waits_and_a_dead_waiter_goes_with_its_lease() {
    let r = Redis::shared();
    rlock(&r)
        .env("USER", "ann")
        .env("GITLAB_CI", "true")
        .env("CI_PROJECT_PATH", "grp/app")
        .env("CI_JOB_ID", "4711")
        .args(["acquire", "w", "--ttl", "60s"])
        .run()
        .ok();
    let bob = waiter_as(&r, "w", "bob", "0");
    r.await_waiters("w", 1);
    let eve = waiter_as(&r, "w", "eve", "5");
    r.await_waiters("w", 2);
    let st = r.status_json("w");
    assert_eq!(st["waiting"], 2, "{st}");
    let ws = st["waiters"].as_array().expect("a list of waiters");
    // Queue order: the higher priority first.
    let who: Vec<(&str, i64)> = ws
        .iter()
        .map(|w| (w["user"].as_str().unwrap(), w["priority"].as_i64().unwrap()))
        .collect();
    assert_eq!(who, [("eve", 5), ("bob", 0)], "{st}");
    for w in ws {
        assert!(w["pid"].as_u64().is_some_and(|p| p > 0), "{w}");
        assert!(w["host"].as_str().is_some_and(|h| !h.is_empty()), "{w}");
        assert!(w["since"].as_str().unwrap().ends_with('Z'), "{w}");
        assert_eq!(w["cmd"], "true", "{w}");
    }
    assert_eq!(st["holders"][0]["user"], "ann", "{st}");
    assert_eq!(st["holders"][0]["ci"], "gitlab grp/app job 4711", "{st}");
    let text = rlock(&r).args(["status", "w"]).run().ok().stdout;
    assert!(text.contains(" user ann "), "{text}");
    assert!(text.contains(" ci gitlab grp/app job 4711"), "{text}");
    assert!(text.contains("\n  waiter host "), "{text}");
    assert!(text.contains(" user eve priority 5 since "), "{text}");
    let list: serde_json::Value =
        serde_json::from_str(&rlock(&r).args(["list", "w", "--json"]).run().ok().stdout).unwrap();
    assert_eq!(
        list[0]["waiters"].as_array().map(Vec::len),
        Some(2),
        "{list}"
    );
    // top --once --json: one JSON object per line, the waiters in it.
    let out = rlock(&r)
        .args(["top", "w", "--once", "--json"])
        .run()
        .ok()
        .stdout;
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{out}");
    let v = &lines[0];
    assert_eq!(
        (v["key"].as_str(), v["waiting"].as_u64()),
        (Some("w"), Some(2)),
        "{v}"
    );
    assert_eq!(v["waiters"][0]["user"], "eve", "{v}");
    assert!(
        v["held_ms"].as_u64().is_some() && v["ttl_ms"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert!(v["oldest_wait_ms"].as_u64().is_some(), "{v}");
    assert_eq!(v["counters"]["grants"], 1, "{v}");
    // Killed, the waiters stop calling in: once their leases end they are
    // not listed, and the next acquire leaves no info of theirs behind.
    for mut c in [bob, eve] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    let lease = rlock::lock::WAITER_LEASE + Duration::from_secs(5);
    eventually(lease, "no waiter listed", || {
        r.status_json("w")["waiters"]
            .as_array()
            .is_some_and(Vec::is_empty)
    });
    rlock(&r).args(["acquire", "-n", "w"]).run().code(75);
    let fields: Vec<String> = r.cmd(&["HKEYS", &r.key("w")]);
    assert!(!fields.iter().any(|f| f.starts_with("q:")), "{fields:?}");
    // Every key still has an expiry.
    for k in r.keys() {
        let ttl: i64 = r.cmd(&["PTTL", &k]);
        assert!(ttl > 0, "{k} has no expiry");
    }
}

/// RedLock keeps no queue (a waiter retries on every master): `status
/// --json` there has the same fields, the waiter listed from its notes
/// (tests/integration/redlock/waiters.rs), and answers while one retries.
#[test]
fn redlock_status_has_the_waiters_list_and_no_queue() {
    let ms: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let urls = ms.iter().map(Redis::url).collect::<Vec<_>>().join(",");
    let rl = || bare_rlock().env("RLOCK_URL", &urls);
    rl().env("USER", "ann")
        .args(["acquire", "k", "--ttl", "60s"])
        .run()
        .ok();
    let mut w = rl().args(["exec", "k", "-w", "60s", "--", "true"]).spawn();
    let status = || -> serde_json::Value {
        serde_json::from_str(&rl().args(["status", "k", "--json"]).run().ok().stdout).unwrap()
    };
    eventually(Duration::from_secs(15), "the waiter shown", || {
        status()["waiting"] == 1
    });
    let st = status();
    assert_eq!(st["waiters"].as_array().map(Vec::len), Some(1), "{st}");
    assert_eq!(st["holders"][0]["user"], "ann", "{st}");
    let _ = w.kill();
    let _ = w.wait();
}

#[test]
fn control_and_bidi_characters_are_shown_escaped_everywhere() {
    let r = Redis::shared();
    let name = "evil\u{202e}gpj.exe";
    rlock(&r).args(["acquire", name, "--ttl", "60s"]).run().ok();
    let mut holder = rlock(&r)
        .args([
            "exec",
            "c",
            "--",
            "sh",
            "-c",
            "sleep 60 # \r\x1b[2J\u{202e}",
        ])
        .spawn();
    eventually(Duration::from_secs(10), "c held", || r.held("c"));
    for args in [
        &["status", name][..],
        &["list"],
        &["top", "--once"],
        &["history", name],
        &["status", "c"],
    ] {
        let out = rlock(&r).args(args).run().ok().stdout;
        for bad in ['\x1b', '\r', '\u{202e}'] {
            assert!(!out.contains(bad), "{args:?}: {bad:?} in {out:?}");
        }
        if args[0] != "history" {
            assert!(out.contains(r"\u{202e}"), "{args:?}: {out}");
        }
    }
    let out = rlock(&r).args(["status", "c"]).run().ok().stdout;
    assert!(out.contains(r"# \r\x1b[2J\u{202e}"), "{out}");
    // The break prompt, on a terminal's stdin (here: none, so --yes is
    // asked for); its message names the lock escaped.
    let run = rlock(&r).args(["break", name]).run();
    assert!(!run.stderr.contains('\u{202e}'), "{}", run.stderr);
    let _ = holder.kill();
    let _ = holder.wait();
}

/// top in a real terminal of `cols` columns: a long name is cut with …,
/// HELD TTL WAIT stay on screen, w lists the waiters, / filters, s sorts.
fn top_in_a_terminal_of(cols: u16) {
    let r = Redis::shared();
    let long = format!("deploy-{}", "x".repeat(70));
    hold(&r, &long);
    hold(&r, "aaa");
    let w = waiters(&r, &long, 2);
    let t = Tmux::start(&r, &format!("cols{cols}"), cols, 24);
    t.type_line("$BIN top -d 0.3");
    let fits = |s: &[String]| s.iter().all(|l| l.chars().count() <= usize::from(cols));
    t.await_screen("a cut name, HELD TTL WAIT kept", |s| {
        fits(s)
            && s.iter().any(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                c.len() > 4 && c[0].starts_with("deploy-xxx") && c[0].ends_with('…') && c[3] == "2"
            })
            && s.iter().any(|l| {
                l.split_whitespace().take(4).collect::<Vec<_>>() == ["LOCK", "HELD", "TTL", "WAIT"]
            })
    });
    t.send(&["w"]);
    t.await_screen("the waiters under their lock", |s| {
        fits(s) && s.iter().filter(|l| l.starts_with("  > ")).count() == 2
    });
    t.send(&["/"]);
    t.send(&["-l", "aa"]);
    t.send(&["Enter"]);
    t.await_screen("only aaa", |s| {
        s.iter().any(|l| l.starts_with("aaa ")) && !s.iter().any(|l| l.starts_with("deploy-"))
    });
    t.send(&["Escape"]);
    t.send(&["s"]);
    t.await_screen("sorted by name", |s| {
        let rows: Vec<&String> = s
            .iter()
            .skip_while(|l| !l.starts_with("LOCK"))
            .skip(1)
            .filter(|l| !l.starts_with("  >"))
            .collect();
        rows.len() >= 2 && rows[0].starts_with("aaa ") && rows[1].starts_with("deploy-")
    });
    t.send(&["q"]);
    stop(w);
}

#[test]
fn top_works_at_60_columns() {
    top_in_a_terminal_of(60);
}

#[test]
fn top_works_at_80_columns() {
    top_in_a_terminal_of(80);
}
