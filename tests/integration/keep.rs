//! `rlock acquire --keep`: a lock that lives as long as the script.
//!
//! Each test runs a real shell script that takes the lock with `--keep`;
//! `$B` is the rlock binary and `$D` a directory of the test's own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

pub fn tmp(name: &str) -> PathBuf {
    tmp_dir("keep", name)
}

/// Start `shell -c body` with `$B`, `$D`, RLOCK_URL and RLOCK_PREFIX set
/// (and no other RLOCK_* variable).
pub fn script(r: &Redis, shell: &str, dir: &Path, body: &str) -> Child {
    let mut cmd = Command::new(shell);
    for (k, _) in std::env::vars() {
        if k.starts_with("RLOCK_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(["-c", body])
        .env("B", env!("CARGO_BIN_EXE_rlock"))
        .env("D", dir)
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// What a script wrote to `$D/name`, once it has written a line.
#[track_caller]
pub fn wait_line(dir: &Path, name: &str) -> String {
    let f = dir.join(name);
    eventually(Duration::from_secs(10), name, || read(&f).ends_with('\n'));
    read(&f).trim().to_string()
}

/// The keeper's pid, from `rlock -v acquire --keep 2>$D/log`.
#[track_caller]
pub fn keeper_pid(dir: &Path) -> i32 {
    let log = dir.join("log");
    eventually(Duration::from_secs(10), "the keeper's pid", || {
        read(&log).contains("keeper pid ")
    });
    let text = read(&log);
    let after = text.split("keeper pid ").nth(1).unwrap();
    after.split_whitespace().next().unwrap().parse().unwrap()
}

/// Delete every key of lock `key` but its fencing counter, as an admin's
/// DEL would.
pub fn delete_lock(r: &Redis, key: &str) {
    let keys: Vec<String> = r.cmd(&["KEYS", &format!("{}*", r.key(key))]);
    for k in keys.iter().filter(|k| !k.ends_with(":fence")) {
        let _: i64 = r.cmd(&["DEL", k]);
    }
}

/// The pid the holder of `key` is recorded as (the watched process).
fn holder_pid(r: &Redis, key: &str) -> i64 {
    r.status_json(key)["holders"][0]["pid"]
        .as_i64()
        .unwrap_or(-1)
}

#[test]
fn the_lock_lives_as_long_as_the_script() {
    let r = Redis::shared();
    let d = tmp("lives");
    let mut sh = script(
        &r,
        "sh",
        &d,
        "tok=$(\"$B\" -v acquire k --keep --ttl 2s 2>\"$D/log\") || exit 9
         echo \"$$\" > \"$D/pid\"; sleep 7; exit 3",
    );
    let pid = wait_line(&d, "pid");
    let keeper = keeper_pid(&d);
    let started = Instant::now();
    // A rival that does not wait fails throughout, well past the 2s TTL.
    let mut rivals = 0;
    while started.elapsed() < Duration::from_millis(6200) {
        rlock(&r)
            .args(["acquire", "-n", "k"])
            .run()
            .fails(75, "busy");
        rivals += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(rivals >= 10, "{rivals}");
    // At about 6 s, held for the script (not for rlock, long gone).
    assert!(r.held("k"));
    assert_eq!(holder_pid(&r, "k").to_string(), pid);
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(3), "{}", out.1);
    eventually(
        Duration::from_secs(1),
        "the lock free after the script",
        || !r.held("k"),
    );
    eventually(Duration::from_secs(1), "the keeper gone", || !alive(keeper));
    r.assert_nothing_held(&[]);
}

/// Wait for a script: (exit code, stderr).
pub fn finish_child(c: &mut Child) -> (Option<i32>, String) {
    let st = c.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = c.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    (st.code(), err)
}

/// Let a script that waits for `$D/go` end.
fn go(dir: &Path) {
    std::fs::write(dir.join("go"), "").unwrap();
}

/// Wait for a script that must exit 0; `who` (its shell, where a test
/// runs several) prefixes its stderr in the failure.
#[track_caller]
fn exits_0(sh: &mut Child, who: &str) {
    let (code, err) = finish_child(sh);
    if who.is_empty() {
        assert_eq!(code, Some(0), "{err}");
    } else {
        assert_eq!(code, Some(0), "{who}: {err}");
    }
}

/// The end of most tests here: the script exits 0 ([`exits_0`]), and
/// `key` is free within `limit` after it, let go by its keeper.
#[track_caller]
fn exits_0_then_free(r: &Redis, sh: &mut Child, who: &str, key: &str, limit: Duration) {
    exits_0(sh, who);
    eventually(limit, "free after the script", || !r.held(key));
}

#[test]
fn a_killed_script_frees_the_lock_at_once() {
    let r = Redis::shared();
    let d = tmp("killed");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "tok=$(\"$B\" -v acquire k --keep --ttl 30s 2>\"$D/log\") || exit 9
         echo \"$$\" > \"$D/pid\"; sleep 60",
    );
    let pid: i32 = wait_line(&d, "pid").parse().unwrap();
    let keeper = keeper_pid(&d);
    assert!(r.held("k"));
    kill(pid, libc::SIGKILL);
    let _ = sh.wait();
    // Far sooner than the 30s TTL.
    eventually(
        Duration::from_secs(1),
        "the lock free after SIGKILL",
        || !r.held("k"),
    );
    eventually(Duration::from_secs(1), "the keeper gone", || !alive(keeper));
    r.assert_nothing_held(&[]);
}

#[test]
fn release_ends_the_keeper_and_signals_nobody() {
    let r = Redis::shared();
    let d = tmp("release");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "trap 'echo TERM >> \"$D/signalled\"' TERM
         tok=$(\"$B\" -v acquire k --keep --ttl 1s 2>\"$D/log\") || exit 9
         echo \"$tok\" > \"$D/tok\"
         while [ ! -e \"$D/go\" ]; do sleep 0.05; done
         \"$B\" release k --token \"$tok\" || exit 8
         echo released > \"$D/released\"
         sleep 3; exit 0",
    );
    wait_line(&d, "tok");
    let keeper = keeper_pid(&d);
    std::thread::sleep(Duration::from_millis(1500)); // renewed at least once
    assert!(r.held("k"));
    go(&d);
    wait_line(&d, "released");
    assert!(!r.held("k"));
    eventually(Duration::from_secs(1), "the keeper gone", || !alive(keeper));
    exits_0(&mut sh, "");
    assert_eq!(read(&d.join("signalled")), "", "the script was signalled");
    assert!(
        r.status_json("k").get("last_lost").is_none(),
        "{}",
        r.status_json("k")
    );
    r.assert_nothing_held(&[]);
}

#[test]
fn a_deleted_lock_makes_the_keeper_signal_the_script_and_status_shows_it() {
    let r = Redis::start();
    let d = tmp("deleted");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "trap 'echo TERM > \"$D/signalled\"; exit 5' TERM
         tok=$(\"$B\" -v acquire k --keep --ttl 1500ms 2>\"$D/log\") || exit 9
         echo \"$$\" > \"$D/pid\"
         sleep 30 & wait",
    );
    let pid = wait_line(&d, "pid");
    let keeper = keeper_pid(&d);
    delete_lock(&r, "k");
    assert_eq!(wait_line(&d, "signalled"), "TERM");
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(5), "{}", out.1);
    eventually(Duration::from_secs(1), "the keeper gone", || !alive(keeper));
    let st = r.status_json("k");
    let lost = &st["last_lost"];
    assert_eq!(lost["pid"].to_string(), pid, "{st}");
    assert!(lost["why"].as_str().unwrap().contains("deleted"), "{st}");
    assert!(lost["action"].as_str().unwrap().contains("SIGTERM"), "{st}");
    let text = rlock(&r).args(["status", "k"]).run().ok().stdout;
    assert!(text.contains("last lost: "), "{text}");
    // The record expires (an hour).
    let ttl: i64 = r.cmd(&["PTTL", "rlock:{k}:lost"]);
    assert!(ttl > 0 && ttl <= 3_600_000, "{ttl}");
    r.assert_nothing_held(&["rlock:{k}:lost"]);
}

#[test]
fn on_lost_ignore_only_records_the_loss() {
    let r = Redis::shared();
    let d = tmp("ignore");
    let mut sh = script(
        &r,
        "sh",
        &d,
        "trap 'echo TERM > \"$D/signalled\"; exit 5' TERM
         tok=$(\"$B\" -v acquire k --keep --on-lost ignore --ttl 1s 2>\"$D/log\") || exit 9
         echo \"$$\" > \"$D/pid\"
         while [ ! -e \"$D/go\" ]; do sleep 0.05; done; exit 0",
    );
    wait_line(&d, "pid");
    let keeper = keeper_pid(&d);
    delete_lock(&r, "k");
    eventually(Duration::from_secs(3), "the keeper gone", || !alive(keeper));
    let st = r.status_json("k");
    assert!(
        st["last_lost"]["action"]
            .as_str()
            .unwrap()
            .contains("ignore"),
        "{st}"
    );
    go(&d);
    exits_0(&mut sh, "");
    assert_eq!(read(&d.join("signalled")), "");
}

#[test]
fn the_keeper_gives_up_when_redis_is_gone_longer_than_the_lease() {
    let r = Redis::start();
    let d = tmp("redis-gone");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "trap 'echo TERM > \"$D/signalled\"; exit 5' TERM
         tok=$(\"$B\" -v --connect-timeout 300ms acquire k --keep --ttl 1s 2>\"$D/log\") || exit 9
         echo \"$$\" > \"$D/pid\"
         sleep 60 & wait",
    );
    wait_line(&d, "pid");
    let keeper = keeper_pid(&d);
    kill(r.child_pid(), libc::SIGKILL);
    // The lease (1s) ends unrenewed: the keeper applies --on-lost and exits.
    assert_eq!(wait_line(&d, "signalled"), "TERM");
    eventually(Duration::from_secs(5), "the keeper gone", || !alive(keeper));
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(5), "{}", out.1);
}

#[test]
fn command_substitution_resolves_to_the_script_in_bash_and_dash() {
    let r = Redis::shared();
    for shell in ["bash", "dash"] {
        // Plain, and with a subshell that stays (it exits at once).
        for (n, subst) in [
            "$(\"$B\" acquire KEY --keep --ttl 1s)",
            "$(\"$B\" acquire KEY --keep --ttl 1s; echo)",
        ]
        .iter()
        .enumerate()
        {
            let key = format!("{shell}-{n}");
            let d = tmp(&key);
            let body = format!(
                "tok={} || exit 9
                 echo \"$$\" > \"$D/pid\"
                 while [ ! -e \"$D/go\" ]; do sleep 0.05; done",
                subst.replace("KEY", &key)
            );
            let mut sh = script(&r, shell, &d, &body);
            let pid = wait_line(&d, "pid");
            // Past the subshell's exit and more than a TTL.
            std::thread::sleep(Duration::from_millis(1500));
            assert!(r.held(&key), "{shell} {subst}");
            assert_eq!(holder_pid(&r, &key).to_string(), pid, "{shell} {subst}");
            go(&d);
            let _ = sh.wait();
            eventually(Duration::from_secs(1), "free after the script", || {
                !r.held(&key)
            });
        }
    }
    r.assert_nothing_held(&[]);
}

#[test]
fn a_subshell_keeps_the_lock_until_the_subshell_ends() {
    // flock's `( flock -n 9 || exit 1; ... ) 9>f`: the lock ends with the
    // subshell, not with the script, though a `( ... )` subshell is a
    // forked copy of the script as a `$(...; echo)` one is. Also through
    // a pipe (`( ... ) | cat`), and a `$(...)` inside a subshell.
    let r = Redis::shared();
    for shell in ["bash", "dash"] {
        let d = tmp(&format!("subshell-{shell}"));
        let body = "( \"$B\" acquire -n a --keep >/dev/null || exit 1
                      echo \"$(\"$B\" status a | head -1)\" > \"$D/in-a\" )
                    ( \"$B\" acquire -n b --keep || exit 1 ) | cat >/dev/null
                    ( t=$(\"$B\" acquire -n c --keep; echo) || exit 1 )
                    echo \"$$\" > \"$D/pid\"
                    while [ ! -e \"$D/go\" ]; do sleep 0.05; done";
        let mut sh = script(&r, shell, &d, body);
        wait_line(&d, "pid");
        assert!(read(&d.join("in-a")).contains("held"), "{shell}");
        for key in ["a", "b", "c"] {
            eventually(
                Duration::from_secs(2),
                &format!("{shell}: {key} free once its subshell ended"),
                || !r.held(key),
            );
        }
        go(&d);
        exits_0(&mut sh, shell);
    }
    r.assert_nothing_held(&[]);
}

#[test]
fn keep_while_watches_the_process_named() {
    let r = Redis::shared();
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id().to_string();
    rlock(&r)
        .args([
            "acquire",
            "k",
            "--keep",
            "--ttl",
            "1s",
            "--keep-while",
            &pid,
        ])
        .run()
        .ok()
        .token();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(r.held("k"));
    assert_eq!(holder_pid(&r, "k").to_string(), pid);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    eventually(Duration::from_secs(1), "free after the process", || {
        !r.held("k")
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn bad_keep_input_is_refused_and_nothing_is_held() {
    let r = Redis::shared();
    // Beyond any pid_max: no such process.
    rlock(&r)
        .args(["acquire", "k", "--keep", "--keep-while", "2147483647"])
        .run()
        .fails(64, "no such process");
    let gone = {
        let mut c = Command::new("true").spawn().unwrap();
        c.wait().unwrap();
        c.id().to_string()
    };
    rlock(&r)
        .args(["acquire", "k", "--keep", "--keep-while", &gone])
        .run()
        .fails(64, "no such process");
    for (args, needle) in [
        (&["acquire", "k", "--keep-while", "1"][..], "--keep"),
        (&["acquire", "k", "--on-lost", "kill"][..], "--keep"),
        (&["acquire", "k", "--keep", "--keep-while", "0"][..], "0"),
        (&["acquire", "k", "--keep", "--keep-while", "x"][..], "x"),
        (
            &["acquire", "k", "--keep", "--on-lost", "maybe"][..],
            "maybe",
        ),
        (&["release", "k", "--keep"][..], "--keep"),
    ] {
        rlock(&r).args(args).run().fails(64, needle);
    }
    // As exec's command itself: the guard would wait for the keeper, the
    // keeper for the guard.
    let bin = env!("CARGO_BIN_EXE_rlock");
    rlock(&r)
        .args(["exec", "outer", "--", bin, "acquire", "k", "--keep"])
        .run()
        .fails(64, "no script");
    // The keeper's internal entry, typed by hand (stdin not its settings).
    let typed = Command::new(bin)
        .arg("__keep")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(typed.status.code(), Some(64));
    let err = String::from_utf8_lossy(&typed.stderr);
    assert!(
        err.starts_with("rlock: `__keep` is internal") && err.lines().count() == 1,
        "{err}"
    );
    r.assert_nothing_held(&[]);
}

#[test]
fn the_script_re_enters_with_its_exported_token() {
    let r = Redis::shared();
    let d = tmp("reenter");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "export RLOCK_TOKEN=$(\"$B\" -v acquire k --keep --ttl 1s 2>\"$D/log\") || exit 9
         # Without re-entry each of these would wait for the script itself.
         \"$B\" exec -w 3s k -- true || exit 1
         t=$(\"$B\" acquire -w 3s k) || exit 2
         [ \"$t\" = \"$RLOCK_TOKEN\" ] || exit 3
         \"$B\" release k || exit 4   # the inner hold: still held
         echo ok > \"$D/ok\"
         while [ ! -e \"$D/go\" ]; do sleep 0.05; done",
    );
    wait_line(&d, "ok");
    let keeper = keeper_pid(&d);
    // The inner release left the keeper, and the lock, in place.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(r.held("k"));
    assert!(alive(keeper));
    go(&d);
    exits_0_then_free(&r, &mut sh, "", "k", Duration::from_secs(1));
    r.assert_nothing_held(&[]);
}

#[test]
fn the_exported_token_re_enters_inside_an_exec_of_another_lock() {
    // exec b sets RLOCK_TOKEN to b's token for its command; the script's
    // own export must still reach a nested `rlock exec k` / `acquire k`,
    // else they wait for the script itself (here: time out, exit 75).
    let r = Redis::shared();
    let d = tmp("reenter-through");
    for shell in ["bash", "dash"] {
        let mut sh = script(
            &r,
            shell,
            &d,
            "export RLOCK_TOKEN=$(\"$B\" acquire k --keep) || exit 9
             \"$B\" exec -w 2s b -- \"$B\" exec -w 2s k -- true || exit 1
             \"$B\" exec -w 2s b -- \"$B\" exec -w 2s c -- \"$B\" exec -w 2s k -- true || exit 2
             \"$B\" exec -w 2s b -- sh -c '\"$B\" release k --token $(\"$B\" acquire -w 2s k)' || exit 3",
        );
        exits_0_then_free(&r, &mut sh, shell, "k", Duration::from_secs(2));
    }
    r.assert_nothing_held(&[]);
}

#[test]
fn waiting_for_the_scripts_own_lock_says_so() {
    // The token not exported: the nested exec waits for the script that
    // started it. It still waits as asked, but says why and what to do.
    let r = Redis::shared();
    let d = tmp("self-wait");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "tok=$(\"$B\" acquire k --keep) || exit 9
         \"$B\" exec -w 500ms k -- true 2>\"$D/err\"; echo $? > \"$D/rc\"
         \"$B\" exec -w 500ms other -- true 2>\"$D/err2\" || exit 1",
    );
    exits_0(&mut sh, "");
    assert_eq!(read(&d.join("rc")).trim(), "75");
    let err = read(&d.join("err"));
    assert!(
        err.contains("waits for itself") && err.contains("RLOCK_TOKEN"),
        "{err}"
    );
    // A lock held by someone else (a script that has ended): no such hint.
    // (Taken by this test process itself, the lock would name it as its
    // holder: a wait of its own would then rightly wait for itself.)
    let _holder = Command::new("sh")
        .args(["-c", "\"$0\" acquire busy --ttl 5s >/dev/null"])
        .arg(env!("CARGO_BIN_EXE_rlock"))
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .status()
        .unwrap();
    let run = rlock(&r)
        .args(["exec", "-w", "300ms", "busy", "--", "true"])
        .run();
    assert!(!run.stderr.contains("itself"), "{}", run.stderr);
    assert_eq!(read(&d.join("err2")), "");
}

#[test]
fn a_loss_found_after_the_process_exited_signals_nobody_else() {
    // The watched process exits while a renewal is on its way, and its
    // pid goes to another process; the renewal then finds the lock
    // deleted. The keeper signalled the pid (a pidfd does not hold the
    // number): the new process got the SIGTERM. The renewal is held back
    // with CLIENT PAUSE behind the admin's DEL; the pid is reused through
    // ns_last_pid (root only), retried if another process took it first.
    if !can_set_next_pid() {
        eprintln!("skipped: {NS_LAST_PID} is not writable");
        return;
    }
    let r = Redis::start();
    for attempt in 0.. {
        let mut watched = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = watched.id();
        let pid_arg = pid.to_string();
        rlock(&r)
            .args([
                "acquire",
                "k",
                "--keep",
                "--ttl",
                "3s",
                "--keep-while",
                &pid_arg,
            ])
            .run()
            .ok();
        // Renewals are every second: the next one queues behind the DEL.
        std::thread::sleep(Duration::from_millis(300));
        let keys: Vec<String> = r.cmd(&["KEYS", &format!("{}*", r.key("k"))]);
        let mut del = vec!["DEL"];
        del.extend(
            keys.iter()
                .filter(|k| !k.ends_with(":fence"))
                .map(String::as_str),
        );
        let _: () = r.cmd(&["CLIENT", "PAUSE", "1500", "WRITE"]);
        let reused = std::thread::scope(|s| {
            s.spawn(|| {
                let _: i64 = r.cmd(&del);
            });
            std::thread::sleep(Duration::from_millis(1200));
            watched.kill().unwrap();
            watched.wait().unwrap();
            std::fs::write(NS_LAST_PID, (pid - 1).to_string()).unwrap();
            let mut other = Command::new("sleep").arg("60").spawn().unwrap();
            // Past the pause: the renewal has found the lock gone.
            std::thread::sleep(Duration::from_secs(2));
            let status = other.try_wait().unwrap();
            let _ = other.kill();
            let _ = other.wait();
            (other.id() == pid).then_some(status)
        });
        let Some(status) = reused else {
            assert!(attempt < 10, "the watched pid was never reused");
            continue;
        };
        assert_eq!(status, None, "the keeper signalled another process");
        let st = r.status_json("k");
        let action = st["last_lost"]["action"].as_str().unwrap_or("");
        assert!(action.contains("exited"), "{st}");
        break;
    }
    r.assert_nothing_held(&["rlock:{k}:lost"]);
}

#[test]
fn a_release_of_another_key_with_the_token_leaves_the_keeper_keeping() {
    // The keeper's socket is named after the token alone: a release of
    // another lock with that token (a typo, or `rlock release other` with
    // the keep's token exported in RLOCK_TOKEN) reached it, found nothing
    // to release, and told it "released": the keeper exited without a
    // release, and the lock expired under the still running script.
    let r = Redis::shared();
    let d = tmp("release-other");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "export RLOCK_TOKEN=$(\"$B\" -v acquire k --keep --ttl 1s 2>\"$D/log\") || exit 9
         \"$B\" release other || exit 8      # holds nothing: harmless
         \"$B\" release other2 --token \"$RLOCK_TOKEN\" || exit 7
         echo ok > \"$D/ok\"
         while [ ! -e \"$D/go\" ]; do sleep 0.05; done",
    );
    wait_line(&d, "ok");
    let keeper = keeper_pid(&d);
    // Well past the 1s TTL: still kept.
    std::thread::sleep(Duration::from_millis(3000));
    let (held, kept) = (r.held("k"), alive(keeper));
    go(&d);
    exits_0_then_free(&r, &mut sh, "", "k", Duration::from_secs(2));
    assert!(held, "the lock expired under the script");
    assert!(kept, "the keeper exited");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_released_keep_inside_an_exec_leaves_the_execs_hold() {
    // Inside `rlock exec k`, a subshell's `acquire k --keep` re-enters
    // (count 2) and its keeper gives back one hold at the end. Released
    // early by the subshell (count 1: exec's hold), the keeper was told
    // "held" and went on; when the subshell ended it released exec's own
    // hold, freeing the lock while exec's command still ran.
    let r = Redis::shared();
    let d = tmp("keep-in-exec");
    let mut sh = script(
        &r,
        "bash",
        &d,
        "\"$B\" exec k -- bash -c '
           ( \"$B\" acquire k --keep >/dev/null || exit 9
             \"$B\" release k || exit 8 ) || exit $?
           sleep 2
           \"$B\" check k; echo $? > \"$D/check\"'",
    );
    let out = finish_child(&mut sh);
    assert_eq!(read(&d.join("check")).trim(), "0", "{}", out.1);
    assert_eq!(out.0, Some(0), "{}", out.1);
    r.assert_nothing_held(&[]);
}

#[test]
fn a_subshell_printing_to_the_scripts_pipe_keeps_the_lock_for_itself() {
    // The script's stdout is a pipe (`script | logger`, a CI runner; here
    // the test's): a `( ... )` subshell's rlock prints its token into that
    // pipe, whose write end the script holds as its stdout. That was taken
    // for the script reading rlock's output, as in `$(...)`, and the
    // script was watched: the lock outlived the subshell.
    let r = Redis::shared();
    for shell in ["bash", "dash"] {
        let d = tmp(&format!("subshell-pipe-{shell}"));
        let body = "( \"$B\" acquire -n a --keep || exit 1; echo \"$$\" > \"$D/in\" ) || exit 1
                    echo \"$$\" > \"$D/pid\"
                    while [ ! -e \"$D/go\" ]; do sleep 0.05; done";
        let mut sh = script(&r, shell, &d, body);
        wait_line(&d, "pid");
        let freed = {
            let limit = Instant::now() + Duration::from_secs(3);
            while r.held("a") && Instant::now() < limit {
                std::thread::sleep(Duration::from_millis(50));
            }
            !r.held("a")
        };
        go(&d);
        exits_0_then_free(&r, &mut sh, shell, "a", Duration::from_secs(2));
        assert!(freed, "{shell}: a still held after its subshell ended");
    }
    r.assert_nothing_held(&[]);
}
