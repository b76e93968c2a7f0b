//! The CLI contract: output, exit codes, bad input, waiting.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use crate::util::*;

#[test]
fn acquire_prints_only_a_token_and_release_frees() {
    let r = Redis::shared();
    let run = rlock(&r).args(["acquire", "job"]).run().ok();
    assert_eq!(run.stderr, "");
    let tok = run.token();
    let st = r.status_json("job");
    assert_eq!(st["held"], true);
    assert!(st["holders"][0]["pid"].as_u64().is_some());
    assert!(st["holders"][0]["ttl_ms"].as_u64().unwrap() > 25_000);
    assert!(
        !serde_json::to_string(&st).unwrap().contains(&tok),
        "status leaks the token"
    );
    rlock(&r)
        .args(["release", "job", "--token", &tok])
        .run()
        .ok();
    assert_eq!(r.status_json("job")["held"], false);
    r.assert_nothing_held(&[]);
}

#[test]
fn releasing_twice_is_harmless_and_says_so() {
    let r = Redis::shared();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    rlock(&r)
        .args(["release", "k"])
        .env("RLOCK_TOKEN", &tok)
        .run()
        .ok();
    let again = rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    assert!(again.stderr.contains("not held"), "{}", again.stderr);
    r.assert_nothing_held(&[]);
    // Also while other slots of a semaphore are held (it said "another
    // owner", 77, before).
    let a = rlock(&r)
        .args(["acquire", "--limit", "2", "s"])
        .run()
        .ok()
        .token();
    let b = rlock(&r)
        .args(["acquire", "--limit", "2", "s"])
        .run()
        .ok()
        .token();
    rlock(&r).args(["release", "s", "--token", &a]).run().ok();
    let again = rlock(&r).args(["release", "s", "--token", &a]).run().ok();
    assert!(again.stderr.contains("not held"), "{}", again.stderr);
    rlock(&r).args(["release", "s", "--token", &b]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn busy_no_wait_exits_75_or_the_conflict_code() {
    let r = Redis::shared();
    rlock(&r).args(["acquire", "k"]).run().ok();
    rlock(&r)
        .args(["acquire", "-n", "k"])
        .run()
        .fails(75, "busy");
    rlock(&r)
        .args(["acquire", "-n", "-E", "0", "k"])
        .run()
        .code(0);
    rlock(&r)
        .args(["acquire", "--no-wait", "--conflict-exit-code", "3", "k"])
        .run()
        .code(3);
    // -w 0s means "try once" too.
    rlock(&r).args(["acquire", "-w", "0s", "k"]).run().code(75);
}

#[test]
fn wait_times_out_with_75_and_leaves_the_queue() {
    let r = Redis::shared();
    rlock(&r)
        .args(["acquire", "k"])
        .by_another_process()
        .run()
        .ok();
    let run = rlock(&r)
        .args(["acquire", "-w", "300ms", "k"])
        .run()
        .code(75);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    assert!(
        lines[0].contains("waiting for lock \"k\" held by host"),
        "{}",
        run.stderr
    );
    assert!(lines[1].contains("timed out"), "{}", run.stderr);
    assert!(run.elapsed >= Duration::from_millis(300));
    assert_eq!(r.status_json("k")["waiters"], 0);
    // -q silences the waiting line, not the error.
    rlock(&r)
        .args(["-q", "acquire", "-w", "100ms", "k"])
        .run()
        .fails(75, "timed out");
}

#[test]
fn waiter_gets_the_lock_when_it_is_released() {
    let r = Redis::shared();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    let waiter = rlock(&r).args(["acquire", "k"]).spawn();
    r.await_waiters("k", 1);
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    let got = finish(waiter, "waiter").ok();
    assert_ne!(got.token(), tok);
    assert_eq!(r.status_json("k")["held"], true);
}

#[test]
fn waiter_gets_the_lock_when_the_holder_expires_without_release() {
    let r = Redis::shared();
    rlock(&r)
        .args(["acquire", "k", "--ttl", "700ms"])
        .run()
        .ok();
    let run = rlock(&r).args(["acquire", "k", "-w", "10s"]).run().ok();
    run.token();
    // Bounded by the holder's TTL, not by the 10 s wait or a 2 s heartbeat.
    assert!(
        run.elapsed < Duration::from_millis(1900),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn renew_extends_only_for_the_owner() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "k", "--ttl", "5s"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["renew", "k", "--token", &tok, "--ttl", "1h"])
        .run()
        .ok();
    let ttl = r.status_json("k")["holders"][0]["ttl_ms"].as_u64().unwrap();
    assert!(ttl > 3_000_000, "ttl {ttl}");
    let foreign = uuid::Uuid::new_v4().to_string();
    rlock(&r)
        .args(["renew", "k", "--token", &foreign])
        .run()
        .fails(77, "does not own");
    rlock(&r)
        .args(["release", "k", "--token", &foreign])
        .run()
        .fails(77, "does not own");
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    rlock(&r)
        .args(["renew", "k", "--token", &tok])
        .run()
        .fails(79, "lost");
    r.assert_nothing_held(&[]);
}

#[test]
fn renew_never_revives_an_expired_lease() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "k", "--ttl", "100ms"])
        .run()
        .ok()
        .token();
    eventually(Duration::from_secs(5), "the lease to expire", || {
        !r.held("k")
    });
    rlock(&r)
        .args(["renew", "k", "--token", &tok])
        .run()
        .fails(79, "lost");
    assert_eq!(r.status_json("k")["held"], false);
}

