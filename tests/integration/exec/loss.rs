//! A lost lock (deleted, flushed, taken over, Redis frozen): the tree
//! stopped before the lease ends, `--on-lost ignore`, late releases.

use super::*;

/// Start `exec --ttl ttl` with a child that records when it gets SIGTERM.
/// (A TTL of 3 s leaves the child's trap about 2 s before the lease's
/// SIGKILL; at 900 ms a loaded 2-core machine sometimes ran the KILL first.)
fn lossy_child(r: &Redis, dir: &Path, extra: &[&str]) -> std::process::Child {
    let script = format!(
        "trap 'date +%s%N > {t}; exit 0' TERM; touch {ready}; while :; do sleep 0.01; done",
        t = dir.join("term").display(),
        ready = dir.join("ready").display()
    );
    let child = exec_sh(r, extra, "lossy", &script).spawn();
    eventually(Duration::from_secs(5), "the child to start", || {
        dir.join("ready").exists()
    });
    child
}

#[test]
fn lock_deleted_by_an_admin_stops_the_child_with_79() {
    let r = Redis::start();
    let dir = tmp("deleted");
    let child = lossy_child(&r, &dir, &["--ttl", "3s"]);
    let _: () = r.cmd(&["DEL", "rlock:{lossy}:h"]);
    let run = finish(child, "exec").fails_with_lines(79, "lost");
    // One line for the loss, not one when it happens and one at exit (the
    // command's shell may add its own "Terminated").
    let ours = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("rlock:"))
        .count();
    assert_eq!(ours, 1, "{}", run.stderr);
    assert!(
        !read(&dir.join("term")).is_empty(),
        "child was not sent SIGTERM"
    );
}

