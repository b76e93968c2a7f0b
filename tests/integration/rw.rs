//! `rlock rw read|write`: shared readers, exclusive writers, per-reader
//! leases, writer preference.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rlock::{Mode, Request, Wait};

use crate::util::*;

fn req(mode: Mode, ttl_ms: u64) -> Request {
    Request::builder(Duration::from_millis(ttl_ms))
        .mode(mode)
        .build()
        .unwrap()
}

#[test]
fn readers_overlap() {
    // Each reader waits (bounded) until all three are inside at once.
    let r = Redis::shared();
    let dir = rlock_test_support::scratch_dir("rw");
    let script = format!(
        "touch {d}/$1; for i in $(seq 100); do [ $(ls {d} | wc -l) -ge 3 ] && exit 0; sleep 0.05; done; exit 9",
        d = dir.display()
    );
    let kids: Vec<_> = (0..3)
        .map(|i| {
            rlock(&r)
                .args([
                    "rw",
                    "read",
                    "cat",
                    "--",
                    "sh",
                    "-c",
                    &script,
                    "sh",
                    &i.to_string(),
                ])
                .spawn()
        })
        .collect();
    for k in kids {
        finish(k, "reader").ok();
    }
    r.assert_nothing_held(&[]);
}

#[test]
fn a_writer_excludes_everyone_and_only_semaphores_do_not_mix() {
    let r = Redis::shared();
    let w = rlock(&r).args(["rw", "write", "cat"]).run().ok().token();
    rlock(&r)
        .args(["rw", "read", "-n", "cat"])
        .run()
        .fails(75, "busy");
    rlock(&r)
        .args(["rw", "write", "-n", "cat"])
        .run()
        .fails(75, "busy");
    // An exclusive lock is a write lock (as flock's -x and -s interoperate).
    rlock(&r)
        .args(["acquire", "-n", "cat"])
        .run()
        .fails(75, "busy");
    rlock(&r)
        .args(["rw", "read", "-w", "200ms", "cat"])
        .run()
        .fails_with_lines(75, "timed out");
    let st = r.status_json("cat");
    assert_eq!(
        (st["kind"].as_str(), st["holders"][0]["mode"].as_str()),
        (Some("rw"), Some("write"))
    );
    rlock(&r).args(["release", "cat", "--token", &w]).run().ok();
    // And the other way round: a reader waits for an exclusive holder.
    let x = rlock(&r).args(["acquire", "ex"]).run().ok().token();
    rlock(&r)
        .args(["rw", "read", "-n", "ex"])
        .run()
        .fails(75, "busy");
    rlock(&r).args(["release", "ex", "--token", &x]).run().ok();
    rlock(&r).args(["rw", "read", "-n", "ex"]).run().ok();
    // A semaphore is not a read-write lock.
    rlock(&r)
        .args(["acquire", "--limit", "2", "sem"])
        .run()
        .ok();
    rlock(&r)
        .args(["rw", "read", "-n", "sem"])
        .run()
        .fails(64, "in use as a semaphore");
    rlock(&r)
        .args(["rw", "read", "--limit", "2", "cat"])
        .run()
        .code(64);
    // The message names what does not mix (a semaphore), not the exclusive
    // lock, which does.
    rlock(&r).args(["rw", "read", "rd"]).run().ok();
    rlock(&r)
        .args(["acquire", "-n", "--limit", "2", "rd"])
        .run()
        .fails(64, "cannot be taken as a semaphore");
}

#[test]
fn one_readers_release_keeps_the_others_shares() {
    let r = Redis::shared();
    let a = rlock(&r).args(["rw", "read", "cat"]).run().ok().token();
    let b = rlock(&r).args(["rw", "read", "cat"]).run().ok().token();
    rlock(&r).args(["release", "cat", "--token", &a]).run().ok();
    let st = r.status_json("cat");
    assert_eq!(st["holders"].as_array().unwrap().len(), 1);
    rlock(&r)
        .args(["rw", "write", "-n", "cat"])
        .run()
        .fails(75, "busy");
    // A's token is spent: its share is gone (79), whoever else reads; and
    // releasing it again is harmless.
    rlock(&r)
        .args(["renew", "cat", "--token", &a])
        .run()
        .fails(79, "holds it no more");
    rlock(&r).args(["release", "cat", "--token", &a]).run().ok();
    rlock(&r).args(["renew", "cat", "--token", &b]).run().ok();
    rlock(&r).args(["release", "cat", "--token", &b]).run().ok();
    rlock(&r).args(["rw", "write", "-n", "cat"]).run().ok();
}

