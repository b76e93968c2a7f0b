//! Which process the lock is kept for: command substitutions in bash and
//! dash, subshells, `--keep-while`; and bad `--keep` input.

use std::time::Instant;

use super::*;

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
            let mut sh = script_in_pid_namespace(&r, shell, &d, &body);
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
        let mut sh = script_in_pid_namespace(&r, shell, &d, body);
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
    // In a PID namespace of its own: the script starts the process to
    // watch, names it, and kills it when told.
    let r = Redis::shared();
    let d = tmp("keep-while");
    let mut sh = script_in_pid_namespace(
        &r,
        "bash",
        &d,
        "sleep 60 & s=$!
         \"$B\" acquire k --keep --ttl 1s --keep-while $s >/dev/null || exit 9
         echo $s > \"$D/pid\"
         while [ ! -e \"$D/go\" ]; do sleep 0.05; done
         kill $s; wait $s
         while [ ! -e \"$D/done\" ]; do sleep 0.05; done",
    );
    let pid = wait_line(&d, "pid");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(r.held("k"));
    assert_eq!(holder_pid(&r, "k").to_string(), pid);
    go(&d);
    eventually(Duration::from_secs(2), "free after the process", || {
        !r.held("k")
    });
    // The script still runs: the lock went with the process named.
    std::fs::write(d.join("done"), "").unwrap();
    exits_0(&mut sh, "bash");
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
        let mut sh = script_in_pid_namespace(&r, shell, &d, body);
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
        // --grace is keep's (and exec's); a duration needs a unit.
        (&["acquire", "k", "--grace", "1s"][..], "--keep"),
        (&["acquire", "k", "--keep", "--grace", "5"][..], "5"),
        (&["acquire", "k", "--keep", "--grace", "soon"][..], "soon"),
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