#[test]
fn flushall_stops_the_child_with_79() {
    let r = Redis::start();
    let dir = tmp("flush");
    let child = lossy_child(&r, &dir, &["--ttl", "3s"]);
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
    let [done] = paths("ignore", ["done"]);
    let script = format!("sleep 1; touch {}", done.display());
    let child = exec_sh(&r, &["--ttl", "300ms", "--on-lost", "ignore"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("k"));
    let _: () = r.cmd(&["FLUSHALL"]);
    let run = finish(child, "exec").code(79);
    assert!(done.exists(), "the command was stopped: {}", run.stderr);
    assert!(
        run.stderr.contains("runs on without the lock"),
        "{}",
        run.stderr
    );
}

/// `--on-lost ignore` leaves the command's whole tree alone, what it left
/// running included: the leftover runs to its end, and rlock exits 79 only
/// then, as the README says ("exits 79 when the command ends", the lock
/// held for leftovers as for the command). `rlock --help` said instead
/// that whatever the command leaves running is killed when it exits.
#[test]
fn on_lost_ignore_leaves_what_the_command_left_running_alone() {
    let r = Redis::start();
    let [done] = paths("ignore-leftover", ["done"]);
    let script = format!("(sleep 1.5; touch {}) & sleep 0.5", done.display());
    let child = exec_sh(&r, &["--ttl", "3s", "--on-lost", "ignore"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("k"));
    let _: () = r.cmd(&["FLUSHALL"]);
    let run = finish(child, "exec").code(79);
    assert!(
        done.exists(),
        "the leftover was killed, or rlock exited before it: {}",
        run.stderr
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("runs on without the lock"),
        "{}",
        run.stderr
    );
    let help = rlock(&r).args(["--help"]).run().ok().stdout;
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("ignore lets the command and everything it started finish"),
        "rlock --help does not say what ignore does to leftovers"
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
    // (3 s: the TERM comes TTL/3 before the lease's end, the KILL near it;
    // at 1.5 s a loaded 2-core machine once ran the KILL before the trap.)
    let child = lossy_child(&r, &dir, &["--ttl", "3s", "--connect-timeout", "500ms"]);
    // Freeze right after a renewal (the lease's time left goes up), read
    // from the server: the next one is due a second later (TTL/3), so the
    // expiry read is the one the freeze leaves. (A renewal landing between
    // a read and the freeze would move the real expiry past the one read.)
    let hash = format!("{}:h", r.key("lossy"));
    let pttl = || -> i64 { r.cmd(&["PTTL", &hash]) };
    let mut last = pttl();
    let ttl_ms = loop {
        std::thread::sleep(Duration::from_millis(5));
        let now = pttl();
        if now > last {
            break now;
        }
        last = now;
    };
    let expires_ns = now_ns() + u128::try_from(ttl_ms).unwrap() * 1_000_000;
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
        "frozen redis (ttl 3 s): renewals stopped -> child signalled {} ms; \
         signalled {} ms before the server TTL ran out: {}",
        (term_ns - frozen_ns) / 1_000_000,
        (expires_ns - term_ns) / 1_000_000,
        run.stderr.trim()
    );
}

/// Redis frozen, or killed, 0.2 s into `exec --ttl 3s`: the lock is lost,
/// the command stopped before the lease ends, and then rlock must end at
/// once, with one line. It waited for the final release's resends to the
/// dead Redis, about 6 s after the command was gone (exit at 9.2 s frozen,
/// 6.7 s killed), and a command that outlived the loss's SIGTERM (here one
/// that ignores it, as when rlock itself was started with TERM ignored)
/// added "the command did not exit in time; sent SIGKILL" to the loss's
/// own line, which had said that SIGKILL would follow.
#[test]
fn a_lost_lock_ends_rlock_promptly_with_one_line() {
    for (how, sig) in [("frozen", libc::SIGSTOP), ("killed", libc::SIGKILL)] {
        for cmd in ["exec sleep 30", "trap '' TERM; exec sleep 30"] {
            let r = Redis::start();
            let [pidfile] = paths("lost-promptly", ["pid"]);
            let script = format!("echo $$ > {}; {cmd}", pidfile.display());
            let mut child = exec_sh(&r, &["--ttl", "3s"], "k", &script).spawn();
            let pid = wait_pid(&pidfile);
            std::thread::sleep(Duration::from_millis(200));
            kill(r.child_pid(), sig);
            let mut gone = None;
            while child.try_wait().unwrap().is_none() {
                if gone.is_none() && !alive(pid) {
                    gone = Some(Instant::now());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let exited = Instant::now();
            if sig == libc::SIGSTOP {
                kill(r.child_pid(), libc::SIGCONT);
            }
            let run = finish(child, "exec").code(79);
            let after = exited - gone.unwrap_or(exited);
            assert_eq!(
                run.stderr.lines().count(),
                1,
                "Redis {how}, `{cmd}`: {}",
                run.stderr
            );
            assert!(run.stderr.contains("lost"), "{}", run.stderr);
            assert!(
                after < Duration::from_millis(2500),
                "Redis {how}, `{cmd}`: rlock exited {after:?} after its command was gone"
            );
        }
    }
}

#[test]
fn after_a_loss_nothing_the_command_started_runs_on() {
    let r = Redis::start();
    let [pidfile] = paths("sweep", ["bg"]);
    let script = format!(
        "(trap '' TERM; exec sleep 30) & echo $! > {}; while :; do sleep 0.05; done",
        pidfile.display()
    );
    let child = exec_sh(&r, &["--ttl", "900ms"], "k", &script).spawn();
    let bg = wait_pid(&pidfile);
    let _: () = r.cmd(&["DEL", "rlock:{k}:h"]);
    finish(child, "exec").code(79);
    eventually(Duration::from_secs(5), "the background job to die", || {
        !alive(bg)
    });
}

#[test]
fn a_lock_gone_when_the_command_ends_is_reported_lost() {
    let r = Redis::start();
    let script = format!("redis-cli -p {} DEL 'rlock:{{k}}:h' >/dev/null", r.port);
    exec_sh(&r, &["--ttl", "1m"], "k", &script)
        .run()
        .fails(79, "gone when the command ended");
}

#[test]
fn on_lost_ignore_rides_out_a_stall_without_giving_the_lock_up() {
    let r = Redis::start();
    let child = rlock(&r)
        .args([
            "exec",
            "--ttl",
            "1500ms",
            "--on-lost",
            "ignore",
            "--connect-timeout",
            "300ms",
        ])
        .args(["k", "--", "sleep", "4"])
        .spawn();
    eventually(Duration::from_secs(5), "the lock", || r.held("k"));
    kill(r.child_pid(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1200));
    kill(r.child_pid(), libc::SIGCONT);
    std::thread::sleep(Duration::from_millis(1500));
    // Renewing went on after the stall: still ours.
    rlock(&r).args(["acquire", "-n", "k"]).run().code(75);
    let run = finish(child, "exec").ok();
    assert!(
        run.stderr.contains("no renewal confirmed"),
        "{}",
        run.stderr
    );
}

/// A ledger line per tick: "A <ns>" while the first holder runs.
fn ticking(ledger: &Path, tag: &str) -> String {
    format!(
        "while :; do echo \"{tag} $(date +%s%N)\" >> {l}; sleep 0.02; done",
        l = ledger.display()
    )
}

/// The rival's critical section, bracketed in the ledger.
fn rival(ledger: &Path) -> String {
    format!(
        "echo \"B+ $(date +%s%N)\" >> {l}; sleep 0.3; echo \"B- $(date +%s%N)\" >> {l}",
        l = ledger.display()
    )
}

/// Every "A" tick came before the rival's section started.
#[track_caller]
fn assert_no_overlap(ledger: &Path) {
    let text = read(ledger);
    let stamp = |tag: &str| -> Vec<u128> {
        text.lines()
            .filter_map(|l| l.strip_prefix(tag))
            .filter_map(|t| t.trim().parse().ok())
            .collect()
    };
    let b = stamp("B+ ");
    assert_eq!(b.len(), 1, "the rival did not run: {text}");
    let late: Vec<u128> = stamp("A ").into_iter().filter(|&a| a >= b[0]).collect();
    assert!(
        late.is_empty(),
        "the first holder ticked {} times after the rival got the lock",
        late.len()
    );
}

#[test]
fn a_stopped_rlock_cannot_leave_its_command_running_past_the_lease() {
    // Item 2: renewals stop with rlock; the guard kills the command before
    // the lease can end on the server, so the rival never overlaps it.
    let r = Redis::start();
    let [ledger] = paths("stopped", ["ledger"]);
    let holder = exec_sh(&r, &["--ttl", "1s"], "k", &ticking(&ledger, "A")).spawn();
    eventually(Duration::from_secs(5), "ticks", || lines(&ledger) >= 3);
    kill(holder.id(), libc::SIGSTOP);
    exec_sh(&r, &["-w", "20s"], "k", &rival(&ledger)).run().ok();
    kill(holder.id(), libc::SIGCONT);
    let run = finish(holder, "holder").code(79);
    assert_no_overlap(&ledger);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[test]
fn a_daemonized_leftover_dies_with_a_lost_lock() {
    let r = Redis::shared();
    let [ledger] = paths("daemon-loss", ["ledger"]);
    let script = format!(
        "setsid sh -c '{}' & wait",
        ticking(&ledger, "A").replace('"', "\\\"")
    );
    let child = exec_sh(&r, &["--ttl", "1s"], "k", &script).spawn();
    eventually(Duration::from_secs(5), "ticks", || lines(&ledger) >= 3);
    delete_lock(&r, "k");
    finish(child, "exec").code(79);
    assert_no_more_lines(
        &ledger,
        Duration::from_millis(300),
        "the daemonized process ran on",
    );
}

#[test]
fn a_full_stderr_pipe_does_not_delay_the_kill() {
    use std::os::fd::FromRawFd;
    let r = Redis::start();
    let [pidfile] = paths("stderr-full", ["pid"]);
    let script = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 0.05; done",
        pidfile.display()
    );
    let mut fds = [0; 2];
    // SAFETY: plain syscalls on our own pipe: fill it, then make it
    // blocking again so rlock's writes block.
    let (rd, wr) = unsafe {
        assert_eq!(
            libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC),
            0
        );
        let chunk = [b'x'; 4096];
        while libc::write(fds[1], chunk.as_ptr().cast(), chunk.len()) > 0 {}
        libc::fcntl(fds[1], libc::F_SETFL, 0);
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    let mut child = bare_rlock()
        .args([
            "--url",
            &r.url(),
            "exec",
            "--ttl",
            "1s",
            "--grace",
            "300ms",
            "k",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(wr)
        .spawn_plain();
    let cmd = wait_pid(&pidfile);
    delete_lock(&r, "k");
    // rlock blocks writing "lost" to the full pipe; the command, which
    // ignores SIGTERM, must be killed all the same.
    eventually(Duration::from_secs(10), "the command to be killed", || {
        !alive(cmd)
    });
    drop(rd); // unblock rlock (EPIPE)
    assert_eq!(child.wait().unwrap().code(), Some(79));
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
    let f = r.fence_ahead("k");
    kill(r.child_pid(), libc::SIGSTOP);
    let child = bare_rlock()
        // (A reply timeout well past the stop: on a loaded machine the
        // test's own steps can take a second or two; the lease, 200 ms,
        // runs out during the stop either way.)
        .args(["--url", &r.url(), "--connect-timeout", "20s"])
        .args(["exec", "--ttl", "200ms", "k"])
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
    let second = (f + 2).to_string();
    assert_eq!(run.stdout.trim(), second, "stderr: {}", run.stderr);
}

/// A FIFO at `path`, and a command line that exits when someone opens it
/// for writing and closes it again (see [`end_fifo`]).
fn fifo_waiter(path: &Path) -> String {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a plain syscall on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    format!("exec cat {} >/dev/null", path.display())
}

/// Let the command of [`fifo_waiter`] exit: open the FIFO for writing
/// (which waits for the command to have it open) and close it.
fn end_fifo(path: &Path) {
    drop(std::fs::OpenOptions::new().write(true).open(path).unwrap());
}

/// `( sleep 0.15; redis-cli debug sleep 1.5 ) & rlock exec --ttl 1s k --
/// sleep 0.3` exited 79: the command ended well inside its lease, but
/// the release reached Redis only after the lease had run out there, and
/// "not held" was taken for a loss. Here Redis is frozen before the
/// command ends and thawed only after the lease is over on the server:
/// the command's exit code stands, and one line says the release came
/// late.
#[test]
fn a_release_that_comes_after_the_lease_ended_is_no_loss_if_the_command_ended_inside_it() {
    let r = Redis::start();
    let [started, go] = paths("late-release", ["started", "go"]);
    let script = format!(": > {}; {}", started.display(), fifo_waiter(&go));
    // A long --connect-timeout: the release waits for the thawed Redis
    // instead of being sent again.
    let child = exec_sh(
        &r,
        &["--ttl", "3s", "--connect-timeout", "20s"],
        "k",
        &script,
    )
    .spawn();
    eventually(Duration::from_secs(10), "the command to start", || {
        started.exists()
    });
    kill(r.child_pid(), libc::SIGSTOP);
    end_fifo(&go);
    // Frozen for longer than any lease granted or renewed before the
    // freeze can last (3 s).
    std::thread::sleep(Duration::from_millis(3500));
    kill(r.child_pid(), libc::SIGCONT);
    let run = finish(child, "exec").ok();
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.starts_with("rlock: ") && run.stderr.contains("after the lease"),
        "{}",
        run.stderr
    );
    r.assert_nothing_held(&[]);
}

/// The other side of the test above: a command that ended after its lease
/// was no longer valid (`--on-lost ignore` lets it run on while Redis is
/// frozen) is a loss, 79, however late the release was answered.
#[test]
fn a_command_that_ended_after_its_lease_ran_out_is_a_loss_even_with_a_late_release() {
    let r = Redis::start();
    let [started, go] = paths("late-release-lost", ["started", "go"]);
    let script = format!(": > {}; {}", started.display(), fifo_waiter(&go));
    let opts = [
        "--ttl",
        "1s",
        "--connect-timeout",
        "20s",
        "--on-lost",
        "ignore",
    ];
    let child = exec_sh(&r, &opts, "k", &script).spawn();
    eventually(Duration::from_secs(10), "the command to start", || {
        started.exists()
    });
    kill(r.child_pid(), libc::SIGSTOP);
    // Past the lease (1 s from the grant, before `started`) on any clock.
    std::thread::sleep(Duration::from_millis(1500));
    end_fifo(&go);
    std::thread::sleep(Duration::from_millis(200));
    kill(r.child_pid(), libc::SIGCONT);
    finish(child, "exec").fails_with_lines(79, "lost");
}