#[test]
fn a_crashed_readers_share_expires_alone() {
    let r = Redis::shared();
    rlock(&r)
        .args(["rw", "read", "cat", "--ttl", "300ms"])
        .run()
        .ok(); // never renewed
    rlock(&r)
        .args(["rw", "read", "cat", "--ttl", "1m"])
        .run()
        .ok();
    assert_eq!(r.status_json("cat")["holders"].as_array().unwrap().len(), 2);
    eventually(Duration::from_secs(5), "the 300 ms share to expire", || {
        r.status_json("cat")["holders"].as_array().unwrap().len() == 1
    });
    let st = r.status_json("cat");
    let holders = st["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 1);
    assert!(holders[0]["ttl_ms"].as_u64().unwrap() > 50_000);
}

#[test]
fn a_stream_of_readers_cannot_starve_a_writer() {
    // Four readers keep the lock read-held without a gap (each re-enters as
    // soon as it leaves, with overlapping 300 ms reads). Without writer
    // preference the writer would wait until they all stop (5 s).
    let r = Redis::start();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let (url, stop) = (r.url(), stop.clone());
            std::thread::spawn(move || {
                let mut l = locker(&url);
                std::thread::sleep(Duration::from_millis(75 * i));
                let deadline = Instant::now() + Duration::from_secs(5);
                while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                    let lease = l
                        .acquire("cat", &req(Mode::Read, 5000), None, &mut |_| {})
                        .unwrap();
                    std::thread::sleep(Duration::from_millis(300));
                    l.release("cat", &lease.token).unwrap();
                }
            })
        })
        .collect();
    // Part of the scenario: the readers' stream under way, overlapping.
    std::thread::sleep(Duration::from_millis(600));
    let mut w = r.locker();
    let started = Instant::now();
    let lease = w
        .acquire("cat", &req(Mode::Write, 5000), None, &mut |_| {})
        .unwrap();
    let waited = started.elapsed();
    let st = r.status_json("cat");
    assert_eq!(st["holders"].as_array().unwrap().len(), 1, "{st}");
    w.release("cat", &lease.token).unwrap();
    stop.store(true, Ordering::SeqCst);
    for t in readers {
        t.join().unwrap();
    }
    eprintln!("writer waited {waited:?} under a continuous stream of 300 ms readers");
    assert!(
        waited < Duration::from_secs(2),
        "writer starved for {waited:?}"
    );
}

#[test]
fn a_writers_release_wakes_every_waiting_reader_at_once() {
    let r = Redis::shared();
    let w = rlock(&r).args(["rw", "write", "cat"]).run().ok().token();
    let readers: Vec<_> = (0..3)
        .map(|_| rlock(&r).args(["rw", "read", "cat"]).spawn())
        .collect();
    r.await_waiters("cat", 3);
    let started = Instant::now();
    rlock(&r).args(["release", "cat", "--token", &w]).run().ok();
    for k in readers {
        finish(k, "reader").ok().token();
    }
    // One at a time, the second and third would each wait for a heartbeat
    // (5 s); 3 s leaves a loaded machine room.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.status_json("cat")["holders"].as_array().unwrap().len(), 3);
}

