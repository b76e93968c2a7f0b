//! Several locks in one exec (`rlock exec a --and b -- cmd`, issue #23): taken in
//! one canonical order (no deadlock whatever order they are named in), -n
//! and -w for the whole set, a loss of any one is a loss, bad input.

use std::path::PathBuf;
use std::time::Duration;

use crate::util::*;

fn tmp(name: &str) -> PathBuf {
    tmp_dir("multi", name)
}

/// A shell script that fails loudly (writes `overlap`) if another job is
/// inside, marks itself inside for a moment, and leaves.
fn inside(dir: &std::path::Path, me: &str) -> String {
    let m = dir.join("inside");
    let o = dir.join("overlap");
    format!(
        "if [ -e {m} ]; then echo {me} >> {o}; fi; echo {me} > {m}; sleep 0.02; rm -f {m}",
        m = m.display(),
        o = o.display()
    )
}

/// Two jobs naming the same two locks in opposite orders, many rounds:
/// nested locks in opposite orders would deadlock until -w runs out (75);
/// a set is taken in one order, so every round runs, and never together.
fn opposite_orders(rl: &(dyn Fn() -> Rlock + Sync), a: &str, b: &str, rounds: usize) {
    let dir = tmp(&format!("opp-{a}-{b}"));
    std::thread::scope(|s| {
        let jobs = [(a, b, "ab"), (b, a, "ba")].map(|(x, y, me)| {
            let script = inside(&dir, me);
            s.spawn(move || {
                for _ in 0..rounds {
                    rl().args([
                        "exec", "-w", "30s", x, "--and", y, "--", "sh", "-c", &script,
                    ])
                    .run()
                    .ok();
                }
            })
        });
        for j in jobs {
            j.join().unwrap();
        }
    });
    assert!(
        !dir.join("overlap").exists(),
        "two jobs were inside at once: {}",
        read(&dir.join("overlap"))
    );
}

#[test]
fn opposite_orders_never_deadlock_nor_overlap() {
    let r = Redis::start();
    opposite_orders(&|| rlock(&r), "staging-db", "staging-app", 25);
    r.assert_nothing_held(&[]);
}

