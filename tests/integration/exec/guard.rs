//! The guard killed or stopped, and the limit of its start message.

use super::*;

/// The set-up of the tests that stop the guard before it starts the
/// command: `exec OPTS k -- sh -c SCRIPT` waits behind another holder of
/// k, its guard (rlock's one child while it waits) is SIGSTOPped, and
/// the other holder releases. Returns once the exec holds k: the exec,
/// and the stopped guard's pid.
#[track_caller]
fn guard_stopped_before_the_start(
    r: &Redis,
    opts: &[&str],
    script: &str,
) -> (std::process::Child, i32) {
    let other = rlock(r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let child = exec_sh(r, opts, "k", script).spawn();
    let rlock_pid = child.id();
    r.await_waiters("k", 1);
    let guard: i32 = read(Path::new(&format!(
        "/proc/{rlock_pid}/task/{rlock_pid}/children"
    )))
    .trim()
    .parse()
    .expect("one child: the guard");
    kill(guard, libc::SIGSTOP);
    rlock(r)
        .args(["release", "k", "--token", &other])
        .run()
        .ok();
    eventually(Duration::from_secs(10), "exec to hold the lock", || {
        r.status_json("k")["holders"][0]["pid"].as_u64() == Some(u64::from(rlock_pid))
    });
    (child, guard)
}

#[test]
fn a_killed_guard_kills_the_whole_tree_before_the_lock_goes() {
    // PR_SET_PDEATHSIG kills only the command; its children, in its group
    // or not, come to rlock (a subreaper while it runs), which kills them
    // before it releases. Without that, `sleep 30` ran on with no lock.
    let r = Redis::shared();
    let [pidfile, gcfile, dfile] = paths("guard-killed", ["pid", "gc", "daemon"]);
    let script = format!(
        "echo $$ > {p}; sleep 30 & echo $! > {g}; setsid sleep 30 & echo $! > {d}; wait",
        p = pidfile.display(),
        g = gcfile.display(),
        d = dfile.display()
    );
    let child = exec_sh(&r, &[], "k", &script).spawn();
    let cmd = wait_pid(&pidfile);
    let grandchildren = [wait_pid(&gcfile), wait_pid(&dfile)];
    kill(ppid(cmd), libc::SIGKILL);
    let run = finish(child, "exec");
    run.fails(79, "guard process was killed; rlock killed every process");
    // Dead before rlock exited, and reaped (a zombie's /proc stat is gone
    // once reaped; `alive` says false for both).
    assert!(!alive(cmd));
    for gc in grandchildren {
        assert!(!alive(gc), "{gc} outlived the killed guard");
    }
    assert!(!r.held("k"));
}

/// When lock `key`'s lease runs out if nobody renews it, from the
/// server's PTTL now.
fn lease_end(r: &Redis, key: &str) -> Instant {
    let ms: i64 = r.cmd(&["PTTL", &format!("{}:h", r.key(key))]);
    Instant::now() + Duration::from_millis(u64::try_from(ms).expect("lock held"))
}

/// Sleep until 200 ms past `end`.
fn sleep_past(end: Instant) {
    std::thread::sleep(
        (end + Duration::from_millis(200)).saturating_duration_since(Instant::now()),
    );
}

#[test]
fn a_guard_killed_before_it_reports_the_start_is_a_killed_guard() {
    // rlock has asked the guard to spawn and waits for "started" when the
    // guard dies: the command may have started, so this is a killed guard
    // (79, the tree killed first), not a failed start that releases at once.
    let r = Redis::shared();
    let [ran] = paths("guard-killed-early", ["ran"]);
    let (child, guard) =
        guard_stopped_before_the_start(&r, &["-q"], &format!("echo x > {}", ran.display()));
    // The spawn request sent: it waits unread in the stopped guard's socket.
    eventually(Duration::from_secs(10), "the spawn request", || {
        unread_bytes(guard) > 0
    });
    kill(guard, libc::SIGKILL);
    finish(child, "exec").fails(79, "guard process was killed");
    assert!(!r.held("k"));
    assert!(read(&ran).is_empty());
}

#[test]
fn a_stopped_guard_that_reads_nothing_never_blocks_the_renewals() {
    // Someone stops the guard (SIGSTOP cannot be ignored): its socket fills
    // up with rlock's messages (a forwarded signal each, a deadline per
    // renewal). A blocking send then froze rlock and its renewer in send,
    // and the lease expired under a running command while a rival took the
    // lock. Renewals must go on, and rlock must stay able to kill. Under
    // load the stop can also land between the command's exec and the
    // guard's "started" report, which rlock then waited for in a blocking
    // read: no renewal, no kill, until the guard was continued.
    let r = Redis::shared();
    let [pidfile] = paths("guard-stopped-full", ["pid"]);
    let script = format!(
        "trap '' USR1; echo $$ > {}; while :; do sleep 0.05; done",
        pidfile.display()
    );
    // A 6 s TTL: renewals every 2 s, with 2 s of slack each, so that
    // parallel load alone (six copies of this test beside two busy loops)
    // does not make a renewal late.
    let child = exec_sh(&r, &["-q", "--ttl", "6s"], "k", &script).spawn();
    let rlock_pid = child.id();
    let cmd = wait_pid(&pidfile);
    let guard = ppid(cmd);
    kill(guard, libc::SIGSTOP);
    // Far more forwarded signals than the socket holds (a few hundred),
    // each taken by rlock before the next is sent (none merged).
    for _ in 0..800 {
        signal_taken(rlock_pid, libc::SIGUSR1);
    }
    // Past the end the lease had then, it must still be renewed by that
    // exec (a blocked rlock renews nothing, and it would have expired).
    sleep_past(lease_end(&r, "k"));
    let holder = r.status_json("k")["holders"][0]["pid"].as_u64();
    // A second interrupt kills the tree: rlock does it itself, the guard
    // being stopped. (The first taken before the second is sent.)
    signal_taken(rlock_pid, libc::SIGTERM);
    kill(rlock_pid, libc::SIGTERM);
    let killed = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(25));
        !alive(cmd)
    });
    kill(guard, libc::SIGCONT);
    let run = finish(child, "exec");
    assert_eq!(
        holder,
        Some(u64::from(rlock_pid)),
        "the lease expired while the command ran; killed {killed}; rlock: {} {}",
        run.code,
        run.stderr
    );
    assert!(killed, "rlock did not kill the command");
    // The command died of SIGKILL (137), or the guard's timer, which had
    // long passed, fired first when it was continued (79).
    assert!(
        [79, 137].contains(&run.code),
        "{}: {}",
        run.code,
        run.stderr
    );
    assert!(!r.held("k"));
}

