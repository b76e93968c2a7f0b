//! `--priority N`: waiters with a higher priority are served first, equal
//! priorities in arrival order, holders never pre-empted; semaphores and
//! read-write locks; refused (64, nothing written) where it means nothing.

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use crate::util::*;

/// `rlock <cmd...> --priority P KEY -- sh -c 'echo NAME >> FILE'`, started
/// and queued: it is waiter number `queued` once this returns.
fn queue(
    r: &Redis,
    cmd: &[&str],
    priority: i32,
    key: &str,
    name: &str,
    file: &Path,
    queued: u64,
) -> Child {
    let line = format!("echo {name} >> {}", file.display());
    let child = rlock(r)
        .args(cmd)
        .args([
            "--priority",
            &priority.to_string(),
            key,
            "--",
            "sh",
            "-c",
            &line,
        ])
        .spawn();
    r.await_waiters(key, queued);
    child
}

fn finish_all(children: Vec<Child>) {
    for (i, c) in children.into_iter().enumerate() {
        finish(c, &format!("waiter {i}")).ok();
    }
}

/// Lines of `file`, in the order written.
fn ran(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waiters queued with priorities 0, 5, 0, 10 behind a holder run, once
/// it releases, in the order 10, 5, then the two 0s as they came.
#[test]
fn higher_priorities_run_first_and_equal_ones_in_arrival_order() {
    let r = Redis::start();
    let file = tmp_file("priority", "order");
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let exec = ["exec"];
    let kids = vec![
        queue(&r, &exec, 0, "k", "first0", &file, 1),
        queue(&r, &exec, 5, "k", "five", &file, 2),
        queue(&r, &exec, 0, "k", "second0", &file, 3),
        queue(&r, &exec, 10, "k", "ten", &file, 4),
    ];
    assert!(ran(&file).is_empty(), "the holder was pre-empted");
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    finish_all(kids);
    assert_eq!(ran(&file), ["ten", "five", "first0", "second0"]);
    r.assert_nothing_held(&[]);
}

/// A semaphore: with one of its two slots held throughout, the waiters go
/// through the other one slot at a time, by priority.
#[test]
fn a_semaphore_serves_by_priority() {
    let r = Redis::start();
    let file = tmp_file("priority", "sem");
    let hold = || {
        rlock(&r)
            .args(["acquire", "--limit", "2", "--ttl", "30s", "s"])
            .run()
            .ok()
            .token()
    };
    let (one, two) = (hold(), hold());
    let exec = ["exec", "--limit", "2"];
    let kids = vec![
        queue(&r, &exec, 0, "s", "first0", &file, 1),
        queue(&r, &exec, 5, "s", "five", &file, 2),
        queue(&r, &exec, -3, "s", "minus3", &file, 3),
        queue(&r, &exec, 0, "s", "second0", &file, 4),
        queue(&r, &exec, 10, "s", "ten", &file, 5),
    ];
    rlock(&r).args(["release", "s", "--token", &one]).run().ok();
    finish_all(kids);
    assert_eq!(ran(&file), ["ten", "five", "first0", "second0", "minus3"]);
    rlock(&r).args(["release", "s", "--token", &two]).run().ok();
    r.assert_nothing_held(&[]);
}

/// A read-write lock: a writer queued at a higher priority than readers
/// queued before it goes first (alone), then the readers.
#[test]
fn a_high_priority_writer_goes_before_readers_queued_earlier() {
    let r = Redis::start();
    let file = tmp_file("priority", "writer");
    let tok = rlock(&r)
        .args(["rw", "write", "--ttl", "30s", "db"])
        .run()
        .ok()
        .token();
    let read = ["rw", "read"];
    let kids = vec![
        queue(&r, &read, 0, "db", "reader", &file, 1),
        queue(&r, &read, 0, "db", "reader", &file, 2),
        queue(&r, &["rw", "write"], 10, "db", "writer", &file, 3),
    ];
    rlock(&r)
        .args(["release", "db", "--token", &tok])
        .run()
        .ok();
    finish_all(kids);
    assert_eq!(ran(&file), ["writer", "reader", "reader"]);
    r.assert_nothing_held(&[]);
}

/// A read-write lock: a reader at a higher priority than the waiting
/// writer is not queued behind it: it joins the readers holding at once,
/// where a reader of the writer's priority waits (and times out).
#[test]
fn a_high_priority_reader_goes_before_a_waiting_writer() {
    let r = Redis::start();
    let file = tmp_file("priority", "reader");
    let tok = rlock(&r)
        .args(["rw", "read", "--ttl", "30s", "db"])
        .run()
        .ok()
        .token();
    let writer = queue(&r, &["rw", "write"], 0, "db", "writer", &file, 1);
    rlock(&r)
        .args(["rw", "read", "-w", "1", "db", "--", "true"])
        .run()
        .fails_with_lines(75, "timed out after ");
    let line = format!("echo urgent >> {}", file.display());
    rlock(&r)
        .args(["rw", "read", "--priority", "1", "-w", "10", "db", "--"])
        .args(["sh", "-c", &line])
        .run()
        .ok();
    assert_eq!(ran(&file), ["urgent"], "the writer ran before its turn");
    rlock(&r)
        .args(["release", "db", "--token", &tok])
        .run()
        .ok();
    finish(writer, "the writer").ok();
    assert_eq!(ran(&file), ["urgent", "writer"]);
    r.assert_nothing_held(&[]);
}

/// `acquire` queues with its priority too, and several keys take it for
/// each: a set at priority 10 goes before a single waiter at 0 that came
/// first.
#[test]
fn acquire_and_several_keys_queue_by_priority() {
    let r = Redis::start();
    let file = tmp_file("priority", "multi");
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "30s", "a"])
        .run()
        .ok()
        .token();
    let low = queue(&r, &["exec"], 0, "a", "low", &file, 1);
    let line = format!("echo set >> {}", file.display());
    let set = rlock(&r)
        .args([
            "exec",
            "--priority",
            "10",
            "a",
            "--and",
            "b",
            "--",
            "sh",
            "-c",
            &line,
        ])
        .spawn();
    r.await_waiters("a", 2);
    let acq = rlock(&r)
        .args(["acquire", "--priority", "20", "--ttl", "30s", "a"])
        .spawn();
    r.await_waiters("a", 3);
    rlock(&r).args(["release", "a", "--token", &tok]).run().ok();
    let got = finish(acq, "the acquire").ok().token();
    assert!(
        ran(&file).is_empty(),
        "someone ran beside the acquire's hold"
    );
    rlock(&r).args(["release", "a", "--token", &got]).run().ok();
    finish(set, "the set").ok();
    finish(low, "the low waiter").ok();
    assert_eq!(ran(&file), ["set", "low"]);
    r.assert_nothing_held(&[]);
}