#[test]
fn a_writer_that_gives_up_or_dies_stops_blocking_readers() {
    let r = Redis::shared();
    let reader = rlock(&r).args(["rw", "read", "cat"]).run().ok().token();
    // Gives up: readers pass again at once.
    rlock(&r)
        .args(["rw", "write", "-w", "300ms", "cat"])
        .run()
        .code(75);
    rlock(&r).args(["rw", "read", "-n", "cat"]).run().ok();
    // Dies while waiting: within its own TTL.
    let mut writer = rlock(&r)
        .args(["rw", "write", "--ttl", "1s", "cat"])
        .spawn();
    eventually(Duration::from_secs(5), "the writer to queue", || {
        r.status_json("cat")["waiting_writers"] == 1
    });
    rlock(&r)
        .args(["rw", "read", "-n", "cat"])
        .run()
        .fails(75, "busy");
    writer.kill().unwrap();
    writer.wait().unwrap();
    let started = Instant::now();
    rlock(&r)
        .args(["rw", "read", "-w", "10s", "cat"])
        .run()
        .ok();
    // At the end of the dead writer's 1 s waiter lease, not at the
    // reader's heartbeat (5 s) nor its 10 s deadline.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    rlock(&r)
        .args(["release", "cat", "--token", &reader])
        .run()
        .ok();
}

/// `rlock rw MODE cat -- sh -c SCRIPT`.
fn rw_sh(r: &Redis, mode: &str, script: &str) -> Run {
    rlock(r)
        .args(["rw", mode, "cat", "--", "sh", "-c", script])
        .run()
}

#[test]
fn reentry_nests_reads_and_writes_but_refuses_an_upgrade() {
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let nested =
        format!("{bin} rw read -n cat -- {bin} rw write -n cat -- {bin} rw read -n cat -- true");
    rw_sh(&r, "write", &nested).ok();
    rw_sh(&r, "read", &format!("{bin} rw read -n cat -- true")).ok();
    rw_sh(&r, "read", &format!("{bin} rw write cat -- true"))
        .fails_with_lines(64, "cannot upgrade");
    r.assert_nothing_held(&[]);
}

#[test]
fn rw_exec_behaves_like_exec() {
    let r = Redis::shared();
    let f = r.fence_ahead("cat");
    let run = rlock(&r)
        .args([
            "rw",
            "write",
            "cat",
            "--",
            "sh",
            "-c",
            "echo $RLOCK_KEY $RLOCK_FENCE; exit 7",
        ])
        .run()
        .code(7);
    assert_eq!(run.stdout.trim(), format!("cat {}", f + 1));
    rlock(&r)
        .args(["rw", "read", "cat", "--", "sh", "-c", "kill -TERM $$"])
        .run()
        .code(143);
    r.assert_nothing_held(&[]);
}

#[test]
fn every_key_of_an_rw_lock_shares_one_hash_tag() {
    let r = Redis::start();
    let _ = rlock(&r).args(["rw", "read", "a{b}c"]).run().ok();
    let mut writer = rlock(&r).args(["rw", "write", "a{b}c"]).spawn();
    eventually(Duration::from_secs(5), "the writer to queue", || {
        r.status_json("a{b}c")["waiting_writers"] == 1
    });
    // The index of locks in use lives in keys of its own (and slots of its
    // own: src/lock/keys.rs).
    let keys: Vec<String> = r
        .keys()
        .into_iter()
        .filter(|k| !is_index_key(k) && !is_known_key(k))
        .collect();
    assert!(keys.len() >= 5, "{keys:?}");
    let tag = |k: &str| {
        let open = k.find('{').unwrap();
        let close = open + k[open..].find('}').unwrap();
        k[open + 1..close].to_string()
    };
    let tags: std::collections::BTreeSet<String> = keys.iter().map(|k| tag(k)).collect();
    assert_eq!(tags.len(), 1, "keys in several slots: {keys:?}");
    writer.kill().unwrap();
    writer.wait().unwrap();
}

#[test]
fn library_waits_for_a_write_with_a_timeout() {
    let r = Redis::shared();
    let mut l = r.locker();
    let w = l
        .acquire("cat", &req(Mode::Write, 5000), None, &mut |_| {})
        .unwrap();
    let read = req(Mode::Read, 5000)
        .to_builder()
        .wait(Wait::For(Duration::from_millis(200)))
        .build()
        .unwrap();
    let err = r
        .locker()
        .acquire("cat", &read, None, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, rlock::Error::Timeout { .. }), "{err}");
    l.release("cat", &w.token).unwrap();
}