#[test]
fn the_command_sees_every_fence_and_status_shows_the_set() {
    let r = Redis::start();
    let out = rlock(&r)
        .args([
            "exec",
            "b",
            "--and",
            "a",
            "--",
            "sh",
            "-c",
            "echo \"$RLOCK_KEY $RLOCK_FENCES\"; echo \"$RLOCK_HELD\" | wc -l",
        ])
        .run()
        .ok()
        .stdout;
    let lines: Vec<&str> = out.lines().collect();
    let fences: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(fences[0], "b", "{out}");
    assert!(
        fences[1].starts_with("b=") && fences[2].starts_with("a="),
        "{out}"
    );
    assert_eq!(lines[1].trim(), "2", "RLOCK_HELD lists both: {out}");
    // While held: status (text and JSON) names the other lock of the set.
    let child = rlock(&r)
        .args(["exec", "x", "--and", "y", "--and", "z", "--", "sleep", "5"])
        .spawn();
    eventually(Duration::from_secs(5), "the set held", || r.held("z"));
    let st = r.status_json("y");
    assert_eq!(
        st["holders"][0]["set"],
        serde_json::json!(["x", "z"]),
        "{st}"
    );
    let text = rlock(&r).args(["status", "x"]).run().ok().stdout;
    assert!(text.contains(" with y,z"), "{text}");
    let list = rlock(&r).args(["list", "--json"]).run().ok().stdout;
    assert!(list.contains(r#""set":["x","y"]"#), "{list}");
    let top = rlock(&r).args(["top", "--once"]).run().ok().stdout;
    assert!(top.contains(" with x,z"), "{top}");
    kill(child.id(), libc::SIGTERM);
    finish(child, "exec x y z").code(143);
    let h = rlock(&r).args(["history", "y", "--json"]).run().ok().stdout;
    assert!(h.contains(r#""set":["x","z"]"#), "{h}");
    r.assert_nothing_held(&[]);
}

#[test]
fn busy_on_the_second_key_leaves_the_first_free() {
    let r = Redis::start();
    let tok = rlock(&r).args(["acquire", "b"]).run().ok().token();
    rlock(&r)
        .args(["exec", "-n", "a", "--and", "b", "--", "true"])
        .run()
        .fails(75, "\"b\"");
    assert!(!r.held("a"), "a was left held");
    assert_eq!(r.status_json("b")["waiting"], 0);
    rlock(&r).args(["release", "b", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn a_timed_out_wait_leaves_nothing_held_or_queued() {
    let r = Redis::start();
    let tok = rlock(&r)
        .args(["acquire", "b"])
        .by_another_process()
        .run()
        .ok()
        .token();
    // -w is for the whole set: a is taken at once, b times out.
    rlock(&r)
        .args(["exec", "-q", "-w", "1s", "b", "--and", "a", "--", "true"])
        .run()
        .fails(75, "timed out after 1");
    assert!(!r.held("a"), "a was left held");
    assert_eq!(r.status_json("a")["waiting"], 0);
    assert_eq!(r.status_json("b")["waiting"], 0);
    rlock(&r).args(["release", "b", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn losing_one_lock_of_the_set_stops_the_command_with_79_naming_it() {
    let r = Redis::start();
    let dir = tmp("loss");
    let ready = dir.join("ready");
    let script = format!("touch {}; while :; do sleep 0.01; done", ready.display());
    let child = rlock(&r)
        .args([
            "exec", "--ttl", "900ms", "a", "--and", "b", "--", "sh", "-c", &script,
        ])
        .spawn();
    eventually(Duration::from_secs(5), "the command", || ready.exists());
    let _: () = r.cmd(&["DEL", "rlock:{b}:h"]);
    let run = finish(child, "exec a b").fails_with_lines(79, "lock \"b\"");
    assert!(!run.stderr.contains("lock \"a\""), "{}", run.stderr);
    assert!(!r.held("a"), "a was left held after b's loss");
}

#[test]
fn breaking_one_lock_of_the_set_stops_the_command() {
    let r = Redis::start();
    let dir = tmp("break");
    let ready = dir.join("ready");
    let script = format!("touch {}; sleep 30", ready.display());
    let child = rlock(&r)
        .args([
            "exec", "--ttl", "900ms", "b", "--and", "a", "--", "sh", "-c", &script,
        ])
        .spawn();
    eventually(Duration::from_secs(5), "the command", || ready.exists());
    rlock(&r)
        .args(["break", "a", "-y", "--reason", "test"])
        .run()
        .ok();
    finish(child, "exec b a").fails_with_lines(79, "\"a\"");
    assert!(!r.held("b"));
}

/// A set waiting for its next lock learns at its next renewal (TTL/3) that
/// a lock it holds already is being broken: it gives that one back at once
/// (the break then passes it on, not its lease's end), leaves the queue it
/// waits in, and ends with the loss's 79, naming it.
#[test]
fn a_set_waiting_for_its_next_lock_gives_back_a_broken_one_at_once() {
    let r = Redis::start();
    rlock(&r)
        .args(["acquire", "--ttl", "60s", "b"])
        .by_another_process()
        .run()
        .ok();
    let child = rlock(&r)
        .args([
            "exec", "--ttl", "6s", "-w", "60s", "a", "--and", "b", "--", "true",
        ])
        .spawn();
    r.await_waiters("b", 1);
    assert!(r.held("a"), "a is taken before b is waited for");
    rlock(&r)
        .args(["break", "a", "-y", "--reason", "test"])
        .run()
        .ok();
    let run = finish(child, "exec a b").fails_with_lines(79, "\"a\"");
    assert!(run.stderr.contains("broken by"), "{}", run.stderr);
    // Without the give-back the set would wait for b (60 s) and the broken
    // hold would stay until its lease ends.
    assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);
    assert!(!r.held("a"), "the broken hold of a was left to its lease");
    let h = rlock(&r).args(["history", "a", "--json"]).run().ok().stdout;
    let events: Vec<String> = h
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].to_string())
        .collect();
    assert_eq!(
        events,
        [r#""granted""#, r#""broken""#, r#""released""#],
        "{h}"
    );
    assert_eq!(r.status_json("b")["waiting"], 0);
    assert!(r.held("b"), "b's own holder is untouched");
}

#[test]
fn bad_input_is_refused_with_64_and_nothing_written() {
    let r = Redis::start();
    rlock(&r)
        .args(["exec", "a", "--and", "a", "--", "true"])
        .run()
        .fails(64, "named twice");
    // k0 --and k1 --and k2 ...: `set(n)` names n locks.
    let set = |n: usize| -> Vec<String> {
        (0..n)
            .flat_map(|i| ["--and".to_string(), format!("k{i}")])
            .skip(1)
            .collect()
    };
    rlock(&r)
        .args(["exec"])
        .args(set(17))
        .args(["--", "true"])
        .run()
        .fails(64, "at most 16");
    rlock(&r)
        .args(["exec", "a", "--and", "b", "--"])
        .run()
        .fails(64, "no command");
    // A bad second name is bad input, even with no Redis to connect to.
    bare_rlock()
        .env("RLOCK_URL", "redis://127.0.0.1:1")
        .args(["exec", "a", "--and", "b\u{1}", "--", "true"])
        .run()
        .fails(64, "control");
    assert!(r.keys().is_empty(), "written: {:?}", r.keys());
    // Options anywhere before `--`; 16 is allowed.
    rlock(&r)
        .args([
            "exec", "--ttl", "5s", "a", "-n", "--and", "b", "-q", "--", "true",
        ])
        .run()
        .ok();
    rlock(&r)
        .args(["exec"])
        .args(set(16))
        .args(["--", "true"])
        .run()
        .ok();
}

#[test]
fn a_set_on_a_cluster_spans_masters() {
    let c = Cluster::start(3);
    let keys: Vec<String> = (0..12).map(|i| format!("job-{i}")).collect();
    let a = &keys[0];
    let b = keys
        .iter()
        .find(|k| c.master_of(k) != c.master_of(a))
        .expect("a key on another master");
    let rc = || {
        bare_rlock()
            .env("RLOCK_URL", &c.urls())
            .env("RLOCK_CLUSTER", "1")
    };
    opposite_orders(&rc, a, b, 10);
    let tok = rc().args(["acquire", b]).run().ok().token();
    rc().args(["exec", "-n", a, "--and", b, "--", "true"])
        .run()
        .fails(75, b);
    rc().args(["release", b, "--token", &tok]).run().ok();
    for r in &c.nodes {
        r.assert_nothing_held(&[]);
    }
}

#[test]
fn a_set_under_redlock() {
    let ms: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let urls = ms.iter().map(Redis::url).collect::<Vec<_>>().join(",");
    let rl = || bare_rlock().env("RLOCK_URL", &urls);
    opposite_orders(&rl, "a", "b", 8);
    let tok = rl().args(["acquire", "b"]).run().ok().token();
    rl().args(["exec", "-n", "a", "--and", "b", "--", "true"])
        .run()
        .fails(75, "\"b\"");
    for m in &ms {
        assert!(!m.held("a"));
    }
    rl().args(["release", "b", "--token", &tok]).run().ok();
    for m in &ms {
        m.assert_nothing_held(&[]);
    }
}

/// The locks taken first are renewed while a later one is waited for: a
/// wait longer than the TTL does not let them expire under the set.
#[test]
fn the_first_locks_are_kept_while_a_later_one_is_waited_for() {
    let r = Redis::start();
    // b is held for 3 s (it expires: nobody renews it), more than a's TTL.
    rlock(&r)
        .args(["acquire", "--ttl", "3s", "b"])
        .by_another_process()
        .run()
        .ok();
    // `check a` inside: a's own token (RLOCK_HELD) still holds it.
    rlock(&r)
        .args([
            "exec", "-q", "--ttl", "1s", "-w", "10s", "a", "--and", "b", "--",
        ])
        .args([
            "sh",
            "-c",
            &format!("{} check a", env!("CARGO_BIN_EXE_rlock")),
        ])
        .run()
        .ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn acquire_prints_one_token_per_lock_in_the_order_named() {
    let r = Redis::start();
    let out = rlock(&r).args(["acquire", "z", "a"]).run().ok().stdout;
    let toks: Vec<&str> = out.lines().collect();
    assert_eq!(toks.len(), 2, "{out}");
    rlock(&r)
        .args(["check", "z", "--token", toks[0]])
        .run()
        .ok();
    rlock(&r)
        .args(["check", "a", "--token", toks[1]])
        .run()
        .ok();
    assert_eq!(
        r.status_json("a")["holders"][0]["set"],
        serde_json::json!(["z"])
    );
    // -n for the set: z busy, a (taken first) given back.
    rlock(&r)
        .args(["release", "a", "--token", toks[1]])
        .run()
        .ok();
    rlock(&r)
        .args(["acquire", "-n", "z", "a"])
        .run()
        .fails(75, "\"z\"");
    assert!(!r.held("a"), "a was left held");
    rlock(&r)
        .args(["release", "z", "--token", toks[0]])
        .run()
        .ok();
    rlock(&r)
        .args(["acquire", "a", "a"])
        .run()
        .fails(64, "named twice");
    r.assert_nothing_held(&[]);
}

#[test]
fn rw_takes_a_set_too() {
    let r = Redis::start();
    let out = rlock(&r)
        .args([
            "rw",
            "read",
            "a",
            "--and",
            "b",
            "--",
            "sh",
            "-c",
            "echo $RLOCK_FENCES",
        ])
        .run()
        .ok()
        .stdout;
    assert!(out.starts_with("a=") && out.contains(" b="), "{out}");
    rlock(&r)
        .args(["rw", "write", "b", "--and", "b", "--", "true"])
        .run()
        .fails(64, "named twice");
    // Without a command: one token per lock, as `acquire a b` prints.
    let out = rlock(&r)
        .args(["rw", "read", "b", "--and", "a", "--ttl", "5s"])
        .run()
        .ok()
        .stdout;
    let toks: Vec<&str> = out.lines().collect();
    assert_eq!(toks.len(), 2, "{out}");
    for (k, t) in [("b", toks[0]), ("a", toks[1])] {
        rlock(&r).args(["release", k, "--token", t]).run().ok();
    }
    r.assert_nothing_held(&[]);
}

/// `acquire --keep a b`: both held while the script lives, both released
/// when it ends.
#[test]
fn acquire_keep_holds_the_set_for_the_script() {
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let script = format!(
        "{bin} acquire --keep q p >/dev/null || exit 9; \
         {bin} status p --json; {bin} status q --json"
    );
    let out = rlock(&r)
        .args(["exec", "outer", "--", "sh", "-c", &script])
        .in_pid_namespace()
        .run()
        .ok()
        .stdout;
    assert_eq!(out.matches("\"held\":true").count(), 2, "{out}");
    eventually(Duration::from_secs(5), "the keepers to release", || {
        !r.held("p") && !r.held("q")
    });
    r.assert_nothing_held(&[]);
}

/// A set nested in an exec of the same set, named in another order,
/// re-enters every lock instead of waiting for its own parent.
#[test]
fn a_nested_exec_of_the_same_set_reenters() {
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let inner = format!("{bin} exec -n b --and a -- true");
    rlock(&r)
        .args(["exec", "a", "--and", "b", "--", "sh", "-c", &inner])
        .run()
        .ok();
    r.assert_nothing_held(&[]);
}
