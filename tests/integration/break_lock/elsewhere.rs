//! `rlock break` on a terminal (it asks first), under RedLock and on a
//! Cluster.

use std::path::Path;
use std::process::{Command, Stdio};

use super::*;

/// `rlock break` in a real terminal (script(1)), answering `answer`; its
/// exit code and stderr (the question included).
fn break_in_a_pty(r: &Redis, dir: &Path, answer: &str) -> (String, String) {
    let mut child = Command::new("script")
        .args([
            "-qec",
            "\"$BIN\" break k --reason 'asked' 2>\"$D/err\"; echo $? > \"$D/rc\"",
            "/dev/null",
        ])
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .env("BIN", env!("CARGO_BIN_EXE_rlock"))
        .env("D", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().unwrap();
        // Typed once the question is there (the terminal keeps it anyway).
        eventually(Duration::from_secs(10), "the question", || {
            read(&dir.join("err")).contains("[y/N]")
        });
        stdin.write_all(answer.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
    let rc = wait_line(dir, "rc");
    let _ = child.wait();
    (rc, read(&dir.join("err")))
}

#[test]
fn on_a_terminal_break_asks_first() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "k", "--ttl", "60s"])
        .run()
        .ok()
        .token();
    let d = tmp_dir("break", "pty-no");
    let (rc, err) = break_in_a_pty(&r, &d, "n\n");
    assert_eq!(rc, "1", "{err}");
    assert!(err.contains("break lock \"k\" held by host "), "{err}");
    assert!(err.contains("not broken"), "{err}");
    assert!(r.held("k"));
    let d = tmp_dir("break", "pty-yes");
    let (rc, err) = break_in_a_pty(&r, &d, "y\n");
    assert_eq!(rc, "0", "{err}");
    assert!(err.contains("breaking lock"), "{err}");
    assert!(r.status_json("k")["holders"][0]["breaking"]["by"].is_string());
    rlock(&r)
        .args(["release", "k", "--token", &tok])
        .run()
        .fails(79, "broken by");
    assert!(!r.held("k"));
    all_keys_expire(&r);
}

#[test]
fn under_redlock_the_break_reaches_every_master_and_exec_says_why() {
    let ms: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let urls = ms.iter().map(Redis::url).collect::<Vec<_>>().join(",");
    let holder = bare_rlock()
        .env("RLOCK_URL", &urls)
        .args(["exec", "--ttl", "3s", "k", "--", "sleep", "60"])
        .spawn();
    eventually(Duration::from_secs(10), "held on every master", || {
        ms.iter().all(|m| m.held("k"))
    });
    let out = bare_rlock()
        .env("RLOCK_URL", &urls)
        .args(["break", "k", "--reason", "quorum stuck", "--yes"])
        .run()
        .ok();
    assert!(out.stderr.contains("breaking lock"), "{}", out.stderr);
    let broken = finish(holder, "the broken exec").code(79);
    for m in &ms {
        assert!(!m.held("k"));
    }
    assert!(
        broken.stderr.contains("it was broken by") && broken.stderr.contains("quorum stuck"),
        "{}",
        broken.stderr
    );
}

/// Under RedLock a majority agrees on a grant's fence, but a master
/// outside it may show another (its counter was behind the floor the
/// others jumped to). `status` shows the majority's fence, even when that
/// master answers first, and `--holder` with it breaks the hold on every
/// master, that one included: breaking by the fence alone ended it where
/// the fence matched only.
#[test]
fn under_redlock_holder_names_the_hold_whatever_master_its_fence_is_from() {
    let ms: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let urls = ms.iter().map(Redis::url).collect::<Vec<_>>().join(",");
    // Masters 1 and 2 ahead: they agree on a fence master 0 does not give.
    for m in &ms[1..] {
        let _: () = m.cmd(&[
            "SET",
            &format!("{}:fence", m.key("k")),
            "5000000000000",
            "PX",
            "600000",
        ]);
    }
    let holder = bare_rlock()
        .env("RLOCK_URL", &urls)
        .args(["exec", "--ttl", "3s", "k", "--", "sleep", "60"])
        .spawn();
    eventually(Duration::from_secs(10), "held on every master", || {
        ms.iter().all(|m| m.held("k"))
    });
    let fence_on = |m: &Redis| m.status_json("k")["holders"][0]["fence"].as_u64().unwrap();
    let odd = fence_on(&ms[0]);
    assert_ne!(odd, fence_on(&ms[1]), "the masters agree: nothing tested");
    // Masters 1 and 2 answer late: master 0's status comes first.
    for m in &ms[1..] {
        let _: () = m.cmd(&["CLIENT", "PAUSE", "250", "ALL"]);
    }
    let st: serde_json::Value = serde_json::from_str(
        &bare_rlock()
            .env("RLOCK_URL", &urls)
            .args(["status", "k", "--json"])
            .run()
            .ok()
            .stdout,
    )
    .unwrap();
    let shown = st["holders"][0]["fence"].as_u64().unwrap();
    assert_eq!(shown, fence_on(&ms[1]), "{st}");
    for m in &ms[1..] {
        let _: () = m.cmd(&["CLIENT", "PAUSE", "250", "ALL"]);
    }
    let out = bare_rlock()
        .env("RLOCK_URL", &urls)
        .args([
            "break",
            "k",
            "--holder",
            &shown.to_string(),
            "--reason",
            "r",
            "--yes",
        ])
        .run()
        .ok();
    assert!(
        out.stderr
            .contains(&format!("breaking lock \"k\" (fence {shown})")),
        "{}",
        out.stderr
    );
    let broken = finish(holder, "the broken exec").code(79);
    for m in &ms {
        assert!(!m.held("k"), "still held on {}", m.url());
    }
    assert!(
        broken.stderr.contains("it was broken by"),
        "{}",
        broken.stderr
    );
}

#[test]
fn on_a_cluster_break_works_for_keys_on_every_master() {
    let c = Cluster::start(3);
    let rc = || {
        bare_rlock()
            .env("RLOCK_URL", &c.urls())
            .env("RLOCK_CLUSTER", "1")
    };
    // 12 names land on all three masters.
    for i in 0..12 {
        let k = format!("job-{i}");
        let tok = rc()
            .args(["acquire", &k, "--ttl", "60s"])
            .run()
            .ok()
            .token();
        rc().args(["break", &k, "--reason", "r", "--yes"])
            .run()
            .ok();
        rc().args(["renew", &k, "--token", &tok])
            .run()
            .fails(79, "broken by");
        rc().args(["release", &k, "--token", &tok])
            .run()
            .fails(79, "broken by");
        rc().args(["exec", "-n", &k, "--", "true"]).run().ok();
    }
    for r in &c.nodes {
        all_keys_expire(r);
    }
}
