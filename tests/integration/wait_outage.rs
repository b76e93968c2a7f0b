//! `-w` is a deadline, through a Redis outage too: a waiter whose Redis
//! dies keeps trying until its deadline, then exits 69 saying since when
//! Redis has not answered; a Redis back in time gives it the lock.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// Take `key` for 30 s from a shell that exits at once (nobody's
/// ancestor: no self-wait hint).
fn hold_elsewhere(r: &Redis, key: &str) {
    rlock(r)
        .args(["acquire", "--ttl", "30s", key])
        .by_another_process()
        .run()
        .ok();
}

/// Start `rlock args` waiting for "k", held by another, then kill the
/// test's own server under it. When the waiter was spawned, and it.
fn wait_then_kill(r: &Redis, args: &[&str]) -> (Instant, Child) {
    hold_elsewhere(r, "k");
    let spawned = Instant::now();
    let child = rlock(r).args(args).spawn();
    r.await_waiters("k", 1);
    kill(r.child_pid(), libc::SIGKILL);
    (spawned, child)
}

/// The waiter kept trying until its deadline (`wait` after it was
/// spawned, at the earliest), then gave up with exit 69 saying since when
/// Redis has not answered.
#[track_caller]
fn gave_up_at_the_deadline(r: &Redis, spawned: Instant, child: Child, wait: Duration) {
    let run = finish(child, "a waiter whose Redis died").code(69);
    let took = spawned.elapsed();
    assert!(took >= wait, "gave up {took:?} after it started, before -w");
    // Generous: a loaded machine; the deadline, not the outage, ends it.
    assert!(
        took < wait + Duration::from_secs(10),
        "took {took:?} for -w {wait:?}"
    );
    let last = run.stderr.lines().last().unwrap_or("");
    let want = format!(
        "rlock: Redis at 127.0.0.1:{} has not answered since 20",
        r.port
    );
    assert!(last.starts_with(&want), "{:?}", run.stderr);
    assert!(last.contains("Z ("), "{:?}", run.stderr);
    // Redis ran there: no "is Redis running there?".
    assert!(!last.contains("--url"), "{:?}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{:?}", run.stderr);
}

#[test]
fn a_waiting_acquire_rides_out_an_outage_until_its_deadline() {
    let r = Redis::start();
    let (spawned, child) = wait_then_kill(&r, &["acquire", "-w", "5s", "k"]);
    gave_up_at_the_deadline(&r, spawned, child, Duration::from_secs(5));
}

#[test]
fn a_waiting_exec_rides_out_an_outage_until_its_deadline() {
    let r = Redis::start();
    let (spawned, child) = wait_then_kill(&r, &["exec", "-w", "5s", "k", "--", "true"]);
    gave_up_at_the_deadline(&r, spawned, child, Duration::from_secs(5));
}

/// A redis-server started again on a port whose server was killed (empty:
/// no persistence); killed when dropped. RedLock's tests use it too.
pub(crate) struct Again(Child, PathBuf);

impl Again {
    pub(crate) fn start(port: u16) -> Again {
        let dir = tmp_dir("wait-outage", &format!("again-{port}"));
        let child = Command::new(server_bin())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let again = Again(child, dir);
        let url = format!("redis://127.0.0.1:{port}");
        eventually(Duration::from_secs(10), "redis-server again", || {
            redis::Client::open(url.as_str())
                .and_then(|c| c.get_connection())
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()
        });
        again
    }
}

impl Drop for Again {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// Redis back before the deadline (empty after its restart): the waiter
/// goes on, takes the lock and runs its command.
#[test]
fn a_waiter_whose_redis_comes_back_in_time_gets_the_lock() {
    for args in [
        &["acquire", "-w", "30s", "k"][..],
        &["exec", "-w", "30s", "k", "--", "echo", "ran"],
    ] {
        let r = Redis::start();
        let (_, child) = wait_then_kill(&r, args);
        std::thread::sleep(Duration::from_millis(1500));
        let _again = Again::start(r.port);
        let run = finish(child, "a waiter whose Redis came back").ok();
        if args[0] == "exec" {
            assert_eq!(run.stdout, "ran\n", "{:?}", run.stderr);
        } else {
            run.token();
        }
        assert!(!run.stderr.contains("has not answered"), "{:?}", run.stderr);
    }
}
