//! `rlock break KEY --reason TEXT [--holder ID] [--yes]`: an operator ends
//! a stuck lock's hold(s); the broken holder finds out at its next renewal
//! and says who broke the lock and why; the next waiter gets it at once.

use std::path::Path;
use std::process::{Command, Stdio};
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
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "trap 'echo TERM > \"$D/signalled\"; exit 5' TERM
         tok=$(\"$B\" -v acquire k --keep --ttl 1500ms 2>\"$D/log\") || exit 9
         echo \"$$\" > \"$D/pid\"
         sleep 30 & wait",
    );
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

/// A break that lands while exec's command ends is found by the release,
/// not a renewal (the TTL is far longer than the command): it is reported
/// as the break, who and why, never as "another owner held it" or "gone".
/// Two execs at a time, so the lock is often taken by the other one
/// before the broken one's release.
#[test]
fn a_break_storm_is_reported_as_breaks_by_every_exec_it_hits() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let r = Redis::shared();
    let stop = Arc::new(AtomicBool::new(false));
    let storm = {
        let (mut l, stop) = (r.locker(), stop.clone());
        let order = rlock::Break::new(rlock::lock::Holders::All, "ops@storm", "storm").unwrap();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) && n < 20_000 {
                let _ = l.break_lock("k", &order);
                std::thread::sleep(Duration::from_millis(5));
                n += 1;
            }
        })
    };
    let runs: Vec<Run> = std::thread::scope(|s| {
        let streams: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    (0..10)
                        .map(|_| {
                            rlock(&r)
                                .args(["exec", "--ttl", "5s", "k", "--", "sleep", "0.3"])
                                .run()
                        })
                        .collect::<Vec<Run>>()
                })
            })
            .collect();
        streams
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    stop.store(true, Ordering::SeqCst);
    storm.join().unwrap();
    let lost: Vec<&Run> = runs.iter().filter(|o| o.code != 0).collect();
    for o in &lost {
        assert_eq!(o.code, 79, "{}", o.stderr);
    }
    let broken = lost
        .iter()
        .filter(|o| {
            o.stderr
                .contains("it was broken by ops@storm (reason: storm)")
        })
        .count();
    // Every loss is a break, and the storm hit most runs (each holds the
    // lock 300 ms; a break comes every few ms).
    assert_eq!(
        broken,
        lost.len(),
        "{:?}",
        lost.iter().map(|o| &o.stderr).collect::<Vec<_>>()
    );
    assert!(
        broken >= runs.len() / 2,
        "{broken} of {} broken",
        runs.len()
    );
    // The notices expire with the broken leases (5 s at most), and none
    // is left in the counters for the history's retention.
    let notes = format!("{}:b", r.key("k"));
    let ttl: i64 = r.cmd(&["PTTL", &notes]);
    assert!(
        ttl == -2 || (0..=5000).contains(&ttl),
        "{notes} has PTTL {ttl}"
    );
    let counters: Vec<String> = r.cmd(&["HKEYS", &format!("{}:n", r.key("k"))]);
    assert!(
        !counters.iter().any(|f| f.starts_with("b:")),
        "{counters:?}"
    );
    all_keys_expire(&r);
}

#[test]
fn a_break_notice_lives_as_long_as_the_broken_lease() {
    let r = Redis::shared();
    let mut a = r.locker();
    let lease = a
        .acquire(
            "k",
            &rlock::Request::new(Duration::from_secs(10)),
            None,
            &mut |_| {},
        )
        .unwrap();
    let order = rlock::Break::new(rlock::lock::Holders::All, "ops@h", "why").unwrap();
    let b = r.locker().break_lock("k", &order).unwrap();
    assert_eq!(b.fences, [lease.fence]);
    let ttl: i64 = r.cmd(&["PTTL", &format!("{}:b", r.key("k"))]);
    assert!((1..=10_000).contains(&ttl), "PTTL {ttl}");
    // The holder's release reads it: a break, not "not held".
    let e = a.release("k", &lease.token).unwrap_err();
    assert!(
        matches!(&e, rlock::Error::Lost { why, .. } if why == "it was broken by ops@h (reason: why)"),
        "{e}"
    );
    all_keys_expire(&r);
}

/// Issue 29's `break` row: a holder whose command ignores SIGTERM, a
/// waiter, a break. The waiter must not start while the broken command
/// still runs (it ran 13 s beside it when a break ended the hold at once):
/// the hold is marked, the holder's exec stops its command at its next
/// renewal (TERM, KILL after --grace) and releases, and only then does the
/// waiter get the lock. Checked by order, not by time: every tick the
/// broken command wrote comes before the waiter's start.
#[test]
fn a_broken_holder_is_stopped_before_the_next_one_starts() {
    let r = Redis::start();
    let d = tmp_dir("break", "no-overlap");
    let ticks = d.join("ticks");
    let started = d.join("started");
    let holder = rlock(&r)
        .args([
            "exec",
            "--ttl",
            "3s",
            "--grace",
            "2s",
            "k",
            "--",
            "sh",
            "-c",
            &format!(
                "trap '' TERM; while :; do date +%s%N >> {}; sleep 0.05; done",
                ticks.display()
            ),
        ])
        .spawn();
    eventually(Duration::from_secs(10), "the first tick", || ticks.exists());
    let waiter = rlock(&r)
        .args([
            "exec",
            "-w",
            "30s",
            "k",
            "--",
            "sh",
            "-c",
            &format!("date +%s%N > {}", started.display()),
        ])
        .spawn();
    r.await_waiters("k", 1);
    rlock(&r)
        .args(["break", "k", "--reason", "hung", "--yes"])
        .run()
        .ok();
    // Marked, still held: status says so until the holder has stopped.
    let st = r.status_json("k");
    assert_eq!(st["holders"][0]["breaking"]["reason"], "hung", "{st}");
    let broken = finish(holder, "the broken exec").code(79);
    assert!(broken.stderr.contains("broken by"), "{}", broken.stderr);
    finish(waiter, "the waiter").ok();
    let last_tick: u128 = read(&ticks)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .max()
        .unwrap();
    let start: u128 = read(&started).trim().parse().unwrap();
    assert!(
        start > last_tick,
        "the waiter started {} ms before the broken command's last tick",
        (last_tick - start) / 1_000_000
    );
    // broken, then how the hold ended (its exec's release), then the
    // waiter's grant.
    let kinds = kinds(&r, "k");
    let from = kinds.iter().position(|k| k == "broken").unwrap();
    assert_eq!(
        kinds[from..from + 3],
        ["broken", "released", "granted"],
        "{kinds:?}"
    );
    r.assert_nothing_held(&[]);
}

/// A broken hold nobody renews (its holder gone, stopped, or a script's
/// plain `acquire`): the lock passes on when its lease ends, not at once,
/// so a holder that is merely slow never runs beside the next one.
#[test]
fn a_broken_hold_nobody_releases_passes_on_at_its_lease_end() {
    let r = Redis::start();
    rlock(&r)
        .args(["acquire", "--ttl", "3s", "k"])
        .by_another_process()
        .run()
        .ok();
    rlock(&r)
        .args(["break", "k", "--reason", "gone", "--yes"])
        .run()
        .ok();
    rlock(&r)
        .args(["exec", "-n", "k", "--", "true"])
        .run()
        .code(75);
    rlock(&r)
        .args(["exec", "-w", "20s", "k", "--", "true"])
        .run()
        .ok();
    let kinds = kinds(&r, "k");
    assert_eq!(
        kinds,
        ["granted", "broken", "expired", "granted", "released"],
        "{kinds:?}"
    );
    r.assert_nothing_held(&[]);
}
