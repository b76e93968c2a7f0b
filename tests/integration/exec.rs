//! `rlock exec`: child lifecycle, renewal, signals, lock loss, re-entry.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::util::*;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlock-exec-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: plain syscall.
    unsafe { libc::kill(pid as i32, sig) };
}

fn alive(pid: i32) -> bool {
    // A zombie still answers kill(0); look at its state instead.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

fn held(r: &Redis, key: &str) -> bool {
    let out = rlock(r).args(["status", key, "--json"]).run().ok();
    serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()["held"] == true
}

#[test]
fn exit_codes_pass_through() {
    let r = Redis::start();
    for code in [0, 1, 3, 42, 255] {
        rlock(&r)
            .args(["exec", "k", "--", "sh", "-c", &format!("exit {code}")])
            .run()
            .code(code);
    }
    // Killed by a signal: 128+N, never 0.
    rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", "kill -TERM $$"])
        .run()
        .code(143);
    rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", "kill -KILL $$"])
        .run()
        .code(137);
    // Without `--` too.
    rlock(&r).args(["exec", "k", "true"]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn command_not_found_or_not_executable() {
    let r = Redis::start();
    rlock(&r)
        .args(["exec", "k", "--", "no-such-command-xyz"])
        .run()
        .fails(127, "cannot run");
    let dir = tmp("noexec");
    let f = dir.join("script");
    std::fs::write(&f, "#!/bin/sh\necho hi\n").unwrap();
    rlock(&r)
        .args(["exec", "k", "--", f.to_str().unwrap()])
        .run()
        .fails(126, "permission denied");
    r.assert_nothing_held(&[]);
    rlock(&r).args(["exec", "k"]).run().fails(64, "required");
}

#[test]
fn child_sees_key_token_and_fence_but_token_is_on_no_argv() {
    let r = Redis::start();
    let dir = tmp("env");
    let out = dir.join("env");
    let script = format!(
        "echo \"$RLOCK_KEY $RLOCK_FENCE $RLOCK_TOKEN\" > {0}.tmp; mv {0}.tmp {0}; sleep 1",
        out.display()
    );
    let child = rlock(&r)
        .args(["exec", "envkey", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the child to write its env", || {
        !read(&out).is_empty()
    });
    let line = read(&out);
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts[0], "envkey");
    assert_eq!(parts[1], "1");
    let token = parts[2];
    uuid::Uuid::parse_str(token).unwrap();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(token),
            "token on the argv of {:?}",
            entry.path()
        );
    }
    finish(child, "exec").ok();
    assert!(!held(&r, "envkey"));
}

