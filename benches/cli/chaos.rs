//! Section 18: chaos volume (issue 32's fourth goal): 20 shell loops
//! running `rlock exec` on one lock for a minute while a killer SIGKILLs a
//! random rlock process, holder or waiter, every 50 to 200 ms.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::*;
use crate::process::*;
use crate::server::*;
use crate::stats::*;
use crate::support::signal;
use crate::{Bench, RLOCK};

const WORKERS: usize = 20;
/// Critical sections the window must see (#32).
const GOAL: usize = 10_000;
/// The window when RLOCK_BENCH_CHAOS_SECONDS does not say.
const SECONDS: u64 = 60;
/// After the window: the loops' last turns, queued behind one another.
const DRAIN: Duration = Duration::from_secs(60);

/// The window: RLOCK_BENCH_CHAOS_SECONDS, else [`SECONDS`].
fn window() -> Duration {
    let s = std::env::var("RLOCK_BENCH_CHAOS_SECONDS").ok();
    Duration::from_secs(s.and_then(|s| s.trim().parse().ok()).unwrap_or(SECONDS))
}

/// What this section adds to the bench's watchdog.
pub(crate) fn budget() -> Duration {
    window() + DRAIN
}

/// The critical section: `ln -s` is atomic, so the marker ($1, a symlink
/// to the pid of the section inside) tells whether someone else is inside.
/// A holder SIGKILLed inside leaves its marker: its guard kills its tree
/// before the lock passes on, so a marker whose section is no longer
/// running is stale ($4), not an overlap ($2). A pid reused by another
/// process (pid_max may be 32768) is not a section: only a live `cs.sh`
/// other than this one counts.
const CS: &str = r#"if ! ln -s $$ "$1" 2>/dev/null; then
  o=$(readlink "$1")
  if [ -n "$o" ] && [ "$o" != $$ ] && tr '\0' ' ' 2>/dev/null <"/proc/$o/cmdline" | grep -q cs.sh; then
    echo "overlap $o" >> "$2"
  else
    echo "$o" >> "$4"; rm -f "$1"; ln -s $$ "$1" 2>/dev/null || echo overlap >> "$2"
  fi
fi
rm -f "$1"
echo . >> "$3"
"#;

/// Pid 1 of a pid namespace of its own (`unshare -fp --mount-proc`), in
/// $D: the worker loops, until the file `stop` exists, and the killer.
/// The killer sees only the namespace's processes, so it cannot signal a
/// stranger: it picks one whose name (comm) is `rlock` (the guard is
/// `rl-guard`, the releaser `rl-release`) and whose parent's is neither
/// `rlock` nor `rl-guard`: a guard is named `rlock` from its fork until it
/// renames itself, a releaser from its exec until it does, and killing
/// either is not killing an rlock (a killed guard is a lost lock for its
/// rlock, exit 79, by design). Pid and pause from awk's random numbers.
const NS: &str = r#"cd "$D" || exit 3
i=0
while [ $i -lt "$N" ]; do
  while [ ! -e stop ]; do
    "$B" exec chaos -- sh cs.sh inside overlaps done stale
    rc=$?
    [ $rc = 0 ] || [ $rc = 137 ] || echo "exit $rc" >> failures
  done &
  i=$((i+1))
