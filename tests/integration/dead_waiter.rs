//! Waiters that die or stall while queued (issue 21): the waiter woken for
//! its turn has a short claim (lua/common.lua, `to_wake`); one that lets
//! it lapse is dropped, and the live waiter behind it goes ahead within a
//! second, in FIFO order, never beside another holder.
//!
//! The live waiters here wait with `-w 4`: under the old rule (a dead
//! waiter kept its place for its 6 s waiter lease) they time out, exit
//! code 1. How long the skip takes is timed in the bench (section 16).

use std::process::Child;
use std::time::Instant;

use crate::util::*;

/// Take `key` for 30 s through the CLI; its token.
fn hold(r: &Redis, key: &str, extra: &[&str]) -> String {
    rlock(r)
        .args(["acquire", "--ttl", "30s"])
        .args(extra)
        .args([key])
        .run()
        .ok()
        .token()
}

fn release(r: &Redis, key: &str, token: &str) {
    rlock(r).args(["release", key, "--token", token]).run().ok();
}

/// `rlock exec [extra] key` of a job that writes `<name>+` to `file`,
/// sleeps a little, then writes `<name>-`: overlapping holders would
/// interleave their lines. Queued (the `n`th waiter) when this returns.
fn job(r: &Redis, key: &str, n: u64, name: &str, file: &std::path::Path, extra: &[&str]) -> Child {
    let f = file.display();
    let line = format!("echo {name}+ >> {f}; sleep 0.2; echo {name}- >> {f}");
    let child = rlock(r)
        .args(["exec"])
        .args(if extra.contains(&"-w") {
            &[][..]
        } else {
            &["-w", "4"][..]
        })
        .args(extra)
        .args([key, "--", "sh", "-c", &line])
        .spawn();
    r.await_waiters(key, n);
    child
}

/// SIGKILL `child` (an `rlock exec` blocked in its wait) with its guard
/// (which would otherwise give its place back at once) and reap it.
fn kill_queued(mut child: Child) {
    kill_waiter_with_guard(&mut child);
}

#[test]
fn a_waiter_killed_while_queued_is_skipped_once_the_lock_is_free() {
    let r = Redis::start();
    let file = tmp_file("dead", "killed");
    let tok = hold(&r, "k", &[]);
    let dead = job(&r, "k", 1, "dead", &file, &[]);
    let live = job(&r, "k", 2, "live", &file, &[]);
    kill_queued(dead);
    let released = Instant::now();
    release(&r, "k", &tok);
    finish(live, "the live waiter behind a killed one").ok();
    eprintln!(
        "the live waiter behind a killed one was done {:?} after the release",
        released.elapsed()
    );
    assert_eq!(read(&file), "live+\nlive-\n");
    r.assert_nothing_held(&[]);
}

/// A waiter stopped (SIGSTOP) when its turn comes loses its claim, and the
/// one behind it runs; woken again (SIGCONT), it is no longer queued, so it
/// queues anew and runs after: never beside the other.
#[test]
fn a_stopped_waiter_loses_its_turn_and_runs_after_never_beside() {
    let r = Redis::start();
    let file = tmp_file("dead", "stopped");
    let tok = hold(&r, "k", &[]);
    let stopped = job(&r, "k", 1, "stopped", &file, &["-w", "30"]);
    let live = job(&r, "k", 2, "live", &file, &[]);
    kill(stopped.id(), libc::SIGSTOP);
    release(&r, "k", &tok);
    let live = finish(live, "the waiter behind a stopped one");
    let queued = r.status_json("k")["waiting"].as_u64().unwrap_or(0);
    kill(stopped.id(), libc::SIGCONT);
    live.ok();
    // The stopped waiter's claim lapsed: the live one's acquire dropped it.
    assert_eq!(queued, 0, "the stopped waiter kept its place");
    finish(stopped, "the stopped waiter, continued").ok();
    assert_eq!(read(&file), "live+\nlive-\nstopped+\nstopped-\n");
    r.assert_nothing_held(&[]);
}

/// Several readers woken at once, one of them dead: the live reader goes
/// in at once, and the writer queued behind them gets its turn once the
/// dead reader's claim lapses.
#[test]
fn a_dead_reader_among_woken_readers_holds_up_neither_them_nor_the_writer() {
    let r = Redis::start();
    let file = tmp_file("dead", "readers");
    let tok = hold(&r, "k", &[]);
    let dead = job(&r, "k", 1, "dead", &file, &["-s"]);
    let reader = job(&r, "k", 2, "reader", &file, &["-s"]);
    let writer = job(&r, "k", 3, "writer", &file, &[]);
    kill_queued(dead);
    release(&r, "k", &tok);
    finish(reader, "the live reader").ok();
    finish(writer, "the writer behind them").ok();
    assert_eq!(read(&file), "reader+\nreader-\nwriter+\nwriter-\n");
    r.assert_nothing_held(&[]);
}

/// A semaphore slot freed while a dead waiter is first in line: the live
/// waiter behind it gets the slot.
#[test]
fn a_dead_waiter_for_a_semaphore_slot_is_skipped() {
    let r = Redis::start();
    let file = tmp_file("dead", "sem");
    let a = hold(&r, "s", &["--limit", "2"]);
    let b = hold(&r, "s", &["--limit", "2"]);
    let dead = job(&r, "s", 1, "dead", &file, &["--limit", "2"]);
    let live = job(&r, "s", 2, "live", &file, &["--limit", "2"]);
    kill_queued(dead);
    release(&r, "s", &a);
    finish(live, "the live waiter for a slot").ok();
    assert_eq!(read(&file), "live+\nlive-\n");
    release(&r, "s", &b);
    r.assert_nothing_held(&[]);
}
