//! Section 11: what idle waiters cost, through the library. One waiter on
//! a held lock: its client requests and the server commands it causes per
//! second (INFO `total_commands_processed`, which counts the commands run
//! inside scripts too: what Redis's CPU sees). Then 1,000 waiters on 10
//! held keys, each a thread with its own `Locker`: redis-server's CPU in %
//! of one core, from utime + stime in /proc/<pid>/stat. Each part on a
//! redis-server of its own, where nothing else runs.

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use rlock::{Locker, Released};

use crate::client::{locker, options, request, waiters_of};
use crate::process::wait_until;
use crate::server::{blocked_clients, describe, info, leftovers};
use crate::stats::section;
use crate::support::{Redis, note, start_redis};
use crate::{Bench, PREFIX};

const WINDOW: Duration = Duration::from_secs(20);
const SETTLE: Duration = Duration::from_secs(1);
const TTL: Duration = Duration::from_secs(120);
const MANY: usize = 1000;
const KEYS: usize = 10;

pub(crate) fn run(_: &Bench) {
    section(&format!(
        "11. Idle waiters, library: 1 waiter, then {MANY} waiters on {KEYS} keys ({:.0} s windows)",
        WINDOW.as_secs_f64()
    ));
    one_waiter();
    many_waiters();
}

/// Counter deltas between two INFO snapshots.
fn delta(before: &HashMap<String, f64>, after: &HashMap<String, f64>, k: &str) -> f64 {
    after.get(k).unwrap_or(&0.0) - before.get(k).unwrap_or(&0.0)
}

/// Requests clients sent between two snapshots: rlock's waiters send only
/// these (the commands inside the scripts are not requests).
fn requests(before: &HashMap<String, f64>, after: &HashMap<String, f64>) -> f64 {
    ["cmdstat_evalsha", "cmdstat_eval", "cmdstat_blpop"]
        .iter()
        .map(|k| delta(before, after, k))
        .sum()
}

/// Server commands between two snapshots, less the one INFO of ours that
/// falls inside the window (the first; the second is counted after its
/// reply).
fn commands(before: &HashMap<String, f64>, after: &HashMap<String, f64>) -> f64 {
    delta(before, after, "total_commands_processed") - delta(before, after, "cmdstat_info")
}

/// Holders of `keys` (one `Locker` holding all, idle: no renewals in the
/// window) and one waiter thread per entry of `waiters` (the key it waits
/// for); each waiter releases at once when granted.
struct Crowd {
    holder: Locker,
    held: Vec<(String, rlock::Token)>,
    threads: Vec<thread::JoinHandle<Result<(), String>>>,
}

impl Crowd {
    fn start(r: &Redis, keys: &[String], waiters: usize) -> Crowd {
        let mut holder = locker(r);
        let held = keys
            .iter()
            .map(|k| {
                let lease = holder
                    .acquire(k, &request(TTL), None, &mut |_| {})
                    .expect("holder acquire");
                (k.clone(), lease.token)
            })
            .collect();
        let threads = (0..waiters)
            .map(|i| {
                let (key, url) = (keys[i % keys.len()].clone(), r.url());
                thread::Builder::new()
                    .stack_size(256 * 1024)
                    .spawn(move || {
                        let mut l = Locker::connect(&options(url), PREFIX)
                            .map_err(|e| format!("connect: {e}"))?;
                        let lease = l
                            .acquire(&key, &request(TTL), None, &mut |_| {})
                            .map_err(|e| format!("acquire {key}: {e}"))?;
                        match l.release(&key, &lease.token) {
                            Ok(Released::Released) => Ok(()),
                            other => Err(format!("release {key}: {other:?}")),
                        }
                    })
                    .expect("spawn a waiter thread")
            })
            .collect();
        Crowd {
            holder,
            held,
            threads,
        }
    }

    /// Every waiter queued on its key and parked in BLPOP, within `limit`.
    fn settled(&self, r: &Redis, limit: Duration) -> bool {
        let mut obs = locker(r);
        let mut conn = r.conn();
        let want = self.threads.len() as u64;
        wait_until(limit, || {
            let queued: u64 = self.held.iter().map(|(k, _)| waiters_of(&mut obs, k)).sum();
            queued == want && blocked_clients(&mut conn) == want
        })
    }

    /// Release the holders and let every waiter take its turn and leave;
    /// the first few errors, and how long that took.
    fn finish(mut self) -> (Vec<String>, Duration) {
        let t = Instant::now();
        let mut errors = Vec::new();
        for (k, token) in &self.held {
            if let Err(e) = self.holder.release(k, token) {
                note(&mut errors, format!("holder release {k}: {e}"));
            }
        }
        for h in self.threads {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => note(&mut errors, e),
                Err(_) => note(&mut errors, "waiter thread panicked".into()),
            }
        }
        (errors, t.elapsed())
    }
}