#[test]
fn releases_as_soon_as_the_child_exits() {
    let r = Redis::start();
    let started = Instant::now();
    rlock(&r)
        .args(["exec", "--ttl", "1m", "k", "--", "sleep", "0.2"])
        .run()
        .ok();
    // Released, not left to expire: the next one gets it at once.
    rlock(&r).args(["acquire", "-n", "k"]).run().ok();
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn renews_while_the_child_runs_past_the_ttl() {
    let r = Redis::start();
    let run = rlock(&r)
        .args(["exec", "--ttl", "900ms", "k", "--", "sleep", "2.5"])
        .run()
        .ok();
    assert!(run.elapsed >= Duration::from_millis(2500));
    assert_eq!(run.stderr, "");
}

#[test]
fn busy_exec_honours_no_wait_and_conflict_code() {
    let r = Redis::start();
    rlock(&r).args(["acquire", "k"]).run().ok();
    let dir = tmp("busy");
    let marker = dir.join("ran");
    let touch = format!("touch {}", marker.display());
    rlock(&r)
        .args(["exec", "-n", "k", "--", "sh", "-c", &touch])
        .run()
        .fails(75, "busy");
    rlock(&r)
        .args(["exec", "-n", "-E", "0", "k", "--", "sh", "-c", &touch])
        .run()
        .code(0);
    assert!(!marker.exists(), "the command ran without the lock");
}

fn trap_script(dir: &Path, sig: &str) -> String {
    // sh -c runs a second shell (the grandchild) that records the signal.
    let got = dir.join("got");
    let ready = dir.join("ready");
    format!(
        "sh -c 'trap \"echo {sig} > {got}; exit 0\" {sig}; touch {ready}; while :; do sleep 0.05; done'",
        got = got.display(),
        ready = ready.display()
    )
}

#[test]
fn every_forwarded_signal_reaches_a_grandchild() {
    let r = Redis::start();
    for (sig, num) in [
        ("INT", libc::SIGINT),
        ("TERM", libc::SIGTERM),
        ("HUP", libc::SIGHUP),
        ("QUIT", libc::SIGQUIT),
        ("USR1", libc::SIGUSR1),
        ("USR2", libc::SIGUSR2),
    ] {
        let dir = tmp(&format!("sig-{sig}"));
        let child = rlock(&r)
            .args([
                "exec",
                "--grace",
                "3s",
                &format!("k{sig}"),
                "--",
                "sh",
                "-c",
                &trap_script(&dir, sig),
            ])
            .spawn();
        eventually(Duration::from_secs(5), "the grandchild to trap", || {
            dir.join("ready").exists()
        });
        kill(child.id(), num);
        let run = finish(child, sig);
        assert_eq!(read(&dir.join("got")).trim(), sig, "{sig}: {}", run.stderr);
        assert!(!held(&r, &format!("k{sig}")), "{sig}: still held");
    }
}

#[test]
fn a_child_that_ignores_term_is_killed_after_grace() {
    let r = Redis::start();
    let dir = tmp("grace");
    let ready = dir.join("ready");
    let script = format!(
        "trap '' TERM; touch {}; while :; do sleep 0.05; done",
        ready.display()
    );
    let child = rlock(&r)
        .args(["exec", "--grace", "300ms", "k", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        ready.exists()
    });
    kill(child.id(), libc::SIGTERM);
    let run = finish(child, "exec").code(137);
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    assert!(!held(&r, "k"));

    // A second TERM escalates at once, whatever the grace.
    let _ = std::fs::remove_file(&ready);
    let child = rlock(&r)
        .args(["exec", "--grace", "1h", "k", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        ready.exists()
    });
    kill(child.id(), libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    kill(child.id(), libc::SIGTERM);
    finish(child, "exec").code(137);
    assert!(!held(&r, "k"));
}

/// Start `exec --ttl ttl` with a child that records when it gets SIGTERM.
fn lossy_child(r: &Redis, dir: &Path, extra: &[&str]) -> std::process::Child {
    let script = format!(
        "trap 'date +%s%N > {t}; exit 0' TERM; touch {ready}; while :; do sleep 0.01; done",
        t = dir.join("term").display(),
        ready = dir.join("ready").display()
    );
    let mut args = vec!["exec"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["lossy", "--", "sh", "-c", &script]);
    let child = rlock(r).args(&args).spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        dir.join("ready").exists()
    });
    child
}

#[test]
fn lock_deleted_by_an_admin_stops_the_child_with_79() {
    let r = Redis::start();
    let dir = tmp("deleted");
    let child = lossy_child(&r, &dir, &["--ttl", "900ms"]);
    let _: () = r.cmd(&["DEL", "rlock:{lossy}:h"]);
    let run = finish(child, "exec").code(79);
    assert!(run.stderr.contains("lost"), "{}", run.stderr);
    assert!(
        !read(&dir.join("term")).is_empty(),
        "child was not sent SIGTERM"
    );
}

#[test]
fn flushall_stops_the_child_with_79() {
    let r = Redis::start();
    let dir = tmp("flush");
    let child = lossy_child(&r, &dir, &["--ttl", "900ms"]);
    let _: () = r.cmd(&["FLUSHALL"]);
    finish(child, "exec").fails_with_lines(79, "lost");
    assert!(!read(&dir.join("term")).is_empty());
}

#[test]
fn another_owner_taking_over_stops_the_child() {
    let r = Redis::start();
    let dir = tmp("taken");
    let child = lossy_child(&r, &dir, &["--ttl", "900ms", "--on-lost", "kill"]);
    let _: () = r.cmd(&["FLUSHALL"]);
    rlock(&r).args(["acquire", "lossy"]).run().ok();
    finish(child, "exec").code(79);
    // --on-lost kill: SIGKILL, so the TERM trap never ran.
    assert!(read(&dir.join("term")).is_empty());
}