done
awk 'BEGIN { srand(); while (1) printf "0.%03d %d\n", 50 + int(rand() * 151), int(rand() * 1000000) }' |
while [ ! -e stop ] && read nap pick; do
  sleep "$nap"
  pids=
  for f in /proc/[0-9]*/comm; do
    { read c < "$f"; } 2>/dev/null && [ "$c" = rlock ] || continue
    p=${f#/proc/}; p=${p%/comm}
    { read st < "/proc/$p/stat"; } 2>/dev/null || continue
    pp=${st#*) ? }; pp=${pp%% *}
    { read pc < "/proc/$pp/comm"; } 2>/dev/null || continue
    [ "$pc" = rlock ] || [ "$pc" = rl-guard ] || pids="$pids $p"
  done
  set -- $pids
  [ $# -gt 0 ] || continue
  shift $((pick % $#))
  kill -9 "$1" 2>/dev/null && echo "$1" >> kills
done
wait
"#;

/// Can this user make a pid namespace (root, or unprivileged user
/// namespaces would be needed)?
fn namespaces() -> bool {
    Command::new("unshare")
        .args(["-fp", "--mount-proc", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub(crate) fn run(b: &Bench) {
    let r = &b.redis;
    let window = window();
    section(&format!(
        "18. Chaos volume: {WORKERS} shell loops of `rlock exec chaos -- sh cs.sh` for {} s, \
         a random rlock process (holder or waiter) SIGKILLed every 50-200 ms",
        window.as_secs()
    ));
    if !namespaces() {
        println!(
            "   skipped: needs `unshare -fp --mount-proc` (root), so that the killer sees only its own"
        );
        return;
    }
    let dir = r.dir.join("chaos");
    std::fs::create_dir_all(&dir).expect("create work dir");
    std::fs::write(dir.join("cs.sh"), CS).expect("write cs.sh");
    let done = dir.join("done");

    let mut ns = Command::new("unshare");
    // --kill-child: unshare's death (ours, by PR_SET_PDEATHSIG below, if
    // the watchdog ends the bench) kills pid 1, and with it the namespace.
    ns.args(["-fp", "--mount-proc", "--kill-child", "sh", "-c", NS]);
    clean_env(&mut ns);
    ns.env("RLOCK_URL", r.url())
        .env("B", RLOCK)
        .env("D", &dir)
        .env("N", WORKERS.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl() is async-signal-safe.
    unsafe {
        ns.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = ns.spawn().expect("spawn unshare");

    // Progress: the `done` file grows by 2 bytes a section.
    let (mut last, mut seen, mut worst) = (started, 0, Duration::ZERO);
    while started.elapsed() < window {
        let n = std::fs::metadata(&done).map_or(0, |m| m.len());
        let now = Instant::now();
        if n != seen {
            seen = n;
            worst = worst.max(now - last);
            last = now;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let end = Instant::now();
    worst = worst.max(end - last);
    let sections = lines(&done);
    let kills = lines(&dir.join("kills"));
    // Killed waiters keep their place until a claim or their waiter lease
    // lapses (docs/internals.md, "Dead and stalled waiters: claims").
    let queued = waiters_of(&mut locker(r), "chaos");
    std::fs::write(dir.join("stop"), "").expect("write stop");
    let drained = wait_deadline(&mut child, Instant::now() + DRAIN);
    if drained.is_none() {
        signal(child.id() as i32, libc::SIGKILL);
        let _ = child.wait();
    }
    let left = leftovers(r);

    let per_s = sections as f64 / window.as_secs_f64();
    println!(
        "   critical sections in the window {sections:>8}   ({per_s:.0}/s; \
         #32 goal: at least {GOAL} in 60 s, {:.0}/s)",
        GOAL as f64 / 60.0
    );
    crate::goal(format!(
        "chaos volume (section 18): {sections} critical sections in {:.0} s, {kills} kills, {} overlaps   goal at least {GOAL} in 60 s",
        window.as_secs_f64(),
        lines(&dir.join("overlaps"))
    ));
    println!("   rlock processes SIGKILLed       {kills:>8}");
    println!(
        "   overlaps                        {:>8}   (stale markers of killed holders: {})",
        lines(&dir.join("overlaps")),
        lines(&dir.join("stale"))
    );
    println!("   worst gap without progress      {:>8.0} ms", ms(worst));
    println!(
        "   queued at the window's end      {queued:>8}   (waiters, live or killed; {WORKERS} loops)"
    );
    // Which codes, with how many of each ("exit 79" x 1, ...).
    let mut codes: Vec<String> = std::fs::read_to_string(dir.join("failures"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    codes.sort();
    codes.dedup_by(|a, b| a == b);
    println!(
        "   other failures                  {:>8}   (exit codes but 0 and 137: {})",
        lines(&dir.join("failures")),
        if codes.is_empty() {
            "none".to_string()
        } else {
            codes.join(", ")
        }
    );
    if drained.is_none() {
        println!(
            "   WARNING: the loops had not ended {} s after the window: killed",
            DRAIN.as_secs()
        );
    }
    println!("   left in Redis: {}", describe(&left));
}
