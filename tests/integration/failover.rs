//! Failovers under a held lock (issue 11): Redis Cluster (3 masters, 3
//! replicas, `cluster-node-timeout 1000`) with the master of the lock's
//! slot SIGKILLed, and Sentinel with the master's redis-server SIGKILLed.
//!
//! Every holder's command writes to a ledger: `NAME start NS` when it
//! starts, `NAME tick NS` every 50 ms, `NAME end NS` when it ends normally
//! (NS: CLOCK_REALTIME nanoseconds, one clock for every process of the
//! machine). At its start a command also looks whether the shell of an
//! earlier holder is still alive and notes `NAME overlap PID NS` if so. Two
//! holders' spans (start to last line) must never overlap.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::util::*;

/// A holder's command: runs for $MS milliseconds, writing the ledger.
const HOLDER: &str = r#"
now() { date +%s%N; }
echo "$NAME start $(now)" >> "$LEDGER"
if [ -f "$PIDS" ]; then
  for p in $(cat "$PIDS"); do
    if [ -r "/proc/$p/stat" ] && ! grep -q ') Z ' "/proc/$p/stat"; then
      echo "$NAME overlap $p $(now)" >> "$LEDGER"
    fi
  done
fi
echo $$ >> "$PIDS"
end=$(( $(now) + MS * 1000000 ))
while [ "$(now)" -lt "$end" ]; do
  echo "$NAME tick $(now)" >> "$LEDGER"
  sleep 0.05
done
echo "$NAME end $(now)" >> "$LEDGER"
"#;

static SEQ: AtomicUsize = AtomicUsize::new(0);

struct Ledger {
    dir: PathBuf,
}

/// One holder's span in the ledger.
#[derive(Debug)]
struct Span {
    first: u128,
    last: u128,
    ended: bool,
}

