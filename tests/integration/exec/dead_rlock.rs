//! rlock killed while its command runs: the guard kills the tree, and once
//! none of it is left, gives the lock back (hold/guard/release.rs), so it
//! passes on within a second or two instead of when the lease ends. Each
//! case runs in a pid namespace of its own (`unshare -fp --mount-proc`).

use super::*;

/// How long the lock may take to come free after the kill: generous for a
/// loaded machine, far below the 30 s TTL every case holds it with, so
/// that a lock nobody releases fails the test.
const FREED_WITHIN: Duration = Duration::from_secs(10);

/// A namespace running `body` (sh, with `$B` the binary, `$D` a fresh
/// directory, RLOCK_URL and RLOCK_PREFIX set). The body must write `$D/killed`
/// once it has killed what it kills, then wait for `$D/stop` (which
/// [`Namespace::stop`] creates); ending the namespace kills whatever is
/// left in it.
struct Namespace {
    child: std::process::Child,
    dir: PathBuf,
}

impl Namespace {
    fn start(r: &Redis, name: &str, body: &str) -> Namespace {
        let dir = tmp(name);
        let body = format!(
            "{body}\n\
             i=0; until [ -e \"$D/stop\" ]; do i=$((i+1)); [ $i -le 600 ] || exit 9; sleep 0.1; done"
        );
        let child = std::process::Command::new("unshare")
            .args(["-fp", "--mount-proc", "sh", "-c", &body])
            .env("B", env!("CARGO_BIN_EXE_rlock"))
            .env("D", &dir)
            .env("RLOCK_URL", r.url())
            .env("RLOCK_PREFIX", &r.prefix)
            .env_remove("RLOCK_TOKEN")
            .env_remove("RLOCK_HELD")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        Namespace { child, dir }
    }

    /// Wait until the body has killed (`$D/killed`); when.
    #[track_caller]
    fn killed(&mut self) -> Instant {
        eventually(Duration::from_secs(20), "the body's kill", || {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("the namespace's script ended first: {st}");
            }
            self.dir.join("killed").exists()
        });
        Instant::now()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// End the namespace; assert the body did not fail.
    #[track_caller]
    fn stop(mut self) {
        std::fs::write(self.dir.join("stop"), "").unwrap();
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        assert!(status.success(), "the namespace's script: {status}: {err}");
    }
}

/// Wait until `keys` are all free, at most [`FREED_WITHIN`] after `since`;
/// returns how long that took.
#[track_caller]
fn freed(r: &Redis, keys: &[&str], since: Instant) -> Duration {
    eventually(FREED_WITHIN, &format!("{keys:?} to come free"), || {
        keys.iter().all(|k| !r.held(k))
    });
    since.elapsed()
}

#[test]
fn kill_9_of_rlock_frees_the_lock_once_its_command_is_gone() {
    let r = Redis::shared();
    let mut ns = Namespace::start(
        &r,
        "dead-rlock",
        r#""$B" exec --ttl 30s k -- sh -c 'echo $$ >"$D/cmd"; exec sleep 100' &
        rl=$!
        i=0; until [ -s "$D/cmd" ]; do i=$((i+1)); [ $i -le 200 ] || exit 3; sleep 0.05; done
        kill -9 $rl
        touch "$D/killed"
        # The command is gone before the lock is.
        i=0; while kill -0 "$(cat "$D/cmd")" 2>/dev/null; do i=$((i+1)); [ $i -le 100 ] || exit 4; sleep 0.1; done
        touch "$D/cmd-gone""#,
    );
    let since = ns.killed();
    let took = freed(&r, &["k"], since);
    eventually(Duration::from_secs(10), "the command to be gone", || {
        ns.path("cmd-gone").exists()
    });
    ns.stop();
    eprintln!("freed {took:?} after the kill");
    r.assert_nothing_held(&[]);
}

