//! A break against time: a storm of breaks while execs end, the notice's
//! lifetime, the broken holder stopped before the next one starts, and a
//! broken hold nobody releases.

use super::*;

/// A break that lands while exec's command ends is found by the release,
/// not a renewal (the TTL is far longer than the command): it is reported
/// as the break, who and why, never as "another owner held it" or "gone".
/// Two execs at a time, so the lock is often taken by the other one
/// before the broken one's release.
#[test]
fn a_break_storm_is_reported_as_breaks_by_every_exec_it_hits() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let r = Redis::shared();
    let stop = Arc::new(AtomicBool::new(false));
    let storm = {
        let (mut l, stop) = (r.locker(), stop.clone());
        let order = rlock::Break::new(rlock::lock::Holders::All, "ops@storm", "storm").unwrap();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) && n < 20_000 {
                let _ = l.break_lock("k", &order);
                std::thread::sleep(Duration::from_millis(5));
                n += 1;
            }
        })
    };
    let runs: Vec<Run> = std::thread::scope(|s| {
        let streams: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    (0..10)
                        .map(|_| {
                            rlock(&r)
                                .args(["exec", "--ttl", "5s", "k", "--", "sleep", "0.3"])
                                .run()
                        })
                        .collect::<Vec<Run>>()
                })
            })
            .collect();
        streams
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    stop.store(true, Ordering::SeqCst);
    storm.join().unwrap();
    let lost: Vec<&Run> = runs.iter().filter(|o| o.code != 0).collect();
    for o in &lost {
        assert_eq!(o.code, 79, "{}", o.stderr);
    }
    let broken = lost
        .iter()
        .filter(|o| {
            o.stderr
                .contains("it was broken by ops@storm (reason: storm)")
        })
        .count();
    // Every loss is a break, and the storm hit most runs (each holds the
    // lock 300 ms; a break comes every few ms).
    assert_eq!(
        broken,
        lost.len(),
        "{:?}",
        lost.iter().map(|o| &o.stderr).collect::<Vec<_>>()
    );
    assert!(
        broken >= runs.len() / 2,
        "{broken} of {} broken",
        runs.len()
    );
    // The notices expire with the broken leases (5 s at most), and none
    // is left in the counters for the history's retention.
    let notes = format!("{}:b", r.key("k"));
    let ttl: i64 = r.cmd(&["PTTL", &notes]);
    assert!(
        ttl == -2 || (0..=5000).contains(&ttl),
        "{notes} has PTTL {ttl}"
    );
    let counters: Vec<String> = r.cmd(&["HKEYS", &format!("{}:n", r.key("k"))]);
    assert!(
        !counters.iter().any(|f| f.starts_with("b:")),
        "{counters:?}"
    );
    all_keys_expire(&r);
}

#[test]
fn a_break_notice_lives_as_long_as_the_broken_lease() {
    let r = Redis::shared();
    let mut a = r.locker();
    let lease = a
        .acquire(
            "k",
            &rlock::Request::new(Duration::from_secs(10)).unwrap(),
            None,
            &mut |_| {},
        )
        .unwrap();
    let order = rlock::Break::new(rlock::lock::Holders::All, "ops@h", "why").unwrap();
    let b = r.locker().break_lock("k", &order).unwrap();
    assert_eq!(b.fences, [lease.fence]);
    let ttl: i64 = r.cmd(&["PTTL", &format!("{}:b", r.key("k"))]);
    assert!((1..=10_000).contains(&ttl), "PTTL {ttl}");
    // The holder's release reads it: a break, not "not held".
    let e = a.release("k", &lease.token).unwrap_err();
    assert!(
        matches!(&e, rlock::Error::Lost { why, .. } if why == "it was broken by ops@h (reason: why)"),
        "{e}"
    );
    all_keys_expire(&r);
}

/// Issue 29's `break` row: a holder whose command ignores SIGTERM, a
/// waiter, a break. The waiter must not start while the broken command
/// still runs (it ran 13 s beside it when a break ended the hold at once):
/// the hold is marked, the holder's exec stops its command at its next
/// renewal (TERM, KILL after --grace) and releases, and only then does the
/// waiter get the lock. Checked by order, not by time: every tick the
/// broken command wrote comes before the waiter's start.
#[test]
fn a_broken_holder_is_stopped_before_the_next_one_starts() {
    let r = Redis::start();
    let d = tmp_dir("break", "no-overlap");
    let ticks = d.join("ticks");
    let started = d.join("started");
    let holder = rlock(&r)
        .args([
            "exec",
            "--ttl",
            "3s",
            "--grace",
            "2s",
            "k",
            "--",
            "sh",
            "-c",
            &format!(
                "trap '' TERM; while :; do date +%s%N >> {}; sleep 0.05; done",
                ticks.display()
            ),
        ])
        .spawn();
    eventually(Duration::from_secs(10), "the first tick", || ticks.exists());
    let waiter = rlock(&r)
        .args([
            "exec",
            "-w",
            "30s",
            "k",
            "--",
            "sh",
            "-c",
            &format!("date +%s%N > {}", started.display()),
        ])
        .spawn();
    r.await_waiters("k", 1);
    rlock(&r)
        .args(["break", "k", "--reason", "hung", "--yes"])
        .run()
        .ok();
    // Marked, still held: status says so until the holder has stopped.
    let st = r.status_json("k");
    assert_eq!(st["holders"][0]["breaking"]["reason"], "hung", "{st}");
    let broken = finish(holder, "the broken exec").code(79);
    assert!(broken.stderr.contains("broken by"), "{}", broken.stderr);
    finish(waiter, "the waiter").ok();
    let last_tick: u128 = read(&ticks)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .max()
        .unwrap();
    let start: u128 = read(&started).trim().parse().unwrap();
    assert!(
        start > last_tick,
        "the waiter started {} ms before the broken command's last tick",
        (last_tick - start) / 1_000_000
    );
    // broken, then how the hold ended, then the waiter's grant. The hold
    // ends by its exec's release, or by its lease when that runs out first
    // (the break marks the hold but extends nothing: with a 3 s lease and a
    // 2 s grace, a loaded machine's exec can release after the lease end).
    let kinds = kinds(&r, "k");
    let from = kinds.iter().position(|k| k == "broken").unwrap();
    assert!(
        matches!(
            &kinds[from..from + 3],
            [b, ended, g] if b == "broken" && (ended == "released" || ended == "expired") && g == "granted"
        ),
        "{kinds:?}"
    );
    r.assert_nothing_held(&[]);
}

/// A broken hold nobody renews (its holder gone, stopped, or a script's
/// plain `acquire`): the lock passes on when its lease ends, not at once,
/// so a holder that is merely slow never runs beside the next one.
#[test]
fn a_broken_hold_nobody_releases_passes_on_at_its_lease_end() {
    let r = Redis::start();
    rlock(&r)
        .args(["acquire", "--ttl", "3s", "k"])
        .by_another_process()
        .run()
        .ok();
    rlock(&r)
        .args(["break", "k", "--reason", "gone", "--yes"])
        .run()
        .ok();
    rlock(&r)
        .args(["exec", "-n", "k", "--", "true"])
        .run()
        .code(75);
    rlock(&r)
        .args(["exec", "-w", "20s", "k", "--", "true"])
        .run()
        .ok();
    let kinds = kinds(&r, "k");
    assert_eq!(
        kinds,
        ["granted", "broken", "expired", "granted", "released"],
        "{kinds:?}"
    );
    r.assert_nothing_held(&[]);
}