#[test]
fn fencing_counter_increases_with_every_grant() {
    let r = Redis::shared();
    let mut last = 0;
    for _ in 0..4 {
        let tok = rlock(&r).args(["acquire", "f"]).run().ok().token();
        let fence = r.status_json("f")["holders"][0]["fence"].as_u64().unwrap();
        assert!(fence > last, "fence {fence} after {last}");
        last = fence;
        rlock(&r).args(["release", "f", "--token", &tok]).run().ok();
    }
    assert_eq!(r.status_json("f")["fence"], last);
}

#[test]
fn status_and_list_text_and_json() {
    let r = Redis::shared();
    rlock(&r).args(["acquire", "alpha"]).run().ok();
    rlock(&r).args(["acquire", "beta"]).run().ok();
    let st = rlock(&r).args(["status", "alpha"]).run().ok();
    assert!(
        st.stdout.starts_with("alpha: held\n  host "),
        "{}",
        st.stdout
    );
    let free = rlock(&r).args(["status", "nothing"]).run().ok();
    assert_eq!(free.stdout, "nothing: free\n");
    let all: serde_json::Value =
        serde_json::from_str(&rlock(&r).args(["list", "--json"]).run().ok().stdout).unwrap();
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    // A foreign hash that looks like a lock does not break the listing.
    let _: () = r.cmd(&["HSET", &r.key(""), "x", "1"]);
    rlock(&r).args(["list"]).run().ok();
    let some = rlock(&r).args(["list", "b*"]).run().ok();
    assert!(some.stdout.starts_with("beta: held"), "{}", some.stdout);
    assert!(!some.stdout.contains("alpha"));
}

#[test]
fn limit_admits_n_holders_and_refuses_another_n() {
    let r = Redis::shared();
    for _ in 0..2 {
        rlock(&r)
            .args(["acquire", "--limit", "2", "-n", "pool"])
            .run()
            .ok();
    }
    rlock(&r)
        .args(["acquire", "--limit", "2", "-n", "pool"])
        .run()
        .fails(75, "busy");
    let st = r.status_json("pool");
    assert_eq!(
        (
            st["limit"].as_u64(),
            st["holders"].as_array().unwrap().len()
        ),
        (Some(2), 2)
    );
    rlock(&r)
        .args(["acquire", "--limit", "3", "-n", "pool"])
        .run()
        .fails(64, "--limit 2, not 3");
    rlock(&r)
        .args(["acquire", "-n", "pool"])
        .run()
        .fails(64, "--limit 2, not 1");
    let text = rlock(&r).args(["status", "pool"]).run().ok();
    assert!(
        text.stdout.starts_with("pool: 2 of 2 slots held\n"),
        "{}",
        text.stdout
    );
}