/// 1 holder, 1 waiter: what the waiter costs while it waits.
fn one_waiter() {
    let r = start_redis(&[]);
    let crowd = Crowd::start(&r, &["idle1".to_string()], 1);
    let settled = crowd.settled(&r, Duration::from_secs(10));
    thread::sleep(SETTLE);
    let mut conn = r.conn();
    let before = info(&mut conn, &["stats", "commandstats"]);
    let t = Instant::now();
    thread::sleep(WINDOW);
    let after = info(&mut conn, &["stats", "commandstats"]);
    let secs = t.elapsed().as_secs_f64();
    let (errors, _) = crowd.finish();

    let mut by: Vec<(String, f64)> = after
        .keys()
        .filter_map(|k| Some((k, k.strip_prefix("cmdstat_")?)))
        .filter(|(_, name)| *name != "info")
        .map(|(k, name)| (name.to_uppercase(), delta(&before, &after, k)))
        .filter(|(_, n)| *n > 0.0)
        .collect();
    by.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if !settled {
        println!("   WARNING: the waiter was not queued and blocked within 10 s");
    }
    println!(
        "   1 waiter on a held lock: {:.2} client requests/s (EVALSHA+EVAL+BLPOP), \
         {:.2} server commands/s (incl. inside scripts)",
        requests(&before, &after) / secs,
        commands(&before, &after) / secs
    );
    let by: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n:.0}")).collect();
    println!("   in {secs:.1} s, by command: {}", by.join(", "));
    println!("   goals (#12): at most 1 request/s and at most 3 server commands/s per idle waiter");
    for e in &errors {
        println!("   ERROR: {e}");
    }
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after "(comm) ": state is field 3, utime 14 and stime 15.
    let rest: Vec<&str> = stat
        .rsplit_once(") ")
        .map_or(vec![], |(_, r)| r.split(' ').collect());
    let ticks = |i: usize| {
        rest.get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(14) + ticks(15)) / hz
}

/// Room for `fds` more file descriptors: raise the soft limit towards the
/// hard one if needed (redis-server, started after, inherits it). The
/// limit it ends at.
fn raise_nofile(fds: u64) -> u64 {
    // SAFETY: rlimit is plain old data; all zeroes is a valid value.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a pointer to a live local of the right type.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    if lim.rlim_cur < fds {
        lim.rlim_cur = fds.min(lim.rlim_max);
        // SAFETY: as above.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
    lim.rlim_cur
}

/// 1,000 waiters on 10 held keys: redis-server's CPU while they wait.
fn many_waiters() {
    let nofile = raise_nofile(2 * MANY as u64 + 200);
    let r = start_redis(&[]);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("idle-many-{i}")).collect();
    let queueing = Instant::now();
    let crowd = Crowd::start(&r, &keys, MANY);
    let settled = crowd.settled(&r, Duration::from_secs(120));
    let queue_time = queueing.elapsed();
    thread::sleep(SETTLE);
    let mut conn = r.conn();
    let pid = r.child.id();
    let before = info(&mut conn, &["stats", "commandstats"]);
    let cpu_before = cpu_seconds(pid);
    let t = Instant::now();
    thread::sleep(WINDOW);
    let cpu = cpu_seconds(pid) - cpu_before;
    let secs = t.elapsed().as_secs_f64();
    let after = info(&mut conn, &["stats", "commandstats"]);
    let (errors, drain) = crowd.finish();
    let left = leftovers(&r);

    if !settled {
        println!("   WARNING: not all {MANY} waiters were queued and blocked within 120 s");
    }
    println!(
        "   {MANY} waiters on {KEYS} held keys (threads, one Locker each; queued in {:.1} s, \
         open files limit {nofile}):",
        queue_time.as_secs_f64()
    );
    println!(
        "   redis-server CPU {:.1}% of one core ({cpu:.2} CPU-s in {secs:.1} s, /proc utime+stime); goal (#12): under 5%",
        100.0 * cpu / secs
    );
    println!(
        "   per waiter: {:.2} client requests/s, {:.2} server commands/s; all: {:.0} commands/s",
        requests(&before, &after) / secs / MANY as f64,
        commands(&before, &after) / secs / MANY as f64,
        commands(&before, &after) / secs
    );
    println!(
        "   cleanup: holders released, all waiters took their turn in {:.2} s; left in Redis: {}",
        drain.as_secs_f64(),
        describe(&left)
    );
    for e in &errors {
        println!("   ERROR: {e}");
    }
}
