//! How long the lock lives: as long as the script, freed when it is killed
//! or releases, and what the keeper does when the lock is lost or Redis
//! is gone.

use std::time::Instant;

use super::*;

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

#[test]
fn a_killed_script_frees_the_lock_at_once() {
    let r = Redis::shared();
    let d = tmp("killed");
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "tok=$(\"$B\" -v acquire k --keep --ttl 30s 2>\"$D/log\") || exit 9
         echo \"$$\" > \"$D/pid\"; sleep 60",
    );
    let pid: i32 = wait_line(&d, "pid").parse().unwrap();
    let keeper = keeper_pid(&d);
    assert!(r.held("k"));
    kill_in(&sh, pid, libc::SIGKILL);
    // Far sooner than the 30s TTL.
    eventually(
        Duration::from_secs(1),
        "the lock free after SIGKILL",
        || !r.held("k"),
    );
    eventually(Duration::from_secs(1), "the keeper gone", || {
        !alive_in(&sh, keeper)
    });
    let _ = sh.wait();
    r.assert_nothing_held(&[]);
}

#[test]
fn release_ends_the_keeper_and_signals_nobody() {
    let r = Redis::shared();
    let d = tmp("release");
    let mut sh = script_in_pid_namespace(
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
    eventually(Duration::from_secs(1), "the keeper gone", || {
        !alive_in(&sh, keeper)
    });
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
    let mut sh = script_in_pid_namespace(&r, "bash", &d, super::KEPT_UNTIL_SIGNALLED);
    let pid = wait_line(&d, "pid");
    let keeper = keeper_pid(&d);
    delete_lock(&r, "k");
    assert_eq!(wait_line(&d, "signalled"), "TERM");
    eventually(Duration::from_secs(1), "the keeper gone", || {
        !alive_in(&sh, keeper)
    });
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(5), "{}", out.1);
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
    let mut sh = script_in_pid_namespace(
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
    eventually(Duration::from_secs(3), "the keeper gone", || {
        !alive_in(&sh, keeper)
    });
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
    let mut sh = script_in_pid_namespace(
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
    eventually(Duration::from_secs(5), "the keeper gone", || {
        !alive_in(&sh, keeper)
    });
    let out = finish_child(&mut sh);
    assert_eq!(out.0, Some(5), "{}", out.1);
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