#[test]
fn on_lost_ignore_lets_the_child_finish_but_reports_79() {
    let r = Redis::start();
    let dir = tmp("ignore");
    let done = dir.join("done");
    let script = format!("sleep 1; touch {}", done.display());
    let child = rlock(&r)
        .args([
            "exec",
            "--ttl",
            "300ms",
            "--on-lost",
            "ignore",
            "k",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn();
    std::thread::sleep(Duration::from_millis(200));
    let _: () = r.cmd(&["FLUSHALL"]);
    let run = finish(child, "exec").code(79);
    assert!(done.exists(), "the command was stopped: {}", run.stderr);
    assert!(
        run.stderr.contains("runs on without the lock"),
        "{}",
        run.stderr
    );
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn redis_frozen_past_the_ttl_child_is_signalled_before_the_lease_ends() {
    let r = Redis::start();
    let dir = tmp("frozen");
    let child = lossy_child(&r, &dir, &["--ttl", "1500ms", "--connect-timeout", "500ms"]);
    std::thread::sleep(Duration::from_millis(700)); // let a renewal happen
    // The server-side expiry: no renewal can land after the freeze.
    let st = rlock(&r).args(["status", "lossy", "--json"]).run().ok();
    let ttl_ms =
        serde_json::from_str::<serde_json::Value>(&st.stdout).unwrap()["holders"][0]["ttl_ms"]
            .as_u64()
            .unwrap();
    let expires_ns = now_ns() + u128::from(ttl_ms) * 1_000_000;
    let frozen_ns = now_ns();
    kill(r.child_pid(), libc::SIGSTOP);
    let run = finish(child, "exec");
    kill(r.child_pid(), libc::SIGCONT);
    let run = run.code(79);
    let term_ns: u128 = read(&dir.join("term"))
        .trim()
        .parse()
        .expect("child got no SIGTERM");
    assert!(
        term_ns < expires_ns,
        "child signalled {} ms after the lease ended on the server",
        (term_ns - expires_ns) / 1_000_000
    );
    eprintln!(
        "frozen redis (ttl 1500 ms): renewals stopped -> child signalled {} ms; \
         signalled {} ms before the server TTL ran out: {}",
        (term_ns - frozen_ns) / 1_000_000,
        (expires_ns - term_ns) / 1_000_000,
        run.stderr.trim()
    );
}

#[test]
fn rlock_killed_takes_its_child_along() {
    let r = Redis::start();
    let dir = tmp("orphan");
    let pidfile = dir.join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut child = rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the child pid", || {
        read(&pidfile).trim().parse::<i32>().is_ok()
    });
    let pid: i32 = read(&pidfile).trim().parse().unwrap();
    assert!(alive(pid));
    child.kill().unwrap();
    child.wait().unwrap();
    eventually(Duration::from_secs(5), "the orphan to die", || !alive(pid));
}

#[test]
fn nested_exec_of_the_same_key_reenters() {
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    // Inner execs would wait forever for their parent without re-entry;
    // -w bounds the damage if that breaks.
    let inner = format!(
        "{bin} exec -w 3s a -- {bin} exec -w 3s b -- {bin} exec -w 3s a -- sh -c 'echo $RLOCK_FENCE'"
    );
    let run = rlock(&r)
        .args(["exec", "a", "--", "sh", "-c", &inner])
        .run()
        .ok();
    assert_eq!(run.stdout.trim(), "1", "the nested exec got a new grant");
    r.assert_nothing_held(&[]);
    // A nested acquire re-enters too and prints the same token.
    let script = format!(
        "t=$({bin} acquire -n a) && [ \"$t\" = \"$RLOCK_TOKEN\" ] && {bin} release a --token \"$t\""
    );
    rlock(&r)
        .args(["exec", "a", "--", "sh", "-c", &script])
        .run()
        .ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn many_concurrent_execs_never_overlap() {
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let body = "n=$(redis-cli -p $PORT INCR inside); [ \"$n\" = 1 ] || exit 99; sleep 0.01; redis-cli -p $PORT DECR inside >/dev/null";
    let script =
        format!("for i in 1 2 3 4 5; do {bin} exec -w 60s c -- sh -c '{body}' || exit $?; done");
    contenders(8, &script, &r.url(), &r);
    r.assert_nothing_held(&["inside"]);
}

#[test]
fn a_short_nested_ttl_never_shortens_the_outer_lease() {
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let script =
        format!("{bin} exec --ttl 1s k1 -- true; {bin} renew k1 --ttl 2s; {bin} status k1 --json");
    let run = rlock(&r)
        .args(["exec", "--ttl", "1m", "k1", "--", "sh", "-c", &script])
        .run()
        .ok();
    let st: serde_json::Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    let ttl = st["holders"][0]["ttl_ms"].as_u64().unwrap();
    assert!(ttl > 50_000, "nested holders cut the lease to {ttl} ms");
}

#[test]
fn release_works_after_the_server_closed_the_idle_connection() {
    let r = Redis::start_with(&["--timeout", "1"]);
    rlock(&r)
        .args(["exec", "k", "--", "sleep", "2.5"])
        .run()
        .ok();
    assert!(!held(&r, "k"));
}

#[test]
fn after_a_loss_nothing_the_command_started_runs_on() {
    let r = Redis::start();
    let dir = tmp("sweep");
    let pidfile = dir.join("bg");
    let script = format!(
        "(trap '' TERM; exec sleep 30) & echo $! > {}; while :; do sleep 0.05; done",
        pidfile.display()
    );
    let child = rlock(&r)
        .args(["exec", "--ttl", "900ms", "k", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the background job", || {
        read(&pidfile).trim().parse::<i32>().is_ok()
    });
    let bg: i32 = read(&pidfile).trim().parse().unwrap();
    let _: () = r.cmd(&["DEL", "rlock:{k}:h"]);
    finish(child, "exec").code(79);
    eventually(Duration::from_secs(5), "the background job to die", || {
        !alive(bg)
    });
}

#[test]
fn rlock_killed_takes_grandchildren_along() {
    let r = Redis::start();
    let dir = tmp("orphan-gc");
    let pidfile = dir.join("pid");
    let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let mut child = rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the grandchild pid", || {
        read(&pidfile).trim().parse::<i32>().is_ok()
    });
    let pid: i32 = read(&pidfile).trim().parse().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    eventually(Duration::from_secs(5), "the grandchild to die", || {
        !alive(pid)
    });
}

