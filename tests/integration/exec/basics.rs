//! The command's run: exit codes, environment, release, renewal, the
//! connection, status, `--min-hold`.

use super::*;

#[test]
fn exit_codes_pass_through() {
    let r = Redis::shared();
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
    let r = Redis::shared();
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
    rlock(&r).args(["exec", "k"]).run().fails(64, "no command");
}

#[test]
fn child_sees_key_token_and_fence_but_token_is_on_no_argv() {
    let r = Redis::shared();
    let dir = tmp("env");
    let out = dir.join("env");
    let script = format!(
        "echo \"$RLOCK_KEY $RLOCK_FENCE $RLOCK_TOKEN\" > {0}.tmp; mv {0}.tmp {0}; sleep 1",
        out.display()
    );
    let f = r.fence_ahead("envkey");
    let child = rlock(&r)
        .args(["exec", "envkey", "--", "sh", "-c", &script])
        .spawn();
    eventually(Duration::from_secs(5), "the child to write its env", || {
        !read(&out).is_empty()
    });
    let line = read(&out);
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts[0], "envkey");
    assert_eq!(parts[1], (f + 1).to_string());
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
    assert!(!r.held("envkey"));
}

#[test]
fn releases_as_soon_as_the_child_exits() {
    let r = Redis::shared();
    let started = Instant::now();
    rlock(&r)
        .args(["exec", "--ttl", "1m", "k", "--", "sleep", "0.2"])
        .run()
        .ok();
    // Released, not left to expire: the next one gets it at once.
    rlock(&r).args(["acquire", "-n", "k"]).run().ok();
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// rlock's thread count, as the command sees it while it runs (rlock is
/// the parent of its parent, the guard), written to `file`.
fn threads_of_rlock(file: &Path) -> String {
    format!(
        "rp=$(awk '/^PPid/{{print $2}}' /proc/$PPID/status); \
         awk '/^Threads/{{print $2}}' /proc/$rp/status > {}",
        file.display()
    )
}

#[test]
fn the_short_path_runs_no_thread_and_the_renewer_starts_when_due() {
    let r = Redis::start();
    let [quick, late] = paths("threads", ["quick", "late"]);
    exec_sh(&r, &[], "k", &threads_of_rlock(&quick)).run().ok();
    // No signal watcher, no guard reader, no renewer before TTL/3.
    assert_eq!(read(&quick).trim(), "1");
    // Past TTL/3 the renewer runs (and renews: the lock is still ours).
    let script = format!("sleep 0.5; {}", threads_of_rlock(&late));
    exec_sh(&r, &["--ttl", "600ms"], "k", &script).run().ok();
    assert_eq!(read(&late).trim(), "2");
}

#[test]
fn renews_while_the_child_runs_past_the_ttl() {
    let r = Redis::shared();
    let run = rlock(&r)
        .args(["exec", "--ttl", "900ms", "k", "--", "sleep", "2.5"])
        .run()
        .ok();
    assert!(run.elapsed >= Duration::from_millis(2500));
    assert_eq!(run.stderr, "");
}

#[test]
fn busy_exec_honours_no_wait_and_conflict_code() {
    let r = Redis::shared();
    rlock(&r).args(["acquire", "k"]).run().ok();
    let [marker] = paths("busy", ["ran"]);
    let touch = format!("touch {}", marker.display());
    exec_sh(&r, &["-n"], "k", &touch).run().fails(75, "busy");
    let run_quiet = exec_sh(&r, &["-n", "-E", "0"], "k", &touch)
        .run()
        .code(0)
        .stderr;
    // -E 0 makes busy a quiet success, as flock -n: no cron mail.
    assert!(run_quiet.is_empty(), "{run_quiet}");
    assert!(!marker.exists(), "the command ran without the lock");
}

#[test]
fn release_works_after_the_server_closed_the_idle_connection() {
    let r = Redis::start_with(&["--timeout", "1"]);
    rlock(&r)
        .args(["exec", "k", "--", "sleep", "2.5"])
        .run()
        .ok();
    assert!(!r.held("k"));
}

#[test]
fn renewals_reuse_one_connection() {
    // No reconnect (no TLS handshake on rediss://) per renewal: the
    // acquiring connection and the renewer's, and nothing more.
    let r = Redis::start();
    let connections = || -> u64 {
        let info: String = r.cmd(&["INFO", "stats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = connections();
    rlock(&r)
        .args(["exec", "--ttl", "900ms", "k", "--", "sleep", "2.5"])
        .run()
        .ok();
    // Our own INFO connection counts once.
    assert_eq!(connections() - before, 3, "connections opened by one exec");
}

/// Where USER and LOGNAME are unset (cron, systemd units, containers),
/// the holder's user is its uid's name, as `id -un` gives it (rlock reads
/// /etc/passwd itself, NSS only for a uid it does not list).
#[test]
fn status_names_the_uids_user_without_user_or_logname() {
    let r = Redis::shared();
    let id = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let want = String::from_utf8_lossy(&id.stdout).trim().to_string();
    assert!(!want.is_empty(), "id -un: {id:?}");
    // Empty counts as unset.
    let child = rlock(&r)
        .args(["exec", "user-k", "--", "sleep", "30"])
        .env("USER", "")
        .env("LOGNAME", "")
        .spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("user-k"));
    let st = r.status_json("user-k");
    assert_eq!(st["holders"][0]["user"], want.as_str(), "{st}");
    // Passed on to `sleep`: 128+15, the lock released.
    kill(child.id(), libc::SIGTERM);
    finish(child, "exec").code(143);
    r.assert_nothing_held(&[]);
}

#[test]
fn status_shows_the_command_line_redacted() {
    let r = Redis::shared();
    let child = rlock(&r)
        .args([
            "exec",
            "k",
            "--",
            "env",
            "RLOCK_PASSWORD=hunter2",
            "sh",
            "-c",
            "sleep 2",
            "redis://user:s3cret@example:6379",
        ])
        .spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("k"));
    let st = rlock(&r).args(["status", "k"]).run().ok();
    let json = rlock(&r).args(["status", "k", "--json"]).run().ok();
    for out in [&st.stdout, &json.stdout] {
        assert!(out.contains("RLOCK_PASSWORD="), "{out}");
        assert!(!out.contains("hunter2") && !out.contains("s3cret"), "{out}");
    }
    let _ = finish(child, "exec");
}

/// `status` gives the command's own pid beside rlock's (`pid`, alive and
/// renewing whatever the command does): noted by the first renewal (here
/// at TTL/3 = 1s), in text and JSON, and it is the command's process.
#[test]
fn status_shows_the_commands_own_pid() {
    let r = Redis::shared();
    let dir = tmp_dir("exec", "cmd-pid");
    let go = dir.join("go");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display());
    let child = rlock(&r)
        .args(["exec", "cmd-pid", "--ttl", "3s", "--", "sh", "-c", &script])
        .spawn();
    let mut st = serde_json::Value::Null;
    eventually(Duration::from_secs(20), "cmd_pid in status", || {
        st = r.status_json("cmd-pid");
        st["holders"][0]["cmd_pid"].is_u64()
    });
    let holder = &st["holders"][0];
    let pid = holder["cmd_pid"].as_u64().unwrap();
    assert_eq!(holder["pid"].as_u64(), Some(u64::from(child.id())), "{st}");
    assert_ne!(pid, u64::from(child.id()), "{st}");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv: Vec<_> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert_eq!(argv, ["sh", "-c", script.as_str()], "{st}");
    let text = rlock(&r).args(["status", "cmd-pid"]).run().ok().stdout;
    assert!(text.contains(&format!(" command pid {pid}")), "{text}");
    std::fs::write(&go, "").unwrap();
    finish(child, "exec").ok();
    // Gone with its holder.
    let st = r.status_json("cmd-pid");
    assert_eq!(st["held"], false, "{st}");
    let fields: Vec<String> = r.cmd(&["HKEYS", &r.key("cmd-pid")]);
    assert!(fields.iter().all(|f| !f.starts_with("p:")), "{fields:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn min_hold_keeps_the_lock_taken_after_a_quick_success_only() {
    // The cron recipe: a 0.1 s job with --min-hold 3s keeps the lock taken
    // for 3 s after the grant, so a host that fires late skips.
    let r = Redis::shared();
    let started = Instant::now();
    rlock(&r)
        .args(["exec", "--min-hold", "3s", "k", "--", "sleep", "0.1"])
        .run()
        .ok();
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(started.elapsed()));
    rlock(&r).args(["exec", "-n", "k", "true"]).run().code(75);
    assert!(r.held("k"), "taken, by nobody running");
    std::thread::sleep(Duration::from_millis(3000).saturating_sub(started.elapsed()));
    eventually(Duration::from_secs(3), "the min-hold to end", || {
        rlock(&r).args(["exec", "-n", "k", "true"]).run().code == 0
    });
    // A min-hold shorter than the job changes nothing.
    rlock(&r)
        .args(["exec", "--min-hold", "100ms", "k2", "--", "sleep", "0.3"])
        .run()
        .ok();
    rlock(&r).args(["exec", "-n", "k2", "true"]).run().ok();
    // A failed job releases at once: the next host may retry.
    rlock(&r)
        .args(["exec", "--min-hold", "1h", "k3", "--", "false"])
        .run()
        .code(1);
    rlock(&r).args(["exec", "-n", "k3", "true"]).run().ok();
    // acquire --min-hold, and release --min-hold on a plain grant.
    let tok = rlock(&r)
        .args(["acquire", "--min-hold", "1h", "k4"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["release", "k4", "--token", &tok])
        .run()
        .ok();
    rlock(&r).args(["acquire", "-n", "k4"]).run().code(75);
    let tok = rlock(&r).args(["acquire", "k5"]).run().ok().token();
    rlock(&r)
        .args(["release", "k5", "--token", &tok, "--min-hold", "1h"])
        .run()
        .ok();
    rlock(&r).args(["acquire", "-n", "k5"]).run().code(75);
    // Releasing a parked lock again is harmless.
    rlock(&r)
        .args(["release", "k5", "--token", &tok])
        .run()
        .ok();
    rlock(&r).args(["acquire", "-n", "k5"]).run().code(75);
    // A parked token holds nothing for its holder: check says so (79, not
    // "another owner"), and a late re-entry with it does not take the
    // lock back (it acquires afresh, and the lock is taken).
    rlock(&r)
        .args(["check", "k5", "--token", &tok])
        .run()
        .code(79);
    rlock(&r)
        .args(["acquire", "-n", "k5"])
        .env("RLOCK_TOKEN", &tok)
        .run()
        .code(75);
    rlock(&r)
        .args(["exec", "--ttl", "30", "--min-hold", "5", "k6", "true"])
        .run()
        .fails(64, "no unit");
}

#[test]
fn three_hosts_run_the_cron_recipe_once_per_firing() {
    // Three "hosts" whose cron fires 0-200 ms apart (clock skew, slow
    // starts), 20 firings 1.5 s apart, each running
    // `rlock exec -n -E 0 --min-hold 800ms cron -- job`: exactly one run per
    // firing. (The 0-2 s skew, scaled down to keep the suite fast:
    // what matters is min-hold > skew and the period > skew + min-hold,
    // each with room for a loaded machine's slow process starts.)
    let r = Redis::start();
    let [ledger] = paths("cron", ["ledger"]);
    let bin = env!("CARGO_BIN_EXE_rlock");
    let started = Instant::now();
    let mut hosts = Vec::new();
    for firing in 0..20u64 {
        let at = Duration::from_millis(1500 * firing);
        std::thread::sleep(at.saturating_sub(started.elapsed()));
        for (host, skew) in [(0, 0), (1, 100), (2, 200)] {
            let script = format!(
                "sleep {}; {bin} exec -n -E 0 --min-hold 800ms cron -- sh -c 'echo {firing} {host} >> {l}; sleep 0.05'",
                f64::from(skew) / 1000.0,
                l = ledger.display()
            );
            hosts.push(
                std::process::Command::new("sh")
                    .args(["-c", &script])
                    .env("RLOCK_URL", r.url())
                    .spawn()
                    .unwrap(),
            );
        }
    }
    for mut h in hosts {
        assert!(h.wait().unwrap().success());
    }
    let text = read(&ledger);
    for firing in 0..20 {
        let runs = text
            .lines()
            .filter(|l| l.split(' ').next() == Some(&firing.to_string()))
            .count();
        assert_eq!(runs, 1, "firing {firing} ran {runs} times:\n{text}");
    }
}

#[test]
fn an_acquire_that_cannot_print_its_token_frees_the_lock_despite_min_hold() {
    // Nobody can learn the token, so the grant is given back at once, as a
    // failed exec's is: honouring --min-hold there parked the lock for the
    // whole minimum ("lock released", yet busy for an hour).
    let r = Redis::shared();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = rlock(&r)
        .args(["acquire", "--min-hold", "1h", "k"])
        .stdout(full)
        .stderr(std::process::Stdio::piped())
        .spawn_plain()
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{err}");
    assert!(err.contains("lock released"), "{err}");
    let tok = rlock(&r).args(["acquire", "-n", "k"]).run().ok().token();
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}