#[test]
fn kill_9_of_rlock_after_its_command_ended_and_before_its_release_frees_the_lock() {
    // rlock is stopped while its command runs, the command ends (the guard
    // reaps it and reports the empty tree), then rlock is killed before it
    // could release: the guard, which stays until rlock's end closes, gives
    // the lock back (before, it had exited on reporting the empty tree,
    // and the lock waited for its lease).
    let r = Redis::shared();
    let mut ns = Namespace::start(
        &r,
        "dead-before-release",
        r#""$B" exec --ttl 30s k -- sh -c 'echo $$ >"$D/cmd"; until [ -e "$D/end" ]; do sleep 0.05; done' &
        rl=$!
        i=0; until [ -s "$D/cmd" ]; do i=$((i+1)); [ $i -le 200 ] || exit 3; sleep 0.05; done
        kill -STOP $rl
        touch "$D/end"
        i=0; while kill -0 "$(cat "$D/cmd")" 2>/dev/null; do i=$((i+1)); [ $i -le 100 ] || exit 4; sleep 0.1; done
        # The guard reaps the command at once and reports to the stopped rlock.
        sleep 0.5
        kill -9 $rl
        touch "$D/killed""#,
    );
    let since = ns.killed();
    let took = freed(&r, &["k"], since);
    ns.stop();
    eprintln!("freed {took:?} after the kill");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_killed_script_with_a_reentered_exec_frees_the_lock_well_before_its_lease() {
    // The issue's row: `export RLOCK_TOKEN=$(rlock acquire k --keep)`,
    // then `rlock exec k -- ...` (re-entering the kept hold), the script's
    // whole process group SIGKILLed. The keeper gives back its hold as its
    // script is gone; the exec's guard gives back the exec's.
    let r = Redis::shared();
    let mut ns = Namespace::start(
        &r,
        "dead-reentered",
        r#"cat >"$D/script" <<'EOS'
echo $$ >"$D/sid"
export RLOCK_TOKEN=$("$B" acquire k --keep --ttl 30s)
"$B" exec k -- sh -c 'echo $$ >"$D/cmd"; exec sleep 100'
EOS
        setsid sh "$D/script" &
        i=0; until [ -s "$D/cmd" ]; do i=$((i+1)); [ $i -le 200 ] || exit 3; sleep 0.05; done
        kill -9 -"$(cat "$D/sid")"
        touch "$D/killed""#,
    );
    eventually(Duration::from_secs(20), "the command to run", || {
        ns.path("cmd").exists()
    });
    let since = ns.killed();
    let took = freed(&r, &["k"], since);
    ns.stop();
    eprintln!("freed {took:?} after the kill");
    r.assert_nothing_held(&[]);
}

#[test]
fn kill_9_of_rlock_frees_every_lock_of_a_set() {
    let r = Redis::shared();
    let mut ns = Namespace::start(
        &r,
        "dead-set",
        r#""$B" exec --ttl 30s a --and b --and c -- sh -c 'echo $$ >"$D/cmd"; exec sleep 100' &
        rl=$!
        i=0; until [ -s "$D/cmd" ]; do i=$((i+1)); [ $i -le 200 ] || exit 3; sleep 0.05; done
        kill -9 $rl
        touch "$D/killed""#,
    );
    let since = ns.killed();
    let took = freed(&r, &["a", "b", "c"], since);
    ns.stop();
    eprintln!("freed {took:?} after the kill");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_killed_reentered_exec_gives_back_only_its_own_hold() {
    // The script and its keeper live on: the lock stays theirs (one
    // hold), only the killed exec's hold is given back.
    // (The script runs in a group of its own, `setsid`: in the group of
    // the namespace's pid 1, `--keep` refuses it.)
    let r = Redis::shared();
    let mut ns = Namespace::start(
        &r,
        "dead-inner",
        r#"cat >"$D/script" <<'EOS'
export RLOCK_TOKEN=$("$B" acquire k --keep --ttl 30s)
"$B" exec k -- sh -c 'echo $$ >"$D/cmd"; exec sleep 100' &
echo $! >"$D/exec"
sleep 100
EOS
        setsid -w sh "$D/script" &
        script=$!
        i=0; until [ -e "$D/go" ]; do i=$((i+1)); [ $i -le 600 ] || exit 3; sleep 0.05; done
        kill -9 "$(cat "$D/exec")"
        touch "$D/killed"
        i=0; while kill -0 "$(cat "$D/cmd")" 2>/dev/null; do i=$((i+1)); [ $i -le 100 ] || exit 4; sleep 0.1; done
        touch "$D/cmd-gone"
        # Then the script ends (killed): its keeper gives its hold back.
        i=0; until [ -e "$D/end" ]; do i=$((i+1)); [ $i -le 600 ] || exit 5; sleep 0.1; done
        # (Its `sleep 100` too: a kept lock covers what the script started.)
        pkill -9 -P $script; kill -9 $script
        i=0; while pgrep -x rlock-keeper >/dev/null; do i=$((i+1)); [ $i -le 100 ] || exit 6; sleep 0.1; done"#,
    );
    let holder = |r: &Redis| {
        let h = &r.status_json("k")["holders"][0];
        (h["count"].as_u64(), h["fence"].as_u64())
    };
    eventually(Duration::from_secs(20), "the exec's hold", || {
        ns.path("cmd").exists() && holder(&r).0 == Some(2)
    });
    let fence = holder(&r).1;
    // Killed only once seen holding (a kill at once could end the hold
    // before a loaded machine's status call looked).
    std::fs::write(ns.path("go"), "").unwrap();
    let since = ns.killed();
    eventually(FREED_WITHIN, "the exec's hold to be given back", || {
        holder(&r).0 == Some(1)
    });
    let took = since.elapsed();
    eventually(Duration::from_secs(10), "the command to be gone", || {
        ns.path("cmd-gone").exists()
    });
    // And it stays the script's, renewed by its keeper.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(holder(&r), (Some(1), fence), "{}", r.status_json("k"));
    std::fs::write(ns.path("end"), "").unwrap();
    eventually(FREED_WITHIN, "the keeper's release", || !r.held("k"));
    ns.stop();
    eprintln!("the exec's hold given back {took:?} after the kill");
    r.assert_nothing_held(&[]);
}

/// How soon a killed waiter's place (and what it held of a set) must be
/// given back: generous for a loaded machine, well below the 15 s waiter
/// lease that gave it back before (a holder that holds for a minute wakes
/// nobody, so no claim lapses sooner).
const GIVEN_UP_WITHIN: Duration = Duration::from_secs(5);

/// Waiters queued for `key`: `status`'s count, and the queue itself.
fn queued(r: &Redis, key: &str) -> (u64, u64) {
    let waiting = r.status_json(key)["waiting"].as_u64().unwrap_or(u64::MAX);
    let zset: u64 = r.cmd(&["ZCARD", &format!("{}:q", r.key(key))]);
    (waiting, zset)
}

/// The holder of `key` (`status`'s first): its count and fence.
fn first_holder(r: &Redis, key: &str) -> (Option<u64>, Option<u64>) {
    let h = &r.status_json(key)["holders"][0];
    (h["count"].as_u64(), h["fence"].as_u64())
}

/// A namespace whose body starts `cmd` (an rlock, `"$B"`) in the
/// background, waits for `$D/go`, SIGKILLs that rlock, and says so.
fn kill_waiter(r: &Redis, name: &str, cmd: &str) -> Namespace {
    Namespace::start(
        r,
        name,
        &format!(
            r#"{cmd} &
        rl=$!
        i=0; until [ -e "$D/go" ]; do i=$((i+1)); [ $i -le 600 ] || exit 3; sleep 0.05; done
        kill -9 $rl
        touch "$D/killed""#
        ),
    )
}

#[test]
fn kill_9_of_a_waiting_rlock_gives_its_place_back_at_once() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "60s", "k"])
        .run()
        .ok()
        .token();
    let fence = first_holder(&r, "k").1;
    let mut ns = kill_waiter(&r, "dead-waiter", r#""$B" exec --ttl 30s k -- true"#);
    r.await_waiters("k", 1);
    std::fs::write(ns.path("go"), "").unwrap();
    let since = ns.killed();
    eventually(GIVEN_UP_WITHIN, "the killed waiter's place to go", || {
        queued(&r, "k") == (0, 0)
    });
    let took = since.elapsed();
    // The holder still holds: only the place went.
    assert_eq!(first_holder(&r, "k"), (Some(1), fence));
    // Then the lock passes on at once: nobody dead is ahead in the queue
    // (-n: a place ahead would make it busy).
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    rlock(&r).args(["exec", "-n", "k", "--", "true"]).run().ok();
    ns.stop();
    eprintln!("place given up {took:?} after the kill");
    r.assert_nothing_held(&[]);
}

