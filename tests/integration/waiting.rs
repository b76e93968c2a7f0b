//! What a waiter shows while it waits (a live line on a terminal, plain
//! lines otherwise), and `--supersede`, the CI "newest wins" queue.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::*;

fn waiters(r: &Redis, key: &str) -> u64 {
    r.status_json(key)["waiting"].as_u64().unwrap()
}

/// Take `key` for 30 s, as another holder would; its token.
fn hold(r: &Redis, key: &str) -> String {
    rlock(r)
        .args(["acquire", "--ttl", "30s", key])
        .run()
        .ok()
        .token()
}

/// Release `key` held with `token`.
fn release(r: &Redis, key: &str, token: &str) {
    rlock(r).args(["release", key, "--token", token]).run().ok();
}

fn holder_pid(r: &Redis, key: &str) -> u64 {
    r.status_json(key)["holders"][0]["pid"].as_u64().unwrap()
}

/// `inner` (a shell line; $BIN is rlock) under a pseudo-terminal 200
/// columns wide, everything it writes to the terminal captured.
fn under_pty(r: &Redis, inner: &str) -> Child {
    Command::new("script")
        .args([
            "-qec",
            &format!("stty rows 24 cols 200; {inner}; echo \"rc=$?\""),
            "/dev/null",
        ])
        .env("RLOCK_URL", r.url())
        .env("BIN", env!("CARGO_BIN_EXE_rlock"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// What the terminal shows after the last time a line was erased.
fn after_last_erase(out: &str) -> &str {
    let erase = "\x1b[2K";
    let at = out.rfind(erase).expect("the live line was never erased");
    &out[at + erase.len()..]
}

/// The live line shows holder, place and time, and is erased before the
/// command's output once the lock is granted.
#[test]
fn a_terminal_shows_a_live_line_erased_when_granted() {
    let r = Redis::start();
    let tok = hold(&r, "k");
    let pid = holder_pid(&r, "k");
    let child = under_pty(&r, "$BIN exec k -- echo the-command-ran");
    r.await_waiters("k", 1);
    // Long enough for the line to be redrawn at least once (every second).
    std::thread::sleep(Duration::from_millis(2200));
    release(&r, "k", &tok);
    let out = finish(child, "exec under a pty").ok().stdout;
    let drawn = out.matches("rlock: waiting ").count();
    assert!(drawn >= 2, "the line was not redrawn: {out:?}");
    for want in [
        "for \"k\", next in line; held by host ",
        &format!(" pid {pid}, lease "),
        " left, since 20",
    ] {
        assert!(out.contains(want), "{want:?} not in {out:?}");
    }
    assert!(out.contains("rlock: waiting 2s"), "no time waited: {out:?}");
    let last = after_last_erase(&out);
    assert!(
        last.contains("the-command-ran") && last.contains("rc=0"),
        "the line was not erased before the command ran: {out:?}"
    );
    assert!(!last.contains("rlock:"), "{last:?}");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_terminal_line_is_erased_before_the_timeout_message() {
    let r = Redis::start();
    rlock(&r).args(["acquire", "--ttl", "30s", "k"]).run().ok();
    let child = under_pty(&r, "$BIN exec -w 1.5 k -- true");
    let out = finish(child, "exec -w 1.5 under a pty").ok().stdout;
    assert!(out.contains("rlock: waiting "), "{out:?}");
    let last = after_last_erase(&out);
    assert!(
        last.starts_with("rlock: timed out after ") && last.contains("rc=75"),
        "{out:?}"
    );
}

#[test]
fn ctrl_c_erases_the_terminal_line() {
    let r = Redis::start();
    rlock(&r).args(["acquire", "--ttl", "30s", "k"]).run().ok();
    // `exec`: rlock alone in the terminal's foreground group. A shell in
    // it would get the SIGINT too, and whether dash then runs the next
    // command depends on when the signal lands; `script -e` reports
    // rlock's own exit code instead.
    let mut child = under_pty(&r, "exec $BIN exec k -- true");
    r.await_waiters("k", 1);
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(b"\x03").unwrap();
    stdin.flush().unwrap();
    let out = finish(child, "exec under a pty, Ctrl-C").code(130).stdout;
    let last = after_last_erase(&out);
    assert!(last.contains("interrupted by signal 2"), "{out:?}");
    assert!(!last.contains("rlock: waiting"), "{out:?}");
    r.await_waiters("k", 0);
}

/// Not a terminal: the one line of old, however many heartbeats; -q: none.
#[test]
fn without_a_terminal_stderr_has_the_one_old_line() {
    let r = Redis::start();
    rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .by_another_process()
        .run()
        .ok();
    let pid = holder_pid(&r, "k");
    // --ttl 1s: a heartbeat every 400 ms, several in the wait.
    let run = rlock(&r)
        .args(["exec", "--ttl", "1s", "-w", "2", "k", "--", "true"])
        .run()
        .code(75);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{:?}", run.stderr);
    assert!(
        lines[0].starts_with(&format!(
            "rlock: waiting for lock \"k\" held by host {} pid {pid} since 20",
            hostname()
        )),
        "{:?}",
        run.stderr
    );
    assert!(
        lines[1].starts_with("rlock: timed out after ")
            && lines[1].contains("waiting for lock \"k\"")
    );
    assert!(!run.stderr.contains('\x1b'), "{:?}", run.stderr);
    let run = rlock(&r)
        .args(["-q", "exec", "-w", "0.5", "k", "--", "true"])
        .run()
        .code(75);
    assert_eq!(run.stderr.lines().count(), 1, "{:?}", run.stderr);
}

fn hostname() -> String {
    let out = Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// -v without a terminal: a line each time another holder is seen.
#[test]
fn verbose_says_when_the_holder_changes() {
    let r = Redis::start();
    let tok = hold(&r, "k");
    let first = rlock(&r).args(["exec", "k", "--", "sleep", "1.5"]).spawn();
    r.await_waiters("k", 1);
    let second = rlock(&r)
        .args(["-v", "exec", "--ttl", "1s", "k", "--", "true"])
        .spawn();
    r.await_waiters("k", 2);
    release(&r, "k", &tok);
    let first_pid = first.id();
    finish(first, "the first waiter").ok();
    let run = finish(second, "the second waiter").ok();
    let changes: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("is now held by"))
        .collect();
    assert_eq!(changes.len(), 1, "{:?}", run.stderr);
    assert!(
        changes[0].contains(&format!("pid {first_pid} since")),
        "{:?}",
        run.stderr
    );
    r.assert_nothing_held(&[]);
}

/// The library reports every busy observation, not only the first.
#[test]
fn on_wait_sees_each_observation_with_the_time_waited() {
    let r = Redis::start();
    let mut holder = locker(&r.url());
    // The holder lets go once the waiter has reported three observations
    // (the event, not a TTL that must outlast them on a loaded machine).
    let held = holder
        .acquire(
            "k",
            &rlock::Request::new(Duration::from_secs(30)).unwrap(),
            None,
            &mut |_| {},
        )
        .unwrap();
    let mut l = locker(&r.url());
    // Heartbeats every 400 ms.
    let req = rlock::Request::builder(Duration::from_secs(1))
        .wait(rlock::Wait::For(Duration::from_secs(60)))
        .build()
        .unwrap();
    let observed = std::sync::atomic::AtomicUsize::new(0);
    let mut seen = Vec::new();
    let lease = std::thread::scope(|s| {
        s.spawn(|| {
            eventually(
                Duration::from_secs(30),
                "three observations by the waiter",
                || observed.load(std::sync::atomic::Ordering::SeqCst) >= 3,
            );
            holder.release("k", &held.token).unwrap();
        });
        l.acquire("k", &req, None, &mut |b| {
            seen.push(b.clone());
            observed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
        .unwrap()
    });
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0].waited < w[1].waited),
        "{seen:?}"
    );
    assert!(seen.iter().all(|b| b.holder.is_some()), "{seen:?}");
    // The holder's time left, not its TTL, and less at each look.
    let ttl = seen.last().unwrap().holder_ttl;
    assert!(ttl < Duration::from_secs(30), "{seen:?}");
    assert!(seen[0].holder_ttl > ttl, "{seen:?}");
    l.release("k", &lease.token).unwrap();
    r.assert_nothing_held(&[]);
}

/// A CI job: record that it ran, in `file`.
fn job(r: &Redis, name: &str, file: &std::path::Path, extra: &[&str]) -> Child {
    let line = format!("echo {name} >> {}", file.display());
    rlock(r)
        .args(["exec", "--supersede"])
        .args(extra)
        .args(["ci", "--", "sh", "-c", &line])
        .spawn()
}

/// A [`job`] that has joined the queue, the first waiter there.
fn first_queued_job(r: &Redis, name: &str, file: &std::path::Path, extra: &[&str]) -> Child {
    let child = job(r, name, file, extra);
    r.await_waiters("ci", 1);
    child
}

/// The jobs wrote `want` to `file`, and nothing is left held.
#[track_caller]
fn assert_ran(r: &Redis, file: &std::path::Path, want: &str) {
    assert_eq!(std::fs::read_to_string(file).unwrap(), want);
    r.assert_nothing_held(&[]);
}

/// Three jobs queue behind a running deploy: the deploy finishes, the
/// two older jobs are superseded (busy code, one line naming the newer),
/// only the newest runs, and nothing is left held.
#[test]
fn supersede_runs_only_the_newest_queued_job() {
    let r = Redis::start();
    let file = tmp_file("waiting", "newest");
    let running = format!("sleep 1.5; echo deploy >> {}", file.display());
    let deploy = rlock(&r)
        .args(["exec", "--supersede", "ci", "--", "sh", "-c", &running])
        .spawn();
    eventually(Duration::from_secs(5), "the deploy holds", || {
        r.status_json("ci")["held"] == true
    });
    let one = first_queued_job(&r, "one", &file, &[]);
    let two = job(&r, "two", &file, &[]);
    let (one_pid, two_pid) = (one.id(), two.id());
    let one = finish(one, "job one").fails_with_lines(75, "rlock: superseded by host ");
    assert!(
        one.stderr
            .contains(&format!("pid {two_pid}: a newer --supersede waiter")),
        "{}",
        one.stderr
    );
    let three = job(&r, "three", &file, &["-E", "3"]);
    let three_pid = three.id();
    let two = finish(two, "job two").fails_with_lines(75, "superseded by host");
    assert!(
        two.stderr.contains(&format!("pid {three_pid}")),
        "{}",
        two.stderr
    );
    assert!(!two.stderr.contains(&format!("pid {one_pid}:")));
    finish(deploy, "the deploy").ok();
    finish(three, "job three").ok();
    assert_ran(&r, &file, "deploy\nthree\n");
}

/// Waiters without --supersede keep their FIFO places; the superseded
/// job exits with its -E code.
#[test]
fn supersede_leaves_other_waiters_alone() {
    let r = Redis::start();
    let file = tmp_file("waiting", "fifo");
    let tok = hold(&r, "ci");
    let old = first_queued_job(&r, "old", &file, &["-E", "9"]);
    let line = format!("echo plain >> {}", file.display());
    let plain = rlock(&r)
        .args(["exec", "ci", "--", "sh", "-c", &line])
        .spawn();
    r.await_waiters("ci", 2);
    let new = job(&r, "new", &file, &[]);
    finish(old, "the old job").fails_with_lines(9, "superseded by host");
    assert_eq!(waiters(&r, "ci"), 2);
    release(&r, "ci", &tok);
    finish(plain, "the plain waiter").ok();
    finish(new, "the new job").ok();
    assert_ran(&r, &file, "plain\nnew\n");
}

/// -w: a superseding waiter still times out at its deadline, having
/// replaced the older one; -n and -w 0 never queue, so they are refused.
#[test]
fn supersede_with_wait_and_no_wait() {
    let r = Redis::start();
    let file = tmp_file("waiting", "wait");
    let tok = hold(&r, "ci");
    let old = first_queued_job(&r, "old", &file, &[]);
    let new = job(&r, "new", &file, &["-w", "1"]);
    finish(old, "the old job").fails_with_lines(75, "superseded by host");
    finish(new, "the new job").fails_with_lines(75, "timed out after ");
    assert_eq!(waiters(&r, "ci"), 0);
    rlock(&r)
        .args(["exec", "--supersede", "-n", "ci", "--", "true"])
        .run()
        .fails(64, "--supersede");
    rlock(&r)
        .args(["acquire", "--supersede", "-w", "0", "ci"])
        .run()
        .fails(64, "--supersede needs a wait");
    release(&r, "ci", &tok);
    assert!(!file.exists());
    r.assert_nothing_held(&[]);
}

#[test]
fn supersede_is_refused_with_redlock() {
    let masters: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let mut cmd = bare_rlock();
    for m in &masters {
        cmd = cmd.args(["--url", &m.url()]);
    }
    cmd.args(["exec", "--supersede", "ci", "--", "true"])
        .run()
        .fails(64, "--supersede needs one Redis");
    for m in &masters {
        m.assert_nothing_held(&[]);
    }
}

/// A superseded `acquire` (no command) prints no token and holds nothing.
#[test]
fn supersede_with_acquire() {
    let r = Redis::start();
    let tok = hold(&r, "ci");
    let old = rlock(&r).args(["acquire", "--supersede", "ci"]).spawn();
    r.await_waiters("ci", 1);
    let new = rlock(&r).args(["acquire", "--supersede", "ci"]).spawn();
    let old = finish(old, "the old acquire").fails_with_lines(75, "superseded by host");
    assert!(old.stdout.is_empty());
    release(&r, "ci", &tok);
    let new_tok = finish(new, "the new acquire").ok().token();
    release(&r, "ci", &new_tok);
    r.assert_nothing_held(&[]);
}

/// A --supersede waiter that lost its place (stopped past its waiter
/// lease) and finds a newer one queued is the older: it is superseded, not
/// the newer one. With -E 0 it says nothing (as busy does), unless -v.
#[test]
fn a_superseding_waiter_that_lost_its_place_yields_to_the_newer() {
    let r = Redis::start();
    let tok = hold(&r, "ci");
    // --ttl 1s: a 1 s waiter lease.
    let old = rlock(&r)
        .args(["acquire", "--supersede", "--ttl", "1s", "-E", "0", "ci"])
        .spawn();
    r.await_waiters("ci", 1);
    // SAFETY: plain syscall on our own child.
    unsafe { libc::kill(old.id() as i32, libc::SIGSTOP) };
    r.await_waiters("ci", 0);
    let new = rlock(&r).args(["acquire", "--supersede", "ci"]).spawn();
    r.await_waiters("ci", 1);
    // SAFETY: as above.
    unsafe { libc::kill(old.id() as i32, libc::SIGCONT) };
    let old = finish(old, "the old waiter").ok();
    assert!(old.stdout.is_empty(), "{}", old.stdout);
    assert!(!old.stderr.contains("superseded"), "{}", old.stderr);
    assert_eq!(waiters(&r, "ci"), 1, "the new waiter lost its place");
    release(&r, "ci", &tok);
    let tok = finish(new, "the new waiter").ok().token();
    release(&r, "ci", &tok);
    r.assert_nothing_held(&[]);
}

/// A background job (`cmd &` with job control) waiting on a terminal: no
/// live line redrawn every second over whatever the user types at the
/// prompt meanwhile, but the plain line, once.
#[test]
fn a_background_waiter_writes_the_plain_line_not_the_live_one() {
    let r = Redis::start();
    let tok = hold(&r, "k");
    // `set -m`: the shell puts its background job in a group of its own,
    // which is not the terminal's foreground group.
    let child = under_pty(
        &r,
        "sh -c 'set -m; $BIN exec k -- echo the-command-ran & wait'",
    );
    r.await_waiters("k", 1);
    // Long enough for a live line to be redrawn at least once.
    std::thread::sleep(Duration::from_millis(2200));
    release(&r, "k", &tok);
    let out = finish(child, "a background exec under a pty").ok().stdout;
    assert_eq!(out.matches("rlock: waiting").count(), 1, "{out:?}");
    assert!(
        out.contains("rlock: waiting for lock \"k\" held by "),
        "{out:?}"
    );
    assert!(!out.contains('\x1b'), "{out:?}");
    assert!(out.contains("the-command-ran"), "{out:?}");
    r.assert_nothing_held(&[]);
}

/// `rlock exec -w WAIT` of the lock set `keys`, running `true`: the one
/// place these tests spell a lock set on the command line.
fn exec_set(r: &Redis, wait: &str, keys: &[&str]) -> crate::util::Rlock {
    let mut args = vec!["exec", "-w", wait, keys[0]];
    for k in &keys[1..] {
        args.extend(["--and", k]);
    }
    args.extend(["--", "true"]);
    rlock(r).args(args)
}

/// Take `key` for 30 s from a shell that exits at once (so that it is
/// nobody's ancestor); its token.
fn hold_elsewhere(r: &Redis, key: &str) -> String {
    rlock(r)
        .args(["acquire", "--ttl", "30s", key])
        .by_another_process()
        .run()
        .ok()
        .token()
}

/// A set waits for its locks one at a time: each wait's line, and the
/// timeout, name the lock that is busy, not the first one of the set.
#[test]
fn a_set_names_the_lock_it_waits_for() {
    let r = Redis::shared();
    hold_elsewhere(&r, "zb");
    let pid = holder_pid(&r, "zb");
    let run = exec_set(&r, "1s", &["za", "zb"]).run().code(75);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{:?}", run.stderr);
    assert!(
        lines[0].starts_with(&format!(
            "rlock: waiting for lock \"zb\" held by host {} pid {pid} since ",
            hostname()
        )),
        "{:?}",
        run.stderr
    );
    assert!(
        lines[1].starts_with("rlock: timed out after ")
            && lines[1].contains("waiting for lock \"zb\""),
        "{:?}",
        run.stderr
    );
    // `acquire` of several keys: the same.
    let run = rlock(&r)
        .args(["acquire", "-w", "1s", "za", "zb"])
        .run()
        .code(75);
    assert!(
        run.stderr
            .starts_with("rlock: waiting for lock \"zb\" held by host "),
        "{:?}",
        run.stderr
    );
    assert!(!run.stderr.contains("\"za"), "{:?}", run.stderr);
    assert!(!r.held("za"), "the set's first lock was left held");
}

/// Each lock of a set that is busy in turn gets its own line.
#[test]
fn a_set_says_each_lock_it_waits_for_in_turn() {
    let r = Redis::shared();
    let a = hold_elsewhere(&r, "sa");
    let b = hold_elsewhere(&r, "sb");
    let child = exec_set(&r, "20s", &["sb", "sa"]).spawn();
    r.await_waiters("sa", 1);
    release(&r, "sa", &a);
    r.await_waiters("sb", 1);
    release(&r, "sb", &b);
    let run = finish(child, "exec of a set").ok();
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{:?}", run.stderr);
    assert!(
        lines[0].starts_with("rlock: waiting for lock \"sa\" held by host "),
        "{:?}",
        run.stderr
    );
    assert!(
        lines[1].starts_with("rlock: waiting for lock \"sb\" held by host "),
        "{:?}",
        run.stderr
    );
    r.assert_nothing_held(&[]);
}

/// A shell runs its last command in its own place (exec): the rlock that
/// waits then has the pid of the script that holds the lock. It says it
/// waits for itself, as for a holder that is one of its ancestors.
#[test]
fn a_script_whose_last_command_waits_for_its_own_lock_is_told() {
    let r = Redis::shared();
    let d = tmp_dir("waiting", "self-wait-in-place");
    let mut sh = crate::keep::script(
        &r,
        "bash",
        &d,
        "tok=$(\"$B\" acquire k) || exit 9
         echo \"$tok\" > \"$D/tok\"
         echo $$ > \"$D/pid\"
         \"$B\" exec -w 1s k -- true",
    );
    let (code, err) = crate::keep::finish_child(&mut sh);
    assert_eq!(code, Some(75), "{err}");
    let pid = read(&d.join("pid")).trim().to_string();
    let hint = err.lines().next().unwrap_or("");
    assert!(
        hint.starts_with("rlock: this script already holds lock \"k\" (acquired at 20")
            && hint.contains(&format!("by pid {pid}, "))
            && hint.contains("waits for itself")
            && hint.contains("RLOCK_TOKEN"),
        "{err}"
    );
    // Someone else's lock, held by a pid that is not ours: no hint.
    let mut sh = crate::keep::script(&r, "bash", &d, "\"$B\" exec -w 500ms k -- true");
    let (code, err) = crate::keep::finish_child(&mut sh);
    assert_eq!(code, Some(75), "{err}");
    assert!(!err.contains("waits for itself"), "{err}");
    release(&r, "k", read(&d.join("tok")).trim());
    r.assert_nothing_held(&[]);
}