#[test]
fn prefix_separates_namespaces() {
    let r = Redis::start();
    rlock(&r)
        .args(["--prefix", "a:", "acquire", "k"])
        .run()
        .ok();
    rlock(&r)
        .args(["--prefix", "b:", "acquire", "-n", "k"])
        .run()
        .ok();
    rlock(&r)
        .args(["acquire", "-n", "k"])
        .env("RLOCK_PREFIX", "a:")
        .run()
        .code(75);
    assert!(r.keys().iter().any(|k| k == "a:{k}"), "{:?}", r.keys());
}

#[test]
fn unix_socket_url_works() {
    let r = Redis::start();
    let url = format!("unix://{}", r.socket().display());
    let tok = bare_rlock()
        .args(["--url", &url, "acquire", "k"])
        .run()
        .ok()
        .token();
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
}

#[test]
fn sigint_while_waiting_exits_130_and_leaves_nothing() {
    let r = Redis::shared();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    let waiter = rlock(&r).args(["acquire", "k"]).spawn();
    r.await_waiters("k", 1);
    kill(waiter.id(), libc::SIGINT);
    let run = finish(waiter, "waiter").code(130);
    assert!(
        run.stderr
            .ends_with("interrupted by signal 2 while waiting; nothing is held\n"),
        "{}",
        run.stderr
    );
    assert!(run.elapsed < Duration::from_secs(1), "{:?}", run.elapsed);
    assert_eq!(r.status_json("k")["waiters"], 0);
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn waiters_are_served_in_arrival_order() {
    let r = Redis::shared();
    let f = r.fence_ahead("q");
    let tok = rlock(&r).args(["acquire", "q"]).run().ok().token();
    let mut waiters = Vec::new();
    for i in 1..=5 {
        let child = rlock(&r).args(["acquire", "q"]).spawn();
        r.await_waiters("q", i);
        waiters.push(child);
    }
    let mut order = Vec::new();
    let mut held = tok;
    for mut w in waiters.into_iter() {
        rlock(&r)
            .args(["release", "q", "--token", &held])
            .run()
            .ok();
        let mut out = String::new();
        let _ = w.wait().unwrap();
        w.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        held = out.trim().to_string();
        order.push(r.status_json("q")["holders"][0]["fence"].as_u64().unwrap());
    }
    // Each waiter in turn got the next grant: a later one never overtook.
    assert_eq!(order, [f + 2, f + 3, f + 4, f + 5, f + 6]);
}

mod bad_input {
    use super::*;

    /// Each of `cases` (arguments, what the error says) is a usage error
    /// that leaves nothing held.
    #[track_caller]
    fn usage_errors(r: &Redis, cases: &[(&[&str], &str)]) {
        for (args, needle) in cases {
            rlock(r).args(*args).run().fails(64, needle);
            r.assert_nothing_held(&[]);
        }
    }

    #[test]
    fn durations() {
        let r = Redis::shared();
        let tok = uuid::Uuid::new_v4().to_string();
        usage_errors(
            &r,
            &[
                (&["acquire", "k", "--ttl", "30"], "no unit"),
                (&["acquire", "k", "--ttl", "soon"], "invalid duration"),
                (&["acquire", "k", "--ttl", "0s"], "out of range"),
                (&["acquire", "k", "--ttl", "10years"], "out of range"),
                (&["acquire", "k", "--ttl", "1000years"], "too long"),
                (&["acquire", "k", "-w", "18446744073709551615s"], "duration"),
                (&["--connect-timeout", "0s", "status", "k"], "out of range"),
                // A bare number is seconds for a wait (as flock), never for a TTL.
                (&["acquire", "k", "--ttl", "5"], "no unit"),
                (&["acquire", "k", "-w", "1.2.3"], "invalid"),
                (&["acquire", "k", "--min-hold", "8days"], "too long"),
                (
                    &["release", "k", "--token", &tok, "--min-hold", "8days"],
                    "too long",
                ),
                (
                    &["release", "k", "--token", &tok, "--min-hold", "5"],
                    "no unit",
                ),
                (
                    &["--connect-timeout", "x", "status", "k"],
                    "invalid duration",
                ),
                (
                    &["renew", "k", "--token", &tok, "--ttl", "0ms"],
                    "out of range",
                ),
            ],
        );
    }

    #[test]
    fn keys_and_flags() {
        let r = Redis::shared();
        usage_errors(
            &r,
            &[
                (&["acquire", ""], "must not be empty"),
                (&["acquire", "a\tb"], "control characters"),
                (&["acquire", "}x"], "empty hash tag"),
                (&["acquire", "a\u{1b}[31m"], "control characters"),
                (&["acquire", &"x".repeat(600)], "at most 512"),
                (&["acquire", "k", "--limit", "0"], "limit"),
                (&["frobnicate"], "unrecognized subcommand"),
                (&["release", "k"], "--token"),
            ],
        );
    }

    #[test]
    fn tokens() {
        let r = Redis::shared();
        usage_errors(
            &r,
            &[
                (
                    &["release", "k", "--token", "not-a-uuid"],
                    "malformed token",
                ),
                (&["renew", "k", "--token", "'; DEL x"], "malformed token"),
            ],
        );
    }

    #[test]
    fn unknown_url_scheme() {
        let r = Redis::shared();
        for url in ["http://127.0.0.1:1", "localhost:6379", "memcached://h"] {
            bare_rlock()
                .args(["--url", url, "acquire", "k"])
                .run()
                .fails(64, "scheme");
        }
        r.assert_nothing_held(&[]);
    }

    #[test]
    fn unreachable_host_fails_within_the_connect_timeout() {
        // Nobody listens on this port: refused at once.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("redis://127.0.0.1:{port}");
        bare_rlock()
            .args(["--url", &url, "acquire", "k"])
            .run()
            .fails(69, "cannot use Redis");
        // Someone accepts but never answers: the timeout must cut it short.
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://127.0.0.1:{}", silent.local_addr().unwrap().port());
        let run = bare_rlock()
            .args(["--url", &url, "--connect-timeout", "500ms", "acquire", "k"])
            .run()
            .fails(69, "127.0.0.1");
        assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
    }

    /// A peer that accepts connections and never answers (a frozen Redis,
    /// another service): every command gives up after one --connect-timeout
    /// and says so in one line. acquire and exec took twice the timeout
    /// (the grant was given back on a second connection, which waited as
    /// long again), and every command said "Resource temporarily
    /// unavailable (os error 11)".
    #[test]
    fn a_silent_server_is_given_up_on_after_one_timeout() {
        // The kernel completes the connection (backlog); nobody reads.
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = format!("127.0.0.1:{}", silent.local_addr().unwrap().port());
        let url = format!("redis://{addr}");
        let tok = "0b0e8e3c-2c5a-4d38-9b43-3f0e5d6a7c21";
        let commands: [&[&str]; 10] = [
            &["acquire", "k"],
            &["acquire", "-n", "k"],
            &["exec", "k", "--", "true"],
            &["rw", "read", "k", "--", "true"],
            &["status", "k"],
            &["list"],
            &["doctor"],
            &["release", "k", "--token", tok],
            &["renew", "k", "--token", tok],
            &["check", "k", "--token", tok],
        ];
        for args in commands {
            let run = bare_rlock()
                .args(["--url", &url, "--connect-timeout", "1s"])
                .args(args)
                .run()
                .fails(69, &format!("Redis at {addr} did not answer within 1s"));
            assert!(
                run.elapsed < Duration::from_secs(2),
                "{args:?} gave up after {:?}, more than the timeout",
                run.elapsed
            );
        }
    }

    #[test]
    fn malformed_urls_never_echo_the_password() {
        for url in [
            "redis://:se?cret@127.0.0.1:1",
            "redis://u:se/cret@127.0.0.1:1",
            "redis:/:secret@h",
        ] {
            let run = bare_rlock().args(["--url", url, "status", "k"]).run();
            assert!(run.code == 64 || run.code == 69, "{url}: {}", run.code);
            assert!(!run.stderr.contains("cret"), "{url}: {}", run.stderr);
        }
    }

    #[test]
    fn query_strings_and_misplaced_urls_never_echo_the_password() {
        let run = bare_rlock()
            .args([
                "--url",
                "unix:///nonexistent.sock?pass=hunter2",
                "status",
                "k",
            ])
            .run();
        assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
        let run = bare_rlock()
            .args(["status", "k", "redis://:hunter2@h"])
            .run()
            .code(64);
        assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    }

    #[test]
    fn wrong_password_is_refused_and_never_printed() {
        let r = Redis::start_with(&["--requirepass", "right-horse"]);
        let url = format!("redis://:wrong-battery@127.0.0.1:{}", r.port);
        let run = bare_rlock()
            .args(["--url", &url, "acquire", "k"])
            .run()
            .fails(69, "127.0.0.1");
        assert!(!run.stderr.contains("wrong-battery"), "{}", run.stderr);
        let run = rlock(&r)
            .env("RLOCK_PASSWORD", "staple-wrong")
            .args(["acquire", "k"])
            .run()
            .fails(69, "127.0.0.1");
        assert!(!run.stderr.contains("staple-wrong"), "{}", run.stderr);
        // No password at all: NOAUTH is a refusal too.
        rlock(&r).args(["status", "k"]).run().fails(69, "auth");
        // Script calls have too many arguments for an unauthenticated
        // client: Redis 7 answers "Protocol error: unauthenticated
        // multibulk length" instead of NOAUTH. Still a refusal, not an
        // unexpected reply (70), and the fix is named.
        let tok = uuid::Uuid::new_v4().to_string();
        for args in [
            vec!["acquire", "k"],
            vec!["exec", "k", "--", "true"],
            vec!["rw", "read", "k", "--", "true"],
            vec!["release", "k", "--token", &tok],
            vec!["renew", "k", "--token", &tok],
            vec!["check", "k", "--token", &tok],
            vec!["status", "k"],
            vec!["list"],
            vec!["doctor"],
        ] {
            rlock(&r).args(&args).run().fails(69, "RLOCK_PASSWORD");
        }
        // The right one from the environment works.
        let tok = rlock(&r)
            .env("RLOCK_PASSWORD", "right-horse")
            .args(["acquire", "k"])
            .run()
            .ok()
            .token();
        assert!(!tok.is_empty());
    }

    #[test]
    fn key_of_another_type() {
        let r = Redis::start();
        let _: () = r.cmd(&["SET", "rlock:{str}", "someone else's"]);
        refused_foreign(&r, "str", &["rlock:{str}"]);
        let _: () = r.cmd(&["RPUSH", "rlock:{list}:h", "x"]);
        refused_foreign(&r, "list", &["rlock:{str}", "rlock:{list}:h"]);
        let _: () = r.cmd(&["SET", "rlock:{fence}:fence", "abc"]);
        rlock(&r).args(["acquire", "fence"]).run().code(64);
        r.assert_nothing_held(&["rlock:{str}", "rlock:{list}:h", "rlock:{fence}:fence"]);
    }

    /// Data rlock did not write, at any key a lock uses, is refused (64,
    /// "not an rlock lock") by every command, and left exactly as it was.
    /// A user's hash at `rlock:{users}` was taken for a free lock: acquire
    /// added its fields and exit 0, and the release deleted the hash; a
    /// zset at `rlock:{z}:h` got a holder added; a counter at a fence key
    /// was counted on and given a TTL.
    #[test]
    fn data_rlock_did_not_write_is_refused_and_left_alone() {
        let r = Redis::shared();
        let k = |lock: &str, suffix: &str| format!("{}{suffix}", r.key(lock));
        let foreign: Vec<(String, Vec<&str>)> = vec![
            (k("users", ""), vec!["HSET", "alice", "1", "bob", "2"]),
            (k("z", ":h"), vec!["ZADD", "1", "alice", "2", "bob"]),
            (k("q", ":q"), vec!["ZADD", "1", "alice"]),
            (k("qa", ":qa"), vec!["ZADD", "1", "alice"]),
            (k("qw", ":qw"), vec!["ZADD", "1", "alice"]),
            (k("f", ":fence"), vec!["SET", "5"]),
        ];
        for (key, cmd) in &foreign {
            let mut args = vec![cmd[0], key.as_str()];
            args.extend(&cmd[1..]);
            let _: () = r.cmd(&args);
        }
        let dump = || -> Vec<Vec<u8>> {
            foreign
                .iter()
                .map(|(key, _)| r.cmd(&["DUMP", key]))
                .collect()
        };
        let before = dump();
        let tok = uuid::Uuid::new_v4().to_string();
        for lock in ["users", "z", "q", "qa", "qw", "f"] {
            for args in [
                vec!["acquire", "-n", lock],
                vec!["acquire", "-w", "1s", lock],
                vec!["exec", lock, "--", "true"],
                vec!["rw", "read", "-n", lock],
                vec!["rw", "write", lock, "--", "true"],
                vec!["release", lock, "--token", &tok],
                vec!["renew", lock, "--token", &tok],
                vec!["check", lock, "--token", &tok],
            ] {
                let run = rlock(&r).args(&args).run();
                if lock == "f" && !matches!(args[0], "acquire" | "exec" | "rw") {
                    // Only a grant writes the fence key.
                    assert!(matches!(run.code, 0 | 79), "{args:?}: {}", run.stderr);
                    continue;
                }
                run.fails(64, "not an rlock lock");
            }
            if lock != "f" {
                rlock(&r)
                    .args(["status", lock])
                    .run()
                    .fails(64, "not an rlock lock");
            }
        }
        assert_eq!(dump(), before, "foreign data was changed");
        for (key, _) in &foreign {
            assert_eq!(r.cmd::<i64>(&["PTTL", key]), -1, "{key} was given a TTL");
        }
        let mut keys: Vec<String> = foreign.iter().map(|(key, _)| key.clone()).collect();
        keys.sort();
        assert_eq!(r.keys(), keys, "keys were added next to foreign data");
    }

    /// A queue key someone else wrote next to a lock rlock holds: a waiter
    /// that would join the queue is refused, and the key left alone.
    #[test]
    fn a_foreign_queue_key_next_to_a_held_lock_is_refused() {
        let r = Redis::shared();
        let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
        let q = format!("{}:qa", r.key("k"));
        let _: () = r.cmd(&["ZADD", &q, "1", "alice"]);
        rlock(&r)
            .args(["acquire", "-w", "1s", "k"])
            .run()
            .fails(64, "not an rlock lock");
        assert_eq!(r.cmd::<Vec<String>>(&["ZRANGE", &q, "0", "-1"]), ["alice"]);
        assert_eq!(r.cmd::<i64>(&["PTTL", &q]), -1);
        rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
        let _: () = r.cmd(&["DEL", &q]);
        r.assert_nothing_held(&[]);
    }

    #[track_caller]
    fn refused_foreign(r: &Redis, key: &str, foreign: &[&str]) {
        let tok = uuid::Uuid::new_v4().to_string();
        for args in [
            vec!["acquire", key],
            vec!["status", key],
            vec!["release", key, "--token", &tok],
            vec!["renew", key, "--token", &tok],
        ] {
            rlock(r).args(&args).run().fails(64, "not an rlock lock");
        }
        r.assert_nothing_held(foreign);
    }

    /// A URL to a peer that answers every request it reads with `reply`.
    fn not_redis(reply: &'static [u8]) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://127.0.0.1:{}", l.local_addr().unwrap().port());
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let mut s = s;
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(reply).is_err() {
                        break;
                    }
                }
            }
        });
        url
    }

    #[test]
    fn a_server_that_is_not_redis_gives_70() {
        // A peer that answers every request with the integer 5: the reply
        // makes no sense for our script, and we must say so, not panic.
        bare_rlock()
            .args(["--url", &not_redis(b":5\r\n"), "acquire", "k"])
            .run()
            .fails(70, "unexpected reply");
    }

    #[test]
    fn a_server_that_is_not_redis_is_one_line() {
        // An HTTP server (say, the wrong port): redis-rs' parse error spans
        // several lines, the message must not (fails() wants one line), and
        // it said "Incompatible type - Parse error at 1 Unexpected `84`":
        // it now says what is wrong and what to check.
        let html = b"<!DOCTYPE HTML>\r\n<html><body>Bad request</body></html>\r\n";
        bare_rlock()
            .args(["--url", &not_redis(html), "acquire", "k"])
            .run()
            .fails(70, "did not answer as Redis does");
    }
}

