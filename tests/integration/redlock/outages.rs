//! A waiter under RedLock when a majority stops answering: it rides the
//! outage out until its deadline, and gets the lock if the masters come
//! back in time.

use super::*;

/// Script calls a server has run (EVAL and EVALSHA, from INFO
/// commandstats).
fn script_calls(m: &Redis) -> u64 {
    let info: String = m.cmd(&["INFO", "commandstats"]);
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Hold "k" under RedLock for 30 s (from a shell that exits at once), start
/// `acquire -w WAIT k` and, once it is queued on every master, send `sig`
/// to two of the three masters. The holder's token, the waiter and when it was spawned.
fn wait_then_signal_two(
    ms: &[Redis],
    wait: &str,
    sig: i32,
) -> (String, Instant, std::process::Child) {
    let holder = rl(ms)
        .args(["acquire", "--ttl", "30s", "k"])
        .by_another_process()
        .run()
        .ok()
        .token();
    let before: Vec<u64> = ms.iter().map(script_calls).collect();
    let spawned = Instant::now();
    let child = rl(ms).args(["acquire", "-w", wait, "k"]).spawn();
    // Every master has run the waiter's attempts (it retries a busy lock
    // every 50-250 ms): two more script calls than before, one of which
    // may be the holder's grant arriving late.
    for (m, before) in ms.iter().zip(before) {
        eventually(Duration::from_secs(10), "the waiter's attempts", || {
            script_calls(m) >= before + 2
        });
    }
    kill(ms[1].child_pid(), sig);
    kill(ms[2].child_pid(), sig);
    (holder, spawned, child)
}

/// The waiter kept trying until its deadline (`wait` after it was spawned,
/// at the earliest), then gave up with exit 69 naming the two silent
/// masters, ms[1] and ms[2], and since when.
#[track_caller]
fn gave_up_at_the_deadline(ms: &[Redis], spawned: Instant, run: Run, wait: Duration) {
    let took = spawned.elapsed();
    eprintln!("-w {wait:?} with 2 of 3 masters silent 0.5 s in: exit 69 after {took:?}");
    assert!(took >= wait, "gave up after {took:?}, before -w");
    // Generous: a loaded machine; the deadline, not a count of tries, ends it.
    assert!(
        took < wait + Duration::from_secs(10),
        "took {took:?} for -w {wait:?}"
    );
    let last = run.stderr.lines().last().unwrap_or("");
    assert!(last.contains("RedLock needs 2"), "{:?}", run.stderr);
    for m in &ms[1..] {
        let silent = format!("Redis at 127.0.0.1:{} has not answered since 20", m.port);
        assert!(last.contains(&silent), "{:?}", run.stderr);
    }
    // The master that answered is not named as silent.
    assert!(
        !last.contains(&format!("127.0.0.1:{} has not", ms[0].port)),
        "{:?}",
        run.stderr
    );
    // They ran there: no "is Redis running there?".
    assert!(!last.contains("--url"), "{:?}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{:?}", run.stderr);
}

#[test]
fn a_waiter_rides_out_a_lost_majority_until_its_deadline() {
    let ms = masters(3);
    let (_, spawned, child) = wait_then_signal_two(&ms, "5s", libc::SIGKILL);
    let run = finish(child, "a waiter whose majority died").code(69);
    gave_up_at_the_deadline(&ms, spawned, run, Duration::from_secs(5));
}

#[test]
fn a_waiter_rides_out_a_frozen_majority_until_its_deadline() {
    // Frozen masters time out together: the first timeout decides an
    // attempt without the other, which still counts as silent (the one
    // master left saying busy is no timeout, exit 75).
    let ms = masters(3);
    let (_, spawned, child) = wait_then_signal_two(&ms, "3s", libc::SIGSTOP);
    let run = finish(child, "a waiter whose majority froze");
    thaw(&ms[1]);
    thaw(&ms[2]);
    let run = run.code(69);
    gave_up_at_the_deadline(&ms, spawned, run, Duration::from_secs(3));
}

#[test]
fn a_waiter_whose_masters_come_back_in_time_gets_the_lock() {
    let ms = masters(3);
    let (holder, spawned, child) = wait_then_signal_two(&ms, "30s", libc::SIGKILL);
    std::thread::sleep(Duration::from_millis(1500));
    // The holder lets go on the master left (its grant may not have
    // reached that one: then there is nothing to let go of).
    rlock(&ms[0])
        .args(["release", "k", "--token", &holder])
        .run();
    assert!(!held_on(&ms[0], "k"));
    // Back empty (no persistence), on the same ports.
    let _again: Vec<_> = ms[1..]
        .iter()
        .map(|m| crate::wait_outage::Again::start(m.port))
        .collect();
    let run = finish(child, "a waiter whose masters came back").ok();
    let took = spawned.elapsed();
    eprintln!("-w 30s, 2 of 3 masters killed 0.5 s in and back 2 s in: lock after {took:?}");
    let tok = run.token();
    assert!(!run.stderr.contains("has not answered"), "{:?}", run.stderr);
    assert!(took < Duration::from_secs(30), "{took:?}");
    // Held on a majority: released there.
    rl(&ms).args(["release", "k", "--token", &tok]).run().ok();
}

/// A grant that waited says so in the history (`waited_ms` of the
/// `granted` event), as on one Redis: every attempt of a RedLock wait
/// carries how long the wait has lasted so far.
#[test]
fn a_grant_that_waited_records_its_wait() {
    let ms = masters(3);
    let tok = rl(&ms)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let waiter = rl(&ms)
        .args(["exec", "-w", "30s", "k", "--", "true"])
        .spawn();
    std::thread::sleep(Duration::from_millis(1200));
    rl(&ms).args(["release", "k", "--token", &tok]).run().ok();
    finish(waiter, "the waiter").ok();
    let out = rl(&ms).args(["history", "k", "--json"]).run().ok().stdout;
    let h: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let granted: Vec<&serde_json::Value> = h.iter().filter(|e| e["event"] == "granted").collect();
    assert_eq!(granted.len(), 2, "{out}");
    let waited = granted[1]["waited_ms"].as_u64().unwrap_or(0);
    // The release came 1.2 s after the waiter started; its first attempt
    // was at most that long after its spawn (generous for a loaded box).
    assert!(waited >= 500, "the second grant waited {waited} ms: {out}");
}
