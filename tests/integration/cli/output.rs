//! Output: status and list as text and JSON, prefixes and sockets, help
//! and version, a closed stdout, mistyped options.

use crate::util::*;

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
fn help_and_version_exit_0() {
    let run = bare_rlock().args(["--help"]).run().ok();
    assert!(run.stdout.contains("Exit codes:"));
    bare_rlock().args(["--version"]).run().ok();
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
        let mut sh = std::process::Command::new("sh");
        sh
            // In the text, not `exec "$0" "$@"`: `--keep` watches this
            // shell, and looks through a parent whose argv ends with ours.
            .args([
                "-c",
                &format!(
                    "'{}' {} >&-; exit $?",
                    env!("CARGO_BIN_EXE_rlock"),
                    args.join(" ")
                ),
            ])
            .env("RLOCK_URL", r.url())
            .env("RLOCK_PREFIX", &r.prefix);
        // (`--keep` below starts a keeper: in a PID namespace of its own.)
        let out = in_pid_namespace(&sh)
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
    // After the first `--`, a dash starts the command; a command's own
    // `--` after the first is its own. Without a `--` before the command,
    // a `--` in it makes the line read two ways: refused (see
    // cli::wrong_command).
    rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", "exit 3", "--", "x"])
        .run()
        .code(3);
    rlock(&r)
        .args(["exec", "k", "sh", "-c", "exit 4", "--", "x"])
        .run()
        .fails(64, "reads two ways");
    r.assert_nothing_held(&[]);
}