#[test]
fn help_and_version_exit_0() {
    let run = bare_rlock().args(["--help"]).run().ok();
    assert!(run.stdout.contains("Exit codes:"));
    bare_rlock().args(["--version"]).run().ok();
}

#[test]
fn contention_many_processes_never_overlap() {
    // 8 shell loops, each taking the lock through the CLI and checking that
    // nobody else is inside: a counter that must read 1 while held.
    let r = Redis::start();
    let script = r#"
        for i in 1 2 3 4 5; do
          tok=$("$BIN" acquire c -w 60s) || exit 10
          n=$(redis-cli -p "$PORT" INCR inside)
          [ "$n" = 1 ] || { echo "overlap: $n holders" >&2; exit 11; }
          redis-cli -p "$PORT" DECR inside >/dev/null
          "$BIN" release c --token "$tok" || exit 12
        done"#;
    let f = r.fence_ahead("c");
    contenders(8, script, &r.url(), &r);
    assert_eq!(r.status_json("c")["fence"], f + 40);
    r.assert_nothing_held(&["inside"]);
}

#[test]
fn check_says_held_gone_or_taken_inside_and_outside_exec() {
    let r = Redis::start();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    let run = rlock(&r)
        .args(["-v", "check", "k", "--token", &tok])
        .run()
        .ok();
    assert!(run.stderr.contains("held by this token"), "{}", run.stderr);
    let json = rlock(&r)
        .args(["check", "k", "--json"])
        .env("RLOCK_TOKEN", &tok)
        .run()
        .ok();
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        (v["held"].as_bool(), v["fence"].clone()),
        (
            Some(true),
            r.status_json("k")["holders"][0]["fence"].clone()
        )
    );
    assert!(v["ttl_ms"].as_u64().unwrap() > 20_000, "{v}");
    // Another owner's token.
    let other = uuid::Uuid::new_v4().to_string();
    rlock(&r)
        .args(["check", "k", "--token", &other])
        .run()
        .fails(77, "does not own");
    // Released: gone.
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    rlock(&r)
        .args(["check", "k", "--token", &tok])
        .run()
        .fails(79, "holds it no more");
    // Inside exec, the key is enough; after a DEL the check says gone.
    let script =
        "$BIN check k && redis-cli -p $PORT DEL 'rlock:{k}:h' >/dev/null; $BIN check k; echo $?";
    let run = rlock(&r)
        .args(["exec", "k", "--on-lost", "ignore", "--", "sh", "-c", script])
        .env("BIN", env!("CARGO_BIN_EXE_rlock"))
        .env("PORT", &r.port.to_string())
        .run();
    assert_eq!(run.stdout.trim(), "79", "{}", run.stderr);
    // Bad input: no token, a malformed one.
    rlock(&r).args(["check", "k"]).run().code(64);
    rlock(&r)
        .args(["check", "k", "--token", "nope"])
        .run()
        .fails(64, "malformed token");
}

