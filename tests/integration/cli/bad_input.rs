//! Bad input: usage errors, malformed URLs (the password never echoed),
//! unreachable or silent servers, keys rlock did not write, servers that
//! are not Redis.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use crate::util::*;

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

/// exec's usual line (`rlock exec [OPTION]... KEY -- CMD`), which rlock
/// reads without clap when it can (src/bin/rlock/cli/fast.rs): with a bad
/// value, a repeated or conflicting option, a bad key or no command it is
/// refused as clap refuses it, and nothing is held or run.
#[test]
fn usual_exec_lines() {
    let r = Redis::shared();
    let ran = r.dir.join("usual-exec-lines-ran");
    let touch = format!("touch {}", ran.display());
    let line = |opts: &[&'static str], key: &'static str| -> Vec<String> {
        let mut v: Vec<String> = ["exec"].iter().chain(opts).map(|s| s.to_string()).collect();
        v.extend([
            key.into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            touch.clone(),
        ]);
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (line(&["--ttl", "soon"], "k"), "invalid duration"),
        (line(&["--ttl", "30"], "k"), "no unit"),
        (line(&["--ttl", "0s"], "k"), "out of range"),
        (line(&["-w", "1.2.3"], "k"), "invalid number of seconds"),
        (line(&["-w", "-1"], "k"), "unexpected argument '-1'"),
        (line(&["-E", "256"], "k"), "256 is not in 0..=255"),
        (line(&["-E", "x"], "k"), "--conflict-exit-code"),
        (line(&["-n", "-n"], "k"), "cannot be used multiple times"),
        (line(&["-q", "-v"], "k"), "cannot be used with"),
        (line(&[], ""), "must not be empty"),
        (line(&[], "a\tb"), "control characters"),
        (
            vec!["exec".into(), "k".into(), "--".into()],
            "no command given",
        ),
    ];
    for (args, needle) in &cases {
        rlock(&r).args(args).run().fails(64, needle);
        r.assert_nothing_held(&[]);
    }
    assert!(!ran.exists(), "a refused line ran its command");
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
    // it says what is wrong and what to check, which redis-rs' own words
    // ("Incompatible type - Parse error at 1 Unexpected `84`") do not.
    let html = b"<!DOCTYPE HTML>\r\n<html><body>Bad request</body></html>\r\n";
    bare_rlock()
        .args(["--url", &not_redis(html), "acquire", "k"])
        .run()
        .fails(70, "did not answer as Redis does");
}