#[track_caller]
fn refused(r: &Redis, args: &[&str], needle: &str) {
    let file = tmp_file("priority", "bad");
    let line = format!("echo ran >> {}", file.display());
    rlock(r)
        .args(args)
        .args(["k", "--", "sh", "-c", &line])
        .run()
        .fails_with_lines(64, needle);
    assert!(!file.exists(), "{args:?}: the command ran");
    assert!(r.keys().is_empty(), "{args:?} wrote {:?}", r.keys());
}

#[test]
fn a_priority_that_is_not_an_integer_is_refused() {
    let r = Redis::start();
    refused(&r, &["exec", "--priority", "x"], "--priority");
    refused(&r, &["exec", "--priority", "1.5"], "--priority");
    refused(&r, &["rw", "write", "--priority", ""], "--priority");
}

#[test]
fn a_priority_out_of_range_is_refused() {
    let r = Redis::start();
    refused(&r, &["exec", "--priority", "1001"], "1001");
    refused(&r, &["rw", "read", "--priority", "-1001"], "-1001");
    refused(&r, &["exec", "--priority", "99999999999"], "--priority");
}

/// The extremes are in range, and a free lock is granted whatever the
/// priority.
#[test]
fn the_extreme_priorities_are_accepted() {
    let r = Redis::start();
    for p in ["-1000", "1000"] {
        rlock(&r)
            .args(["exec", "--priority", p, "k", "--", "true"])
            .run()
            .ok();
    }
    r.assert_nothing_held(&[]);
}

/// RedLock waits by retrying on every master, in no queue: a priority
/// would mean nothing there, so it is refused (0, the default, is not).
#[test]
fn a_priority_is_refused_with_redlock() {
    let masters: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let with_urls = || {
        let mut cmd = bare_rlock();
        for m in &masters {
            cmd = cmd.args(["--url", &m.url()]);
        }
        cmd
    };
    let file = tmp_file("priority", "redlock");
    let line = format!("echo ran >> {}", file.display());
    with_urls()
        .args(["exec", "--priority", "5", "k", "--", "sh", "-c", &line])
        .run()
        .fails_with_lines(64, "--priority needs one Redis");
    assert!(!file.exists());
    for m in &masters {
        assert!(m.keys().is_empty(), "{:?}", m.keys());
    }
    with_urls()
        .args(["exec", "--priority", "0", "k", "--", "true"])
        .run()
        .ok();
    eventually(Duration::from_secs(5), "the lock freed", || {
        masters.iter().all(|m| !m.held("k"))
    });
}

