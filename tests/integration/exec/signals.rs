//! Signals: forwarded to the tree, ignored ones kept ignored, the grace
//! before SIGKILL, and what each SIGKILL says.

use super::*;

#[test]
fn a_signal_during_the_first_attempt_ends_it_with_nothing_held() {
    let r = Redis::start();
    let [ran] = paths("first-attempt", ["ran"]);
    // The first attempt runs without a thread: with Redis stopped, its
    // reply waits, and a SIGTERM meanwhile stays pending in the signalfd.
    kill(r.child_pid(), libc::SIGSTOP);
    let child = rlock(&r)
        .args(["exec", "k", "--", "touch", ran.to_str().unwrap()])
        .spawn();
    let pid = child.id();
    // Blocked means the signals go to the signalfd, not the default action.
    eventually(Duration::from_secs(5), "SIGTERM blocked in rlock", || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                let l = s.lines().find(|l| l.starts_with("SigBlk:"))?.to_string();
                u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok()
            })
            .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
    });
    std::thread::sleep(Duration::from_millis(100));
    kill(pid, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    kill(r.child_pid(), libc::SIGCONT);
    finish(child, "exec").code(128 + libc::SIGTERM);
    assert!(
        !ran.exists(),
        "the command ran after the wait was interrupted"
    );
    r.assert_nothing_held(&[]);
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
    let r = Redis::shared();
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
        assert!(!r.held(&format!("k{sig}")), "{sig}: still held");
    }
}

/// `rlock ARGS` started as `nohup` or a script's `cmd &` starts it: with
/// the signals `ignored` (shell names) set to SIG_IGN.
fn spawn_ignoring(r: &Redis, ignored: &str, args: &[&str]) -> std::process::Child {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("trap '' {ignored}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_rlock"))
        .args(args)
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn signals_ignored_at_start_stay_ignored_for_the_command() {
    // `nohup rlock exec ...`, then the terminal hangs up: the command must
    // run on (under flock it would), not be killed after --grace.
    let r = Redis::shared();
    let [ready, out] = paths("ignored-sigs", ["ready", "out"]);
    let script = format!(
        "touch {}; sleep 1; echo done > {}",
        ready.display(),
        out.display()
    );
    let child = spawn_ignoring(
        &r,
        "HUP INT",
        &["exec", "--grace", "200ms", "k", "--", "sh", "-c", &script],
    );
    eventually(Duration::from_secs(5), "the command to start", || {
        ready.exists()
    });
    kill(child.id(), libc::SIGHUP);
    kill(child.id(), libc::SIGINT);
    finish(child, "exec under nohup").ok();
    assert_eq!(read(&out).trim(), "done");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_signal_ignored_at_start_does_not_end_a_wait() {
    // A script's `rlock exec k -- job &` ignores INT (the shell's doing):
    // a Ctrl-C at the script's terminal must not end that wait.
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let mut child = spawn_ignoring(&r, "INT", &["exec", "k", "--", "true"]);
    r.await_waiters("k", 1);
    kill(child.id(), libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "SIGINT ended the wait");
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    finish(child, "exec ignoring INT").ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn a_child_that_ignores_term_is_killed_after_grace() {
    let r = Redis::shared();
    let [ready] = paths("grace", ["ready"]);
    let script = format!(
        "trap '' TERM; touch {}; while :; do sleep 0.05; done",
        ready.display()
    );
    let child = exec_sh(&r, &["--grace", "300ms"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        ready.exists()
    });
    kill(child.id(), libc::SIGTERM);
    let run = finish(child, "exec").code(137);
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    assert!(!r.held("k"));

    // A second TERM escalates at once, whatever the grace.
    let _ = std::fs::remove_file(&ready);
    let child = exec_sh(&r, &["--grace", "1h"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        ready.exists()
    });
    kill(child.id(), libc::SIGTERM);
    // Nothing to wait for: the child ignores the first TERM; give rlock a
    // moment to take it before the second.
    std::thread::sleep(Duration::from_millis(100));
    kill(child.id(), libc::SIGTERM);
    finish(child, "exec").code(137);
    assert!(!r.held("k"));
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
fn the_command_gets_sigpipe_at_its_default() {
    // The Rust runtime ignores SIGPIPE in rlock; `yes | head -1` under
    // rlock must end as it does without.
    let r = Redis::shared();
    let run = rlock(&r)
        .args([
            "exec",
            "k",
            "--",
            "sh",
            "-c",
            "grep SigIgn /proc/self/status",
        ])
        .run()
        .ok();
    let mask = u64::from_str_radix(run.stdout.split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_eq!(mask & (1 << (libc::SIGPIPE - 1)), 0, "{}", run.stdout);
}

/// Every SIGKILL rlock sends says why, and about what: the command, or
/// what it left running. It always said "the command did not exit in
/// time", also after a second TERM (sent at once, no time involved) and
/// for a leftover of a command that had exited long before.
#[test]
fn each_sigkill_says_why() {
    let r = Redis::shared();
    let [ready, cmd] = paths("sigkill-why", ["ready", "cmd"]);
    let stubborn = format!(
        "trap '' TERM; touch {}; while :; do sleep 0.05; done",
        ready.display()
    );
    let started = |child: &std::process::Child| {
        eventually(Duration::from_secs(10), "the command to start", || {
            ready.exists()
        });
        child.id()
    };
    let one_line = |run: &Run, needle: &str| {
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(
            run.stderr.contains(needle),
            "{:?} lacks {needle:?}",
            run.stderr
        );
        assert!(!run.stderr.contains("in time"), "{}", run.stderr);
    };
    // The command outlived --grace after a TERM passed on.
    let child = exec_sh(&r, &["--grace", "300ms"], "k", &stubborn).spawn();
    kill(started(&child), libc::SIGTERM);
    let run = finish(child, "exec").code(137);
    one_line(&run, "the command did not exit within 300ms of SIGTERM");

    // A second TERM: SIGKILL at once.
    let _ = std::fs::remove_file(&ready);
    let child = exec_sh(&r, &["--grace", "1h"], "k", &stubborn).spawn();
    let pid = started(&child);
    kill(pid, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    kill(pid, libc::SIGTERM);
    let run = finish(child, "exec").code(137);
    one_line(&run, "a second SIGTERM");

    // --kill-leftovers: the command exits as soon as its leftover ignores
    // the SIGTERM (not before: a TERM that came first would end it).
    let _ = std::fs::remove_file(&ready);
    let leftover = format!(
        "(trap '' TERM; touch {r}; exec sleep 60) & \
         while [ ! -e {r} ]; do sleep 0.01; done; exit 3",
        r = ready.display()
    );
    let run = exec_sh(
        &r,
        &["--kill-leftovers", "--grace", "300ms"],
        "k",
        &leftover,
    )
    .run()
    .code(3);
    one_line(
        &run,
        "what the command left running did not exit within 300ms",
    );

    // A TERM passed on after the command exited reaches what it left.
    let _ = std::fs::remove_file(&ready);
    let script = format!("echo $$ > {}; {leftover}", cmd.display());
    let child = exec_sh(&r, &["--grace", "300ms"], "k", &script).spawn();
    let pid = started(&child);
    let sh = wait_pid(&cmd);
    eventually(Duration::from_secs(10), "the command to be reaped", || {
        !Path::new(&format!("/proc/{sh}")).exists()
    });
    std::thread::sleep(Duration::from_millis(100));
    kill(pid, libc::SIGTERM);
    let run = finish(child, "exec").code(3);
    one_line(
        &run,
        "what the command left running did not exit within 300ms",
    );
    assert!(!r.held("k"));
}