#[test]
fn an_inherited_ignored_sigchld_does_not_hide_the_exit_code() {
    use std::os::unix::process::CommandExt;
    let r = Redis::start();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rlock"));
    cmd.args(["--url", &r.url(), "exec", "k", "--", "sh", "-c", "exit 3"]);
    // SAFETY: signal() is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
            Ok(())
        });
    }
    assert_eq!(cmd.status().unwrap().code(), Some(3));
}

#[test]
fn a_lock_gone_when_the_command_ends_is_reported_lost() {
    let r = Redis::start();
    let script = format!("redis-cli -p {} DEL 'rlock:{{k}}:h' >/dev/null", r.port);
    rlock(&r)
        .args(["exec", "--ttl", "1m", "k", "--", "sh", "-c", &script])
        .run()
        .fails(79, "gone when the command ended");
}

#[test]
fn nested_exec_of_a_semaphore_reenters() {
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let inner = format!("{bin} exec -n g -- true");
    rlock(&r)
        .args(["exec", "--limit", "3", "g", "--", "sh", "-c", &inner])
        .run()
        .ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn interactive_commands_share_rlocks_process_group() {
    // Under a pseudo-terminal (script(1)), the command stays in the
    // terminal's foreground group so it can read the terminal.
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let dir = tmp("tty");
    let out = dir.join("pgids");
    let inner = format!(
        "{bin} exec k -- sh -c 'cut -d\" \" -f5 /proc/$$/stat > {o}; cut -d\" \" -f5 /proc/$PPID/stat >> {o}'",
        o = out.display()
    );
    let status = std::process::Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("RLOCK_URL", r.url())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let pgids: Vec<String> = read(&out).lines().map(|l| l.trim().to_string()).collect();
    assert_eq!(pgids.len(), 2, "{pgids:?}");
    assert_eq!(
        pgids[0], pgids[1],
        "the command got its own group under a terminal"
    );
    // Without a terminal it gets its own group.
    let inner = format!(
        "ps -o pgid= -p $$ > {o}; ps -o pgid= -p $PPID >> {o}",
        o = out.display()
    );
    rlock(&r)
        .args(["exec", "k", "--", "sh", "-c", &inner])
        .run()
        .ok();
    let pgids: Vec<String> = read(&out).lines().map(|l| l.trim().to_string()).collect();
    assert_ne!(pgids[0], pgids[1]);
}

/// Request bytes the server on loopback `port` has not read yet (IPv4
/// connections only, as the fixture binds 127.0.0.1).
fn unread_on(port: u16) -> u64 {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    tcp.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
            if local != port || *f.get(3)? != "01" {
                return None; // not an established connection to the server
            }
            u64::from_str_radix(f.get(4)?.split(':').nth(1)?, 16).ok()
        })
        .sum()
}

#[test]
fn a_grant_that_arrives_after_its_lease_expired_never_runs_the_command() {
    // Connecting needs no round trip (the kernel accepts for a stopped
    // server, and rlock sends no handshake), so the acquire itself sits in
    // the stopped server's socket; its grant comes back after the 200 ms
    // lease is over. exec must give it back and run on a fresh grant.
    let r = Redis::start();
    kill(r.child_pid(), libc::SIGSTOP);
    let child = bare_rlock()
        .args(["--url", &r.url(), "exec", "--ttl", "200ms", "k"])
        .args(["--", "sh", "-c", "echo $RLOCK_FENCE"])
        .spawn();
    eventually(
        Duration::from_secs(5),
        "the acquire to reach the stopped server",
        || unread_on(r.port) > 0,
    );
    std::thread::sleep(Duration::from_millis(700));
    kill(r.child_pid(), libc::SIGCONT);
    let run = finish(child, "exec").ok();
    assert_eq!(run.stdout.trim(), "2", "stderr: {}", run.stderr);
}