/// A queue an older release left (scores 1, 2, ... and no arrival counter
/// in the state hash) keeps its order: a new waiter of priority 0 scores
/// past the waiters already there, never beside them.
#[test]
fn a_queue_of_an_older_release_keeps_its_order() {
    let r = Redis::start();
    let file = tmp_file("priority", "upgrade");
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let first = queue(&r, &["exec"], 0, "k", "older", &file, 1);
    let (state, q) = (r.key("k"), format!("{}:q", r.key("k")));
    let scores = |r: &Redis| -> Vec<String> { r.cmd(&["ZRANGE", &q, "0", "-1", "WITHSCORES"]) };
    assert_eq!(scores(&r)[1], "1", "a priority-0 waiter scores as before");
    // What an older release leaves: the same score, no counter.
    let gone: i64 = r.cmd(&["HDEL", &state, "qn"]);
    assert_eq!(gone, 1);
    let second = queue(&r, &["exec"], 0, "k", "newer", &file, 2);
    assert_eq!(scores(&r)[3], "2", "{:?}", scores(&r));
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    finish_all(vec![first, second]);
    assert_eq!(ran(&file), ["older", "newer"]);
    r.assert_nothing_held(&[]);
}

/// Redis Cluster: each lock's queue lives on its master, and priorities
/// order it there, for keys on every master.
#[test]
fn priorities_work_on_a_cluster() {
    let c = Cluster::start(3);
    let rc = || {
        bare_rlock()
            .env("RLOCK_URL", &c.urls())
            .env("RLOCK_CLUSTER", "1")
    };
    let waiting = |k: &str, n: u32| {
        rc().args(["status", k, "--json"])
            .run()
            .ok()
            .stdout
            .contains(&format!("\"waiting\":{n}"))
    };
    for k in ["a", "b", "c", "d"] {
        let file = tmp_file("priority", &format!("cluster-{k}"));
        let tok = rc().args(["acquire", "--ttl", "30s", k]).run().ok().token();
        let mut kids = Vec::new();
        for (n, (p, name)) in [(1u32, ("0", "low")), (2, ("10", "high"))] {
            let line = format!("echo {name} >> {}", file.display());
            kids.push(
                rc().args(["exec", "--priority", p, k, "--", "sh", "-c", &line])
                    .spawn(),
            );
            eventually(Duration::from_secs(10), "the waiter to queue", || {
                waiting(k, n)
            });
        }
        rc().args(["release", k, "--token", &tok]).run().ok();
        finish_all(kids);
        assert_eq!(ran(&file), ["high", "low"], "lock {k}");
    }
    for r in &c.nodes {
        r.assert_nothing_held(&[]);
    }
}

/// `top`'s and `metrics`' oldest wait is the earliest join among the
/// waiters, not the head of the queue (a later, higher priority).
#[test]
fn the_oldest_wait_is_the_earliest_join_not_the_head() {
    let r = Redis::start();
    let file = tmp_file("priority", "oldest");
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let low = queue(&r, &["exec"], 0, "k", "low", &file, 1);
    std::thread::sleep(Duration::from_millis(50)); // two joins, two ms
    let high = queue(&r, &["exec"], 10, "k", "high", &file, 2);
    let state: Vec<String> = r.cmd(&["HGETALL", &r.key("k")]);
    let joins: Vec<u64> = state
        .chunks(2)
        .filter(|f| f[0].starts_with("a:"))
        .map(|f| f[1].parse().unwrap())
        .collect();
    let (first, last) = (*joins.iter().min().unwrap(), *joins.iter().max().unwrap());
    assert!(first < last, "{joins:?}");
    let mut l = r.locker();
    assert_eq!(l.status("k").unwrap().oldest_wait_since_ms, Some(first));
    let views = l.overview("*").unwrap();
    let v = views.iter().find(|v| v.status.key == "k").unwrap();
    let since = v.now_ms - u64::try_from(v.oldest_wait.unwrap().as_millis()).unwrap();
    assert_eq!(since, first);
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    finish_all(vec![low, high]);
    assert_eq!(ran(&file), ["high", "low"]);
    r.assert_nothing_held(&[]);
}