#[test]
fn a_guard_stopped_before_the_start_stops_neither_the_renewals_nor_starts_the_command_late() {
    // The guard is stopped before it reads rlock's request to start the
    // command (here for certain; under load, the stop of the test above
    // lands between the command's exec and the guard's report at times).
    // rlock waited for "started" in a blocking read: it renewed nothing,
    // and the lease ran out. It must renew on; and the guard, continued
    // past the kill deadline it was given, must not start the command,
    // whose lease may be over by then.
    let r = Redis::shared();
    let [ran] = paths("guard-stopped-before-start", ["ran"]);
    let (child, guard) = guard_stopped_before_the_start(
        &r,
        &["-q", "--ttl", "6s"],
        &format!("echo x > {}", ran.display()),
    );
    let rlock_pid = child.id();
    // Past the end the lease had then: only renewals keep it held.
    sleep_past(lease_end(&r, "k"));
    let holder = r.status_json("k")["holders"][0]["pid"].as_u64();
    kill(guard, libc::SIGCONT);
    let run = finish(child, "exec");
    assert_eq!(
        holder,
        Some(u64::from(rlock_pid)),
        "the lease expired before the command started; rlock: {} {}",
        run.code,
        run.stderr
    );
    run.fails(79, "the command was not started");
    assert!(read(&ran).is_empty());
    assert!(!r.held("k"));
}

#[test]
fn an_oversized_rlock_held_is_refused_and_nothing_is_held() {
    // The guard reads one message of at most 64 KiB: a longer one is
    // refused before it is sent, so rlock never waits for a start that
    // cannot come.
    let r = Redis::shared();
    let junk: Vec<String> = (0..2000)
        .map(|i| format!("rlock:{{lock{i}}}\t00000000-0000-4000-8000-000000000000"))
        .collect();
    let junk = junk.join("\n");
    rlock(&r)
        .env("RLOCK_HELD", &junk)
        .args(["exec", "k", "--", "true"])
        .run()
        .fails(64, "RLOCK_HELD");
    r.assert_nothing_held(&[]);
}

/// `pkill -9 PKILL rlock` during `rlock exec --ttl 3s k -- sh -c 'sleep
/// 100 & wait'`, in a pid namespace: the guard (a fork of rlock) is titled
/// `rl-guard`, so the pattern spares it and it is left to kill `sleep 100`
/// and release.
fn pkill_spares_the_guard(pkill: &[&str]) {
    let r = Redis::shared();
    let d = tmp(&format!("pkill{}", pkill.concat()));
    pkill_in_pid_namespace(
        &r,
        &d,
        r#""$B" exec --ttl 3s k -- sh -c 'sleep 100 & echo $! >"$D/sleep"; wait' 2>"$D/err""#,
        "rl-guard",
        pkill,
    );
    let title = read(&d.join("guard"));
    assert_eq!(title.trim_end(), "rl-guard", "the guard's command line");
    assert_eq!(read(&d.join("code")).trim(), "137", "rlock SIGKILLed");
    // The guard released once the tree was gone (else the lease runs
    // out: the TTL is too short here to tell; see dead_rlock.rs).
    eventually(Duration::from_secs(15), "the lock to be free", || {
        !r.held("k")
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn pkill_of_rlocks_name_leaves_the_guard_to_kill_the_tree() {
    pkill_spares_the_guard(&[]);
}

#[test]
fn pkill_of_rlocks_command_line_leaves_the_guard_to_kill_the_tree() {
    pkill_spares_the_guard(&["-f"]);
}
