//! The script's exported token: re-entering, inside an exec of another
//! lock, waiting for its own lock, releasing inside an exec.

use super::*;

#[test]
fn the_script_re_enters_with_its_exported_token() {
    let r = Redis::shared();
    let d = tmp("reenter");
    let mut sh = script_in_pid_namespace(
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
    assert!(alive_in(&sh, keeper));
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
        let mut sh = script_in_pid_namespace(
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
    let mut sh = script_in_pid_namespace(
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
fn a_released_keep_inside_an_exec_leaves_the_execs_hold() {
    // Inside `rlock exec k`, a subshell's `acquire k --keep` re-enters
    // (count 2) and its keeper gives back one hold at the end. Released
    // early by the subshell (count 1: exec's hold), the keeper was told
    // "held" and went on; when the subshell ended it released exec's own
    // hold, freeing the lock while exec's command still ran.
    let r = Redis::shared();
    let d = tmp("keep-in-exec");
    let mut sh = script_in_pid_namespace(
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
