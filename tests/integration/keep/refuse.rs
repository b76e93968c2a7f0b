//! Where `--keep` cannot establish the script, it refuses (64, one line
//! naming the whole-script idiom) and nothing is held; where scripts use
//! it, it is not refused; and a loss never signals what the script
//! started before the grant (issue #29). Every case runs in a pid
//! namespace of its own.

use std::process::Output;

use super::*;

/// The idiom every refusal names.
const IDIOM: &str = "[ -n \"$RLOCK_HELD\" ] || exec rlock exec KEY -- \"$0\" \"$@\"";

/// Run `sh -c body` as pid 1 of a pid namespace of its own, with `$B`,
/// `$D` and `r`'s URL and prefix; it must exit 0.
#[track_caller]
fn in_ns(r: &Redis, d: &Path, body: &str) -> Output {
    let mut cmd = Command::new("unshare");
    for (k, _) in std::env::vars() {
        if k.starts_with("RLOCK_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .args(["--kill-child", "-fp", "--mount-proc", "sh", "-c", body])
        .env("B", env!("CARGO_BIN_EXE_rlock"))
        .env("D", d)
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

/// `$D/name` holds exit code 64 and `$D/name.err` one line that says
/// `why` and names the idiom.
#[track_caller]
fn refused(d: &Path, name: &str, why: &str) {
    let rc = read(&d.join(name));
    let err = read(&d.join(format!("{name}.err")));
    assert_eq!(rc.trim(), "64", "{name}: {err}");
    assert!(
        err.starts_with("rlock: --keep: ")
            && err.contains(why)
            && err.contains(IDIOM)
            && err.lines().count() == 1,
        "{name}: {err}"
    );
}

#[test]
fn a_script_of_another_user_is_refused() {
    // `runuser -u nobody -- rlock acquire k --keep` in a root script: the
    // keeper, as nobody, could not signal the script; a break let it run
    // on beside the next holder, and status said "SIGTERM sent".
    let have = Command::new("runuser")
        .args(["-u", "nobody", "--", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        eprintln!("skipped: needs root, runuser and the user nobody");
        return;
    }
    let r = Redis::shared();
    let d = tmp("refuse-user");
    // nobody writes nothing in $D: its stderr comes through root's shell.
    let body = r#"runuser -u nobody -- "$B" acquire ku --keep >/dev/null 2>"$D/user.err"
                  echo $? >"$D/user"
                  sleep 5 &
                  runuser -u nobody -- "$B" acquire kw --keep --keep-while $! >/dev/null 2>"$D/while.err"
                  echo $? >"$D/while"
                  kill $!
                  sleep 1.2"#;
    in_ns(&r, &d, body);
    refused(&d, "user", "runs as another user (uid 0)");
    let err = read(&d.join("while.err"));
    assert_eq!(read(&d.join("while")).trim(), "64", "{err}");
    assert!(err.contains("another user's process"), "{err}");
    r.assert_nothing_held(&[]);
}

#[test]
fn an_orphan_is_refused_though_it_leads_a_session() {
    // `setsid -f rlock acquire k --keep`, `( setsid rlock ... & )`: rlock,
    // in a session of its own, was re-parented to pid 1 (here the script
    // itself, as in a container): status showed pid 1 as the holder, the
    // lock was kept for as long as pid 1 lived, and a break SIGTERMed pid
    // 1 and what it ran.
    let r = Redis::shared();
    let d = tmp("refuse-orphan");
    // rlock starts once setsid (or the subshell) has surely exited: its
    // `sh -c` waits, then execs it.
    let body = r#"setsid -f sh -c 'sleep 0.3; exec "$B" acquire k1 --keep >/dev/null 2>"$D/f.err"'
                  ( setsid sh -c 'sleep 0.3; exec "$B" acquire k2 --keep >/dev/null 2>"$D/bg.err"' & )
                  for i in $(seq 200); do [ -s "$D/f.err" ] && [ -s "$D/bg.err" ] && break; sleep 0.05; done
                  sleep 1"#;
    in_ns(&r, &d, body);
    for name in ["f", "bg"] {
        let err = read(&d.join(format!("{name}.err")));
        assert!(
            err.contains("re-parented to pid 1") && err.contains(IDIOM) && err.lines().count() == 1,
            "{name}: {err}"
        );
    }
    assert!(!r.held("k1") && !r.held("k2"));
    r.assert_nothing_held(&[]);
}

#[test]
fn a_parent_that_exits_at_once_is_refused() {
    // `sh -c "rlock acquire k --keep"` (sh: dash) then `sleep 1.5`: acquire exited 0,
    // the keeper watched the sh, gone at once, and the lock was free while
    // the script went on. So too `find -exec` and `xargs`, which run a
    // command and move on. (`bash -c` and `busybox sh -c` exec rlock in
    // their own place, so its parent is the script: kept for it.)
    let r = Redis::shared();
    let d = tmp("refuse-exits");
    let bb = Command::new("busybox").arg("true").status().is_ok();
    let body = format!(
        r#"dash -c '"$B" acquire k1 --keep --ttl 2s' >/dev/null 2>"$D/sh.err"; echo $? >"$D/sh"
           dash -c 'cd /; tok=$("$B" acquire k2 --keep --ttl 2s)' 2>"$D/dash.err"; echo $? >"$D/dash"
           find "$D" -maxdepth 0 -exec "$B" acquire k3 --keep --ttl 2s ';' >/dev/null 2>"$D/find.err"
           echo 64 >"$D/find"
           echo k4 | xargs -I{{}} "$B" acquire {{}} --keep --ttl 2s >/dev/null 2>"$D/xargs.err"
           echo 64 >"$D/xargs"
           bash -c '"$B" acquire kb --keep --ttl 2s' >/dev/null || exit 7
           {}
           sleep 1.5
           "$B" status kb >"$D/kb" || exit 6"#,
        if bb {
            r#"busybox sh -c '"$B" acquire kx --keep --ttl 2s' >/dev/null || exit 5"#
        } else {
            ""
        }
    );
    in_ns(&r, &d, &body);
    refused(&d, "sh", "last command of `dash -c`");
    refused(&d, "dash", "last command of `dash -c`");
    refused(
        &d,
        "find",
        "(find), which is not a shell or script interpreter",
    );
    refused(
        &d,
        "xargs",
        "(xargs), which is not a shell or script interpreter",
    );
    // bash -c execs rlock: the script, still running, held kb.
    assert!(
        read(&d.join("kb")).contains("kb: held"),
        "{}",
        read(&d.join("kb"))
    );
    eventually(Duration::from_secs(5), "kb free after the script", || {
        !r.held("kb") && !r.held("kx")
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn scripts_that_use_keep_are_not_refused() {
    // The rules above against what scripts do: a `-c` string whose last
    // command is not rlock (GitLab's lines as one string), a subshell of
    // a `-c` shell, a Python script, `timeout`, `nohup`, a cron line
    // (`rlock acquire -n k --keep >/dev/null && job`, run by `sh -c`), an
    // `if rlock acquire ...; then job; fi`, and a
    // container's entrypoint script that is pid 1 and rlock's parent.
    // Each script but pid 1 runs in a group of its own (`setsid`, as a
    // runner or cron starts it; `timeout` makes its own): in pid 1's
    // group it is refused (below).
    let r = Redis::shared();
    let d = tmp("refuse-not");
    let py = Command::new("python3").arg("-c").arg("").status().is_ok();
    let body = format!(
        r#"hold() {{ "$B" status "$1" | head -1 >>"$D/held"; }}
           setsid -w bash -c '"$B" acquire c1 --keep --ttl 2s >/dev/null || exit 9
                    sleep 1.2; "$B" status c1 | head -1 >>"$D/held"' || exit 1
           setsid -w dash -c 'echo start; ( "$B" acquire c2 --keep --ttl 2s >/dev/null || exit 9
                    sleep 1.2; "$B" status c2 | head -1 >>"$D/held" )' >/dev/null || exit 2
           timeout 60 dash -c '"$B" acquire c3 --keep --ttl 2s >/dev/null || exit 9; sleep 1.2
                    "$B" status c3 | head -1 >>"$D/held"' || exit 3
           setsid -w nohup bash -c 'tok=$("$B" acquire c4 --keep --ttl 2s) || exit 9
                    sleep 1.2; "$B" status c4 | head -1 >>"$D/held"' >/dev/null 2>&1 || exit 4
           setsid -w dash -c '"$B" acquire -n c7 --keep --ttl 2s >/dev/null && sleep 1.2 &&
                    "$B" status c7 | head -1 >>"$D/held"' || exit 7
           setsid -w dash -c 'if "$B" acquire -n c8 --keep --ttl 2s >/dev/null; then sleep 1.2
                    "$B" status c8 | head -1 >>"$D/held"; fi' || exit 8
           {}
           tok=$("$B" acquire c6 --keep --ttl 2s) || exit 6
           sleep 1.2; hold c6"#,
        if py {
            r#"setsid -w python3 -c 'import subprocess, time, os
subprocess.run([os.environ["B"], "acquire", "c5", "--keep", "--ttl", "2s"], check=True, stdout=subprocess.DEVNULL)
time.sleep(1.2)
subprocess.run("\"$B\" status c5 | head -1 >>\"$D/held\"", shell=True)' || exit 5"#
        } else {
            ""
        }
    );
    let out = in_ns(&r, &d, &body);
    let held = read(&d.join("held"));
    let mut want = vec!["c1", "c2", "c3", "c4", "c7", "c8", "c6"];
    if py {
        want.insert(6, "c5");
    }
    let lines: Vec<&str> = held.lines().collect();
    let expected: Vec<String> = want.iter().map(|k| format!("{k}: held")).collect();
    assert_eq!(lines, expected, "{}", String::from_utf8_lossy(&out.stderr));
    // c6's holder, the namespace's pid 1, exited: the kernel killed its
    // keeper with it, so c6 ends with its TTL (2s).
    eventually(Duration::from_secs(6), "all free", || {
        want.iter().all(|k| !r.held(k))
    });
    r.assert_nothing_held(&[]);
}

#[test]
fn a_script_in_pid_1s_group_that_does_not_lead_it_is_refused() {
    // A container's init that runs the script without a group of its own
    // (here the namespace's pid 1, `bash s.sh` from a non-interactive
    // sh): the script's orphans (`( job & )`) go to pid 1, in the
    // script's group, and look like pid 1's own children; a loss, a break
    // or --max-hold left them running beside the next holder. Refused;
    // the same script in a group of its own (`setsid`) is kept for.
    let r = Redis::shared();
    let d = tmp("refuse-group");
    let body = r#"printf '%s\n' '"$B" acquire "k$1" --keep --ttl 30s >/dev/null 2>"$D/$1.err"' \
                         'echo $? >"$D/$1"; "$B" status "k$1" | head -1 >"$D/$1.held"' >"$D/s.sh"
                  bash "$D/s.sh" group
                  setsid -w bash "$D/s.sh" own
                  i=0
                  while { pgrep -x rlock-keeper || pgrep -x rl-keepguard; } >/dev/null && [ $i -lt 200 ]; do
                    i=$((i+1)); sleep 0.05
                  done"#;
    in_ns(&r, &d, body);
    refused(
        &d,
        "group",
        "does not lead its process group and pid 1, which adopts what the script leaves running",
    );
    assert!(
        read(&d.join("group.err")).contains("setsid"),
        "{}",
        read(&d.join("group.err"))
    );
    assert_eq!(
        read(&d.join("own")).trim(),
        "0",
        "{}",
        read(&d.join("own.err"))
    );
    assert_eq!(read(&d.join("own.held")).trim(), "kown: held");
    r.assert_nothing_held(&[]);
}

#[test]
fn a_loss_spares_what_the_script_started_just_before_the_grant() {
    // `sleep 300 & tok=$(rlock acquire k --keep --ttl 3s)`, then a break:
    // the sleep, started before the grant but often in the same 10 ms
    // clock tick as rlock, was taken for one started after it and killed
    // in 4 of 7 rounds. 20 rounds, each must leave it running.
    let r = Redis::shared();
    let d = tmp("refuse-before");
    let body = r#"for i in $(seq 20); do
          setsid -w bash -c 'sleep 300 & echo $! >"$D/sleep"
                   tok=$("$B" acquire kg --keep --ttl 3s --grace 1s) || exit 9
                   sleep 200 & echo $! >"$D/after"
                   echo held >"$D/held"; wait' &
          s=$!
          until [ -s "$D/held" ]; do sleep 0.02; done
          "$B" break kg --reason test --yes >/dev/null 2>&1 || exit 3
          wait $s
          j=0; while "$B" check kg >/dev/null 2>&1; do j=$((j+1)); [ $j -le 300 ] || exit 4; sleep 0.05; done
          sleep 0.1
          pre=$(cat "$D/sleep"); post=$(cat "$D/after")
          if kill -0 "$pre" 2>/dev/null; then echo alive >>"$D/pre"; else echo killed >>"$D/pre"; fi
          if kill -0 "$post" 2>/dev/null; then echo alive >>"$D/post"; else echo killed >>"$D/post"; fi
          kill "$pre" "$post" 2>/dev/null
          rm -f "$D/held" "$D/sleep" "$D/after"
        done"#;
    in_ns(&r, &d, body);
    let pre = read(&d.join("pre"));
    let post = read(&d.join("post"));
    assert_eq!(pre.lines().count(), 20, "{pre}");
    assert!(
        pre.lines().all(|l| l == "alive"),
        "the sleep started before the grant was killed: {pre}"
    );
    // What the script started after the grant was stopped every time.
    assert!(post.lines().all(|l| l == "killed"), "{post}");
    r.assert_nothing_held(&[&format!("{}:lost", r.key("kg"))]);
}