impl Ledger {
    fn new() -> Ledger {
        let dir = rlock_test_support::scratch_dir(&format!(
            "ledger-{}",
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        Ledger { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.join("ledger")
    }

    fn text(&self) -> String {
        std::fs::read_to_string(self.path()).unwrap_or_default()
    }

    /// `rlock ... exec KEY [args] -- sh -c HOLDER` as holder `name`,
    /// running `ms` milliseconds.
    fn holder(&self, r: Rlock, name: &str, ms: u64, args: &[&str]) -> Rlock {
        r.env("NAME", name)
            .env("MS", &ms.to_string())
            .env("LEDGER", self.path().to_str().unwrap())
            .env("PIDS", self.dir.join("pids").to_str().unwrap())
            .args(args)
            .args(["--", "sh", "-c", HOLDER])
    }

    fn started(&self, name: &str) -> bool {
        self.text().contains(&format!("{name} start "))
    }

    /// Every holder's span; panics on an overlap.
    #[track_caller]
    fn check(&self) -> BTreeMap<String, Span> {
        let text = self.text();
        let mut spans: BTreeMap<String, Span> = BTreeMap::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert!(f[1] != "overlap", "two holders at once:\n{text}");
            let ns: u128 = f.last().unwrap().parse().unwrap();
            let s = spans.entry(f[0].to_string()).or_insert(Span {
                first: ns,
                last: ns,
                ended: false,
            });
            s.first = s.first.min(ns);
            s.last = s.last.max(ns);
            s.ended |= f[1] == "end";
        }
        let all: Vec<(&String, &Span)> = spans.iter().collect();
        for (i, (a, sa)) in all.iter().enumerate() {
            for (b, sb) in &all[i + 1..] {
                assert!(
                    sa.last < sb.first || sb.last < sa.first,
                    "{a} and {b} held the lock at once: {sa:?} {sb:?}"
                );
            }
        }
        spans
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// rlock on the cluster, with these seeds.
fn rc(seeds: &str) -> Rlock {
    bare_rlock()
        .env("RLOCK_URL", seeds)
        .env("RLOCK_CLUSTER", "1")
}

/// The lock's main key in Redis.
const KEY: &str = "rlock:{cf}";

/// A cluster of 3 masters and 3 replicas, the master serving "cf", and
/// its replica.
fn setup() -> (Cluster, usize, usize) {
    let c = Cluster::start_with_replicas(3, 1);
    let m = c.master_of("cf");
    let reps = c.replicas_of(m);
    assert_eq!(reps.len(), 1, "replicas of node {m}: {reps:?}");
    (c, m, reps[0])
}

/// Exit code 79: the lock was lost while the command ran.
const LOST: i32 = 79;

/// (a) A running `exec --ttl 10s` whose slot master is SIGKILLed halfway
/// between two renewals (1.5 s after the grant; renewals every 3.3 s, the
/// command stopped if none is confirmed 6.6 s after the last) keeps
/// renewing on the promoted replica (the grant reached it before the kill)
/// and its command ends normally; a rival started after the failover gets
/// the lock only after it.
#[test]
fn a_running_exec_renews_on_the_promoted_replica() {
    let (c, m, replica) = setup();
    let ledger = Ledger::new();
    // The dead node first among the seeds: the worst case.
    let seeds = c.urls_from(m);
    let a = ledger
        .holder(rc(&seeds), "A", 12_000, &["exec", "cf", "--ttl", "10s"])
        .spawn();
    eventually(Duration::from_secs(10), "A to start", || {
        ledger.started("A")
    });
    let granted = Instant::now();
    eventually(Duration::from_secs(5), "the grant on the replica", || {
        c.has_key(replica, KEY)
    });
    std::thread::sleep(Duration::from_millis(1500).saturating_sub(granted.elapsed()));
    let killed = Instant::now();
    let f = c.kill_master_of("cf");
    eprintln!("(a) 1.5 s after the grant, {f}");
    assert_eq!(f.promoted, replica);
    // The first renewal on the new master: its PTTL goes back up to ~10 s.
    let mut renewed = None;
    while renewed.is_none() && killed.elapsed() < Duration::from_secs(8) {
        let pttl: i64 = c.read(replica, &["PTTL", KEY]).unwrap_or(0);
        if pttl > 9_000 {
            renewed = Some(killed.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("(a) first renewal on the new master {renewed:?} after the kill");
    let rival = ledger
        .holder(
            rc(&c.urls_from(replica)),
            "R",
            300,
            &["exec", "cf", "--wait", "30s", "--ttl", "10s"],
        )
        .spawn();
    let a = finish(a, "exec A");
    let r = finish(rival, "rival R");
    eprintln!("(a) A exited {}: {}", a.code, a.stderr);
    eprintln!("(a) R exited {}: {}", r.code, r.stderr);
    let spans = ledger.check();
    a.ok();
    r.ok();
    assert!(spans["A"].ended && spans["R"].ended, "{spans:?}");
}

/// (b) A waiter queued before the kill: never a second holder, and it gets
/// the lock once the holder is done.
#[test]
fn a_queued_waiter_gets_the_lock_after_a_failover() {
    let (c, m, replica) = setup();
    let ledger = Ledger::new();
    let seeds = c.urls_from(m);
    let a = ledger
        .holder(rc(&seeds), "A", 4_000, &["exec", "cf", "--ttl", "10s"])
        .spawn();
    eventually(Duration::from_secs(10), "A to start", || {
        ledger.started("A")
    });
    let w = ledger
        .holder(
            rc(&seeds),
            "W",
            300,
            &["exec", "cf", "--wait", "30s", "--ttl", "10s"],
        )
        .spawn();
    eventually(Duration::from_secs(10), "W to queue", || {
        rc(&seeds)
            .args(["status", "cf", "--json"])
            .run()
            .stdout
            .contains("\"waiting\":1")
    });
    eventually(Duration::from_secs(5), "the queue on the replica", || {
        c.has_key(replica, "rlock:{cf}:q")
    });
    handed_over(&ledger, "b", a, w, || {
        let f = c.kill_master_of("cf");
        eprintln!("(b) {f}");
    });
}

/// Kill (a failover) while holder A runs and waiter W waits; then A ends
/// normally or as lost, W gets the lock afterwards, and the ledger never
/// shows both at once.
fn handed_over(ledger: &Ledger, tag: &str, a: Child, w: Child, kill: impl FnOnce()) {
    let killed = Instant::now();
    let w = std::thread::spawn(move || (finish(w, "waiter W"), killed.elapsed()));
    kill();
    let a = finish(a, "exec A");
    let (w, w_after) = w.join().unwrap();
    eprintln!("({tag}) A exited {}: {}", a.code, a.stderr);
    eprintln!(
        "({tag}) W exited {} {w_after:?} after the kill: {}",
        w.code, w.stderr
    );
    let spans = ledger.check();
    assert!([0, LOST].contains(&a.code), "A exited {}", a.code);
    w.ok();
    assert!(spans["W"].ended, "{spans:?}");
}

/// (c) A fresh `exec` started after the failover, with the dead node first
/// among the seeds, works.
#[test]
fn a_fresh_exec_after_a_failover_skips_the_dead_seed() {
    let (c, m, _) = setup();
    let seeds = c.urls_from(m);
    rc(&seeds).args(["exec", "cf", "--", "true"]).run().ok();
    let f = c.kill_master_of("cf");
    eprintln!("(c) {f}");
    let run = rc(&seeds)
        .args(["exec", "cf", "--wait", "30s", "--", "true"])
        .run();
    eprintln!(
        "(c) exec exited {} in {:?}: {}",
        run.code, run.elapsed, run.stderr
    );
    run.ok();
    let tok = rc(&seeds).args(["acquire", "-n", "cf"]).run().ok().token();
    rc(&seeds).args(["status", "cf"]).run().ok();
    rc(&seeds)
        .args(["release", "cf", "--token", &tok])
        .run()
        .ok();
}

/// (c) The same, started 300 ms after the kill: before the survivors even
/// flag the master as failed, so every slot map names the dead node. A
/// `--wait 30s` rides the failover out.
#[test]
fn a_fresh_exec_during_a_failover_waits_it_out() {
    let (c, m, _) = setup();
    let seeds = c.urls_from(m);
    rc(&seeds).args(["exec", "cf", "--", "true"]).run().ok();
    std::thread::scope(|s| {
        let failover = s.spawn(|| c.kill_master_of("cf"));
        std::thread::sleep(Duration::from_millis(300));
        let run = rc(&seeds)
            .args(["exec", "cf", "--wait", "30s", "--", "true"])
            .run();
        eprintln!("(c) {}", failover.join().unwrap());
        eprintln!(
            "(c) exec exited {} in {:?}: {}",
            run.code, run.elapsed, run.stderr
        );
        run.ok();
    });
}

/// Sentinel: the master's redis-server SIGKILLed under a running exec and
/// a waiting rival: never two holders at once, and the rival gets the lock
/// once the holder is done.
#[test]
fn sentinel_crash_failover_hands_the_lock_to_the_waiter() {
    let s = Sentinels::start();
    let rs = || {
        bare_rlock()
            .env("RLOCK_URL", &s.urls())
            .env("RLOCK_SENTINEL", "mymaster")
    };
    let ledger = Ledger::new();
    let a = ledger
        .holder(rs(), "A", 8_000, &["exec", "cf", "--ttl", "10s"])
        .spawn();
    eventually(Duration::from_secs(10), "A to start", || {
        ledger.started("A")
    });
    let w = ledger
        .holder(
            rs(),
            "W",
            300,
            &["exec", "cf", "--wait", "30s", "--ttl", "10s"],
        )
        .spawn();
    eventually(Duration::from_secs(10), "W to queue", || {
        rs().args(["status", "cf", "--json"])
            .run()
            .stdout
            .contains("\"waiting\":1")
    });
    handed_over(&ledger, "s", a, w, || {
        let took = s.crash_master();
        eprintln!("(s) the crash failover took {took:?}");
    });
}
