//! What a new user trips over (issue #25): each test reproduces one of
//! the audit's findings against the real binary and a real redis-server.

use std::time::Duration;

use crate::util::*;

#[test]
fn e0_waits_in_silence_as_flock_does() {
    // `rlock exec -w 0.5 -E 0 k -- true` on a busy lock exited 0 but
    // printed "rlock: waiting for lock ...": one cron mail per run.
    let r = Redis::shared();
    let tok = rlock(&r).args(["acquire", "k", "--ttl", "10s"]).run().ok();
    let quiet = rlock(&r)
        .args(["exec", "-w", "0.5", "-E", "0", "k", "--", "true"])
        .run()
        .ok();
    assert_eq!(quiet.stderr, "", "{}", quiet.stderr);
    // -v still tells, and without -E 0 the wait says whom it waits for.
    let told = rlock(&r)
        .args(["-v", "exec", "-w", "0.3", "-E", "0", "k", "--", "true"])
        .run()
        .ok();
    assert!(told.stderr.contains("waiting for lock"), "{}", told.stderr);
    let plain = rlock(&r)
        .args(["exec", "-w", "0.3", "k", "--", "true"])
        .run()
        .code(75);
    assert!(
        plain.stderr.contains("waiting for lock"),
        "{}",
        plain.stderr
    );
    rlock(&r)
        .args(["release", "k", "--token", tok.stdout.trim()])
        .run()
        .ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn status_text_shows_a_min_hold_holder_and_counts_in_good_grammar() {
    let r = Redis::shared();
    // `--min-hold`: "status shows the holder with count 0" held only of
    // --json; the text showed it as any holder.
    let tok = rlock(&r)
        .args(["acquire", "mh", "--min-hold", "3s"])
        .run()
        .ok()
        .stdout;
    rlock(&r)
        .args(["release", "mh", "--token", tok.trim()])
        .run()
        .ok();
    let text = rlock(&r).args(["status", "mh"]).run().ok().stdout;
    assert!(text.contains("released (--min-hold)"), "{text}");
    // "(1 re-entries left)".
    let tok = rlock(&r).args(["acquire", "re"]).run().ok().stdout;
    rlock(&r)
        .args(["acquire", "re"])
        .env("RLOCK_TOKEN", tok.trim())
        .run()
        .ok();
    let rel = rlock(&r)
        .args(["release", "re", "--token", tok.trim()])
        .run()
        .ok();
    assert!(rel.stderr.contains("(1 hold left)"), "{}", rel.stderr);
    rlock(&r)
        .args(["release", "re", "--token", tok.trim()])
        .run()
        .ok();
    // "1 waiting (1 writers)".
    let reader = rlock(&r).args(["rw", "read", "rwk"]).run().ok().stdout;
    let writer = rlock(&r).args(["rw", "write", "-w", "10s", "rwk"]).spawn();
    eventually(Duration::from_secs(5), "a writer waiting", || {
        rlock(&r)
            .args(["status", "rwk"])
            .run()
            .stdout
            .contains("waiting")
    });
    let text = rlock(&r).args(["status", "rwk"]).run().ok().stdout;
    assert!(text.contains("1 waiting (1 writer)\n"), "{text}");
    rlock(&r)
        .args(["release", "rwk", "--token", reader.trim()])
        .run()
        .ok();
    let w = finish(writer, "the writer").ok();
    rlock(&r)
        .args(["release", "rwk", "--token", w.stdout.trim()])
        .run()
        .ok();
    // Free once the park's deadline passes on the server's clock; its keys
    // expire at that very millisecond (PEXPIRE to the deadline), and may
    // still be listed in it: wait for them too.
    let state = [r.key("mh"), format!("{}:h", r.key("mh"))];
    eventually(Duration::from_secs(5), "mh free after its min-hold", || {
        !r.held("mh") && r.keys().iter().all(|k| !state.contains(k))
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn connection_errors_say_what_to_do() {
    // No Redis on the port: the error named the address but not how to
    // point rlock elsewhere.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let run = bare_rlock()
        .args([
            "--url",
            &format!("redis://127.0.0.1:{port}"),
            "acquire",
            "k",
        ])
        .run()
        .fails(69, "Connection refused");
    assert!(run.stderr.contains("RLOCK_URL"), "{}", run.stderr);
    // An ACL that does not cover --prefix: "NoPerm ... keys" named no key;
    // a refusal by the ACL exits 77.
    let r = Redis::start();
    let _: () = r.cmd(&["ACL", "SETUSER", "narrow", "on", ">pw", "~other:*", "+@all"]);
    let url = r.url().replace("redis://", "redis://narrow:pw@");
    let run = bare_rlock()
        .args(["--url", &url, "acquire", "k"])
        .run()
        .fails(77, "NOPERM");
    assert!(run.stderr.contains("~rlock:{*"), "{}", run.stderr);
    // --min-replicas with no replica: "... too few replicas - Client".
    let run = rlock(&r)
        .args(["--min-replicas", "1", "acquire", "-n", "k"])
        .run()
        .fails(69, "replicas");
    assert!(!run.stderr.contains(" - Client"), "{}", run.stderr);
    assert!(run.stderr.contains("rlock doctor"), "{}", run.stderr);
    r.assert_nothing_held(&[]);
}

#[test]
fn every_subcommand_page_lists_the_connection_options() {
    // README sends users to `man rlock-exec`, which lacked --url, --prefix,
    // --connect-timeout, TLS and their environment variables.
    let man = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    for page in ["rlock-exec.1", "rlock-acquire.1", "rlock-status.1"] {
        let text = read(&man.join(page));
        for want in [
            "\\-\\-url",
            "RLOCK_URL",
            "\\-\\-prefix",
            "\\-\\-connect\\-timeout",
            "\\-\\-tls\\-ca",
            "RLOCK_PASSWORD",
        ] {
            assert!(text.contains(want), "{page} lacks {want}");
        }
    }
}

#[test]
fn a_plain_acquire_that_its_script_then_waits_for_says_so() {
    // `tok=$(rlock acquire deploy --ttl 10m)` (the Usage example), then
    // `rlock exec deploy ...` in the same script: it waited for itself
    // without a word, and `status` named the long-gone acquire process.
    let r = Redis::shared();
    let d = crate::keep::tmp("plain-self-wait");
    let mut sh = crate::keep::script(
        &r,
        "bash",
        &d,
        "tok=$(\"$B\" acquire deploy --ttl 20s) || exit 9
         echo $$ > \"$D/pid\"
         \"$B\" status deploy --json > \"$D/status\"
         \"$B\" exec -w 1s deploy -- true 2>\"$D/err\"; echo $? > \"$D/rc\"
         \"$B\" release deploy --token \"$tok\"",
    );
    let out = crate::keep::finish_child(&mut sh);
    assert_eq!(out.0, Some(0), "{}", out.1);
    assert_eq!(read(&d.join("rc")).trim(), "75");
    let err = read(&d.join("err"));
    assert!(err.contains("waits for itself"), "{err}");
    let st: serde_json::Value = serde_json::from_str(&read(&d.join("status"))).unwrap();
    assert_eq!(
        st["holders"][0]["pid"].to_string(),
        read(&d.join("pid")).trim(),
        "{st}"
    );
    r.assert_nothing_held(&[]);
}