#[test]
fn kill_9_of_rlock_waiting_for_a_later_lock_of_a_set_frees_the_earlier_ones() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "--ttl", "60s", "b"])
        .run()
        .ok()
        .token();
    let mut ns = kill_waiter(
        &r,
        "dead-set-waiter",
        r#""$B" exec --ttl 30s a --and b -- true"#,
    );
    r.await_waiters("b", 1);
    assert!(r.held("a"), "a is taken before b is waited for");
    std::fs::write(ns.path("go"), "").unwrap();
    let since = ns.killed();
    eventually(GIVEN_UP_WITHIN, "a free and b's place gone", || {
        !r.held("a") && queued(&r, "b") == (0, 0)
    });
    let took = since.elapsed();
    assert!(r.held("b"), "b's holder lost it");
    rlock(&r).args(["release", "b", "--token", &tok]).run().ok();
    ns.stop();
    eprintln!("a freed {took:?} after the kill");
    r.assert_nothing_held(&[]);
}

#[test]
fn kill_9_of_a_reentered_exec_waiting_for_another_lock_keeps_the_parents_hold() {
    // The enclosing holder (the test, with the token) holds a; the exec
    // re-enters a with that token (count 2) and waits for b. Killed, it
    // gives up b's place, and never a's holds: they are its parent's.
    let r = Redis::shared();
    let parent = rlock(&r)
        .args(["acquire", "--ttl", "60s", "a"])
        .run()
        .ok()
        .token();
    let other = rlock(&r)
        .args(["acquire", "--ttl", "60s", "b"])
        .run()
        .ok()
        .token();
    let fence = first_holder(&r, "a").1;
    let mut ns = kill_waiter(
        &r,
        "dead-reentered-waiter",
        &format!(r#"RLOCK_TOKEN={parent} "$B" exec --ttl 30s a --and b -- true"#),
    );
    r.await_waiters("b", 1);
    assert_eq!(first_holder(&r, "a"), (Some(2), fence), "a re-entered");
    std::fs::write(ns.path("go"), "").unwrap();
    let since = ns.killed();
    eventually(GIVEN_UP_WITHIN, "b's place to go", || {
        queued(&r, "b") == (0, 0)
    });
    let took = since.elapsed();
    // Give a release of a's holds every chance to land: none may.
    std::thread::sleep(Duration::from_secs(2));
    let (count, still) = first_holder(&r, "a");
    assert!(
        count.is_some_and(|c| c >= 1) && still == fence,
        "the parent's hold of a was given back: {}",
        r.status_json("a")
    );
    let all = rlock::Release::holds(true, None).unwrap();
    for (key, t) in [("a", &parent), ("b", &other)] {
        let t = rlock::Token::parse(t).unwrap();
        r.locker().release_with(key, &t, &all).unwrap();
    }
    ns.stop();
    eprintln!("b's place given up {took:?} after the kill");
    r.assert_nothing_held(&[]);
}