/// Inside `rlock exec deploy -- rlock exec db -- ...`, RLOCK_TOKEN is db's
/// token and deploy's is in RLOCK_HELD: `check`, `renew` and `release` of
/// deploy without --token act with deploy's, as a re-entering exec does
/// (they used RLOCK_TOKEN, and said "another owner", 77). An explicit
/// --token still wins, and a token the script exported is still found
/// past an exec of another lock.
#[test]
fn check_renew_and_release_use_the_token_rlock_held_records_for_the_lock() {
    let r = Redis::shared();
    let script = "$BIN check deploy; echo check=$?; \
         $BIN renew deploy --ttl 40s; echo renew=$?; \
         $BIN acquire -n deploy >/dev/null && $BIN -q release deploy; echo release=$?; \
         $BIN check deploy --token \"$RLOCK_TOKEN\" 2>/dev/null; echo explicit=$?; \
         $BIN check db; echo db=$?";
    let bin = env!("CARGO_BIN_EXE_rlock");
    let run = rlock(&r)
        .args([
            "exec", "deploy", "--", bin, "exec", "db", "--", "sh", "-c", script,
        ])
        .env("BIN", bin)
        .run()
        .ok();
    assert_eq!(
        run.stdout, "check=0\nrenew=0\nrelease=0\nexplicit=77\ndb=0\n",
        "stderr: {}",
        run.stderr
    );
    r.assert_nothing_held(&[]);
    // A token the script exported, passed down past an exec of another
    // lock (whose own token is then RLOCK_TOKEN).
    let tok = rlock(&r).args(["acquire", "a"]).run().ok().token();
    let run = rlock(&r)
        .args(["exec", "b", "--", "sh", "-c", "$BIN check a; echo a=$?"])
        .env("BIN", bin)
        .env("RLOCK_TOKEN", &tok)
        .run()
        .ok();
    assert_eq!(run.stdout, "a=0\n", "stderr: {}", run.stderr);
    rlock(&r).args(["release", "a", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}

/// A reader that went away (`rlock status k | true`) is an error like any
/// other: one line and exit 70, not a panic (print! panics on EPIPE, and
/// rlock ignores SIGPIPE). Like acquire, whose token cannot be written.
#[test]
fn a_closed_stdout_is_an_error_not_a_panic() {
    let r = Redis::start();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    for args in [
        &["status", "k"][..],
        &["status", "k", "--json"],
        &["list"],
        &["list", "--json"],
        &["check", "k", "--json", "--token", &tok],
    ] {
        let (rd, wr) = std::io::pipe().unwrap();
        drop(rd);
        rlock(&r)
            .args(args)
            .stdout(wr)
            .run()
            .fails(70, "cannot write to stdout");
    }
    // check's own answer wins over the closed stdout.
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    let (rd, wr) = std::io::pipe().unwrap();
    drop(rd);
    rlock(&r)
        .args(["check", "k", "--json", "--token", &tok])
        .stdout(wr)
        .run()
        .fails(79, "holds it no more");
    r.assert_nothing_held(&[]);
}

/// `rlock acquire kc >&-`: a stdout closed when rlock starts (not a pipe
/// whose reader left) was reopened on /dev/null with the other standard
/// descriptors, so the token went nowhere, rlock exited 0 and the lock
/// stayed held for its TTL with nobody able to release it. It is the same
/// error as a closed pipe: exit 70, one line, nothing held. Likewise for
/// `rw read|write KEY` without a command, and for what `status` prints.
#[test]
fn a_stdout_closed_at_start_is_an_error_and_nothing_is_held() {
    let r = Redis::shared();
    let closed = |args: &[&str]| {
        let started = std::time::Instant::now();
        let out = std::process::Command::new("sh")
            .args(["-c", "exec \"$0\" \"$@\" >&-", env!("CARGO_BIN_EXE_rlock")])
            .args(args)
            .env("RLOCK_URL", r.url())
            .env("RLOCK_PREFIX", &r.prefix)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        Run::from(
            out,
            started.elapsed(),
            format!("rlock {} >&-", args.join(" ")),
        )
    };
    for args in [
        &["acquire", "kc", "--ttl", "20s"][..],
        &["acquire", "-n", "kc", "--keep"],
        &["rw", "read", "kc"],
        &["rw", "write", "kc"],
    ] {
        closed(args).fails(70, "stdout");
        assert!(!r.held("kc"), "`{args:?} >&-` left the lock held");
    }
    closed(&["status", "kc", "--json"]).fails(70, "stdout");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_mistyped_option_before_the_dashes_is_64_not_the_command() {
    // `rlock exec k --tll 5s -- true` ran `--tll` as the command (127).
    let r = Redis::shared();
    for args in [
        &["exec", "k", "--tll", "5s", "--", "true"][..],
        &["rw", "read", "k", "--tll", "5s", "--", "true"][..],
    ] {
        rlock(&r)
            .args(args)
            .run()
            .fails(64, "unknown option \"--tll\"");
    }
    // After the first `--`, a dash starts the command as before; and
    // without `--`, a command's own `--` is its own.
    rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", "exit 3", "--", "x"])
        .run()
        .code(3);
    rlock(&r)
        .args(["exec", "k", "sh", "-c", "exit 4", "--", "x"])
        .run()
        .code(4);
    r.assert_nothing_held(&[]);
}
