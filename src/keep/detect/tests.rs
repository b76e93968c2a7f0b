//! Caller detection on synthetic process tables.

use std::collections::HashMap;

use super::*;

/// One synthetic process.
#[derive(Clone, Default)]
struct P {
    ppid: Pid,
    pgid: Pid,
    sid: Pid,
    layout: (u64, u64),
    exe: &'static str,
    argv: Vec<&'static str>,
    comm: &'static str,
    /// Pipes it holds open for reading; None: unreadable.
    reads: Option<Vec<&'static str>>,
    /// Real and effective uid.
    uids: (u32, u32),
    /// kill(pid, 0) fails with EPERM.
    unsignallable: bool,
}

/// A table of processes; pid 100 is rlock.
struct Table {
    procs: HashMap<Pid, P>,
    stdout: Option<&'static str>,
    /// rlock's effective uid.
    uid: u32,
}

impl Procs for Table {
    fn me(&self) -> Pid {
        100
    }
    fn info(&self, pid: Pid) -> Option<Info> {
        self.procs.get(&pid).map(|p| Info {
            ppid: p.ppid,
            pgid: p.pgid,
            sid: p.sid,
            layout: p.layout,
        })
    }
    fn cmdline(&self, pid: Pid) -> Option<Vec<u8>> {
        let p = self.procs.get(&pid)?;
        let mut v = Vec::new();
        for a in &p.argv {
            v.extend_from_slice(a.as_bytes());
            v.push(0);
        }
        Some(v)
    }
    fn exe(&self, pid: Pid) -> Option<PathBuf> {
        self.procs.get(&pid).map(|p| PathBuf::from(p.exe))
    }
    fn comm(&self, pid: Pid) -> Option<String> {
        self.procs.get(&pid).map(|p| format!("{}\n", p.comm))
    }
    fn our_stdout_pipe(&self) -> Option<PathBuf> {
        self.stdout.map(PathBuf::from)
    }
    fn reads(&self, pid: Pid, pipe: &Path) -> Option<bool> {
        let r = self.procs.get(&pid)?.reads.as_ref()?;
        Some(r.iter().any(|x| Path::new(x) == pipe))
    }
    fn children(&self, pid: Pid) -> Vec<Pid> {
        let mut c: Vec<Pid> = self
            .procs
            .iter()
            .filter(|(_, p)| p.ppid == pid)
            .map(|(&k, _)| k)
            .collect();
        c.sort_unstable();
        c
    }
    fn uids(&self, pid: Pid) -> Option<(u32, u32)> {
        self.procs.get(&pid).map(|p| p.uids)
    }
    fn our_uid(&self) -> u32 {
        self.uid
    }
    fn may_signal(&self, pid: Pid) -> bool {
        self.procs.get(&pid).is_some_and(|p| !p.unsignallable)
    }
}

const RLOCK: [&str; 4] = ["rlock", "acquire", "k", "--keep"];

fn rlock(ppid: Pid) -> P {
    P {
        ppid,
        sid: 10,
        exe: "/usr/bin/rlock",
        argv: RLOCK.to_vec(),
        comm: "rlock",
        reads: Some(vec![]),
        ..P::default()
    }
}

/// The script: bash, pid 50, in session 10, under init.
fn script() -> P {
    P {
        ppid: 1,
        sid: 10,
        layout: (7, 8),
        exe: "/usr/bin/bash",
        argv: vec!["bash", "deploy.sh"],
        comm: "bash",
        reads: Some(vec![]),
        ..P::default()
    }
}

/// The script reading the $(...) pipe `pipe`, and its subshell: a
/// forked copy of it (to be pid 60) that reads nothing.
fn with_subshell(pipe: &'static str) -> (P, P) {
    let mut script = script();
    script.reads = Some(vec![pipe]);
    let sub = P {
        ppid: 50,
        reads: Some(vec![]),
        ..script.clone()
    };
    (script, sub)
}

/// `script` (50), its child `child` (60) running rlock (100), whose
/// stdout is `stdout`.
fn nested(script: P, child: P, stdout: Option<&'static str>) -> Table {
    table(vec![(50, script), (60, child), (100, rlock(60))], stdout)
}

fn table(procs: Vec<(Pid, P)>, stdout: Option<&'static str>) -> Table {
    Table {
        procs: procs.into_iter().collect(),
        stdout,
        uid: 0,
    }
}

/// (the script found, whether a pipeline was seen), checked usable.
fn decide(t: &Table) -> Result<(Pid, bool)> {
    let f = find(t).expect("found");
    usable(t, &f)?;
    Ok((f.pid, f.piped))
}

#[test]
fn a_plain_call_is_kept_for_its_parent() {
    let t = table(vec![(50, script()), (100, rlock(50))], None);
    assert_eq!(decide(&t).unwrap(), (50, false));
}

#[test]
fn command_substitution_that_stays_resolves_to_the_script() {
    // `tok=$(rlock acquire k --keep; echo)`: 60 is the subshell, a
    // forked copy of the script, which reads the $(...) pipe.
    let (script, sub) = with_subshell("pipe:[9]");
    let t = nested(script, sub, Some("pipe:[9]"));
    assert_eq!(decide(&t).unwrap(), (50, false));
}

#[test]
fn a_subshell_not_read_from_is_kept_for_itself() {
    // `( rlock acquire k --keep; ... )`, and its variant under a
    // script whose own stdout is that pipe's write end: the script
    // does not *read* it.
    let sub = P {
        ppid: 50,
        ..script()
    };
    let t = nested(script(), sub, Some("pipe:[9]"));
    assert_eq!(decide(&t).unwrap(), (60, false));
}

#[test]
fn a_new_run_of_the_same_program_is_no_subshell() {
    // `bash -c 'rlock ...'` from a bash script: same exe and (here)
    // command line, but another stack layout: a new program.
    let mut script = script();
    script.reads = Some(vec!["pipe:[9]"]);
    let inner = P {
        ppid: 50,
        layout: (3, 4),
        ..script.clone()
    };
    let t = nested(script, inner, Some("pipe:[9]"));
    assert_eq!(decide(&t).unwrap(), (60, false));
}

#[test]
fn wrappers_are_looked_through() {
    // `tok=$(timeout 60 nice rlock acquire k --keep)`.
    let wrap = |ppid, argv: Vec<&'static str>| P {
        ppid,
        sid: 10,
        exe: "/usr/bin/wrapper",
        argv,
        comm: "wrapper",
        reads: Some(vec![]),
        ..P::default()
    };
    let mut t1 = vec!["timeout", "60", "nice"];
    t1.extend(RLOCK);
    let mut t2 = vec!["nice"];
    t2.extend(RLOCK);
    let t = table(
        vec![
            (50, script()),
            (70, wrap(50, t1)),
            (80, wrap(70, t2)),
            (100, rlock(80)),
        ],
        None,
    );
    assert_eq!(decide(&t).unwrap(), (50, false));
    // A command line that merely ends in the same words is no
    // wrapper unless the words are whole arguments.
    let t = table(
        vec![
            (50, script()),
            (
                70,
                P {
                    exe: "/usr/bin/dash",
                    ..wrap(
                        50,
                        vec!["sh", "-c", "x", "xrlock", "acquire", "k", "--keep"],
                    )
                },
            ),
            (100, rlock(70)),
        ],
        None,
    );
    assert_eq!(decide(&t).unwrap(), (70, false));
}

#[test]
fn a_pipeline_in_a_subshell_is_seen() {
    // `tok=$(rlock acquire k --keep | tail -n1)`: the $(...) subshell
    // (60) runs rlock and tail; tail reads our stdout.
    let (script, sub) = with_subshell("pipe:[1]");
    let tail = P {
        ppid: 60,
        sid: 10,
        exe: "/usr/bin/tail",
        argv: vec!["tail", "-n1"],
        comm: "tail",
        reads: Some(vec!["pipe:[2]"]),
        ..P::default()
    };
    let t = table(
        vec![(50, script), (60, sub), (61, tail), (100, rlock(60))],
        Some("pipe:[2]"),
    );
    assert_eq!(decide(&t).unwrap(), (60, true));
}

#[test]
fn orphans_and_exec_guards_are_refused() {
    // Re-parented to the machine's init, in a session of its own.
    let init = P { sid: 1, ..script() };
    let t = table(vec![(1, init), (100, rlock(1))], None);
    assert!(decide(&t).is_err());
    // A container's pid 1 that is the script itself (one session): kept
    // for, as any script.
    let t = table(vec![(1, script()), (100, rlock(1))], None);
    assert_eq!(decide(&t).unwrap(), (1, false));
    // Re-parented to a subreaper of another session.
    let reaper = P {
        sid: 77,
        ..script()
    };
    let t = table(vec![(40, reaper), (100, rlock(40))], None);
    let e = decide(&t).unwrap_err().to_string();
    assert!(e.contains("re-parented to pid 40"), "{e}");
    // `setsid rlock ...`: a session of its own, its parent elsewhere.
    let mut own = rlock(50);
    own.sid = 100;
    let t = table(vec![(50, script()), (100, own)], None);
    assert_eq!(decide(&t).unwrap(), (50, false));
    // exec's guard (a fork of `rlock exec a -- rlock acquire ...`) is
    // neither looked through nor kept for: as it names itself, and with
    // the command line it had before, which ends like ours (where /proc
    // did not let it rewrite that).
    let mut forked = vec!["rlock", "exec", "a", "--"];
    forked.extend(RLOCK);
    for argv in [vec![crate::proctitle::EXEC_GUARD], forked] {
        let guard = P {
            ppid: 50,
            sid: 10,
            exe: "/usr/bin/rlock",
            argv,
            comm: crate::proctitle::EXEC_GUARD,
            reads: Some(vec![]),
            ..P::default()
        };
        let t = table(vec![(50, script()), (90, guard), (100, rlock(90))], None);
        let e = decide(&t).unwrap_err().to_string();
        assert!(e.contains("rlock exec's own command"), "{e}");
    }
}

#[test]
fn the_enclosing_exec_and_ancestry() {
    let guard = P {
        ppid: 50,
        sid: 10,
        exe: "/usr/bin/rlock",
        argv: vec![crate::proctitle::EXEC_GUARD],
        comm: crate::proctitle::EXEC_GUARD,
        reads: Some(vec![]),
        ..P::default()
    };
    let sh = P {
        ppid: 90,
        ..script()
    };
    let t = table(
        vec![(50, script()), (90, guard), (95, sh), (100, rlock(95))],
        None,
    );
    assert_eq!(enclosing_exec(&t), Some(90));
    assert!(descends_from(&t, 95, 90));
    assert!(!descends_from(&t, 50, 90));
    let t = table(vec![(50, script()), (100, rlock(50))], None);
    assert_eq!(enclosing_exec(&t), None);
}

#[test]
fn a_forked_copy_is_told_from_another_program() {
    let me = std::process::id() as libc::pid_t;
    // SAFETY: plain syscalls; the child only sleeps (async-signal-safe)
    // until it is killed.
    let child = unsafe {
        match libc::fork() {
            0 => loop {
                libc::pause();
            },
            pid => pid,
        }
    };
    assert!(child > 0);
    let copy = forked_copy(&Live, child, me);
    // SAFETY: plain syscalls on our own child.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
    }
    assert!(copy, "a forked child is a copy");
    // Our parent (cargo, or a shell) runs another program.
    // SAFETY: plain syscall.
    assert!(!forked_copy(&Live, me, unsafe { libc::getppid() }));
}

/// The refusal `decide` gives, which must name the whole-script idiom.
#[track_caller]
fn refused(t: &Table, needle: &str) {
    let e = decide(t).map(|f| f.0).unwrap_err().to_string();
    assert!(e.contains(needle), "{e}");
    assert!(e.contains("exec rlock exec KEY -- \"$0\" \"$@\""), "{e}");
}

#[test]
fn an_orphan_under_pid_1_is_refused_even_as_a_session_leader() {
    // `setsid -f rlock acquire k --keep`, `( setsid rlock ... & )`: setsid
    // (or the subshell) exited; rlock, leading a session of its own, was
    // re-parented to pid 1, whose session is another.
    let mut own = rlock(1);
    own.sid = 100;
    let t = table(vec![(1, script()), (100, own.clone())], None);
    refused(&t, "re-parented to pid 1");
    // The same under a container's pid 1 script: still another session.
    let mut init = script();
    init.sid = 1;
    let t = table(vec![(1, init), (100, own)], None);
    refused(&t, "re-parented to pid 1");
}

#[test]
fn a_script_in_pid_1s_group_that_does_not_lead_it_is_refused() {
    // A container's init (pid 1, group 1) that runs the script without a
    // group of its own: the script's orphans go to pid 1, in the script's
    // group, and look like pid 1's own children.
    let init = P {
        pgid: 1,
        sid: 10,
        ..script()
    };
    let s = P {
        pgid: 1,
        ..script()
    };
    let t = table(vec![(1, init.clone()), (50, s), (100, rlock(50))], None);
    refused(
        &t,
        "the script (pid 50) does not lead its process group and pid 1",
    );
    // A `( ... )` subshell of such a script: the same.
    let s = P {
        pgid: 1,
        ..script()
    };
    let sub = P {
        ppid: 50,
        ..s.clone()
    };
    let t = table(
        vec![(1, init.clone()), (50, s), (60, sub), (100, rlock(60))],
        None,
    );
    refused(&t, "the script (pid 60) does not lead its process group");
    // Both in a group joined outside this pid namespace (pgid 0 to us,
    // `unshare -fp sh -c script`): nothing tells the groups apart.
    let hidden = P { sid: 0, ..script() };
    let mut r = rlock(50);
    r.sid = 0;
    let t = table(vec![(1, hidden.clone()), (50, hidden), (100, r)], None);
    refused(&t, "does not lead its process group");
}

#[test]
fn a_script_that_leads_its_group_or_is_outside_pid_1s_is_kept() {
    let init = P {
        pgid: 1,
        sid: 1,
        ..script()
    };
    // Leads a group of its own (a runner that setsid()s or setpgid()s it,
    // an interactive shell, cron, `timeout`): the leader's rule.
    let leads = P {
        pgid: 50,
        sid: 50,
        ..script()
    };
    let mut r = rlock(50);
    r.sid = 50;
    let t = table(vec![(1, init.clone()), (50, leads), (100, r)], None);
    assert_eq!(decide(&t).unwrap(), (50, false));
    // In another's group (run by another script, a CI runner, `make`):
    // pid 1 is outside it, the orphan rule tells its orphans.
    let member = P {
        pgid: 40,
        ..script()
    };
    let t = table(
        vec![(1, init.clone()), (50, member), (100, rlock(50))],
        None,
    );
    assert_eq!(decide(&t).unwrap(), (50, false));
    // The script is pid 1 (a container's entrypoint), in a group hidden
    // from its namespace: what it leaves running is its own child.
    let t = table(vec![(1, script()), (100, rlock(1))], None);
    assert_eq!(decide(&t).unwrap(), (1, false));
}

#[test]
fn a_script_of_another_user_is_refused() {
    // `runuser -u nobody -- rlock acquire k --keep` in a root script:
    // rlock (uid 65534) could not signal it.
    let mut t = table(vec![(50, script()), (100, rlock(50))], None);
    t.uid = 65534;
    refused(&t, "another user (uid 0)");
    // Same uid, but kill(2) says no all the same.
    let mut s = script();
    s.uids = (65534, 65534);
    s.unsignallable = true;
    let mut t = table(vec![(50, s.clone()), (100, rlock(50))], None);
    t.uid = 65534;
    refused(&t, "another user");
    // Root may signal anyone; a user its own processes.
    let t = table(vec![(50, script()), (100, rlock(50))], None);
    assert_eq!(decide(&t).unwrap(), (50, false));
    s.unsignallable = false;
    let mut t = table(vec![(50, s), (100, rlock(50))], None);
    t.uid = 65534;
    assert_eq!(decide(&t).unwrap(), (50, false));
}

#[test]
fn a_parent_that_is_no_shell_or_interpreter_is_refused() {
    let prog = |exe, argv: Vec<&'static str>, comm| P {
        ppid: 50,
        sid: 10,
        exe,
        argv,
        comm,
        reads: Some(vec![]),
        ..P::default()
    };
    for (exe, argv, comm) in [
        (
            "/usr/bin/find",
            vec!["find", ".", "-exec", "rlock", "acquire", "k", "--keep", ";"],
            "find",
        ),
        ("/usr/bin/xargs", vec!["xargs", "rlock", "acquire"], "xargs"),
        // busybox's applets are told by their comm.
        (
            "/usr/bin/busybox",
            vec!["find", ".", "-exec", "rlock", "acquire", "k", "--keep", ";"],
            "find",
        ),
        (
            "/usr/lib/systemd/systemd",
            vec!["systemd", "--user"],
            "systemd",
        ),
    ] {
        let t = nested(script(), prog(exe, argv, comm), None);
        refused(&t, &format!("pid 60 ({comm}), which is not a shell"));
    }
    // Shells and interpreters are scripts.
    for (exe, argv, comm) in [
        ("/usr/bin/python3.11", vec!["python3", "job.py"], "python3"),
        ("/usr/bin/busybox", vec!["sh", "job"], "sh"),
        // `busybox sh job`: comm is busybox, the applet its argv[1].
        ("/usr/bin/busybox", vec!["busybox", "sh", "job"], "busybox"),
        ("/usr/bin/zsh", vec!["zsh", "job"], "zsh"),
    ] {
        let t = nested(script(), prog(exe, argv, comm), None);
        assert_eq!(decide(&t).unwrap(), (60, false), "{exe}");
    }
}

#[test]
fn a_shell_whose_command_string_ends_with_rlock_is_refused() {
    let sh = |argv: Vec<&'static str>| P {
        ppid: 50,
        sid: 10,
        layout: (3, 4),
        exe: "/usr/bin/dash",
        argv,
        comm: "sh",
        reads: Some(vec![]),
        ..P::default()
    };
    for argv in [
        vec!["sh", "-c", "rlock acquire k --keep"],
        vec![
            "bash",
            "-ec",
            "cd /srv && rlock acquire k --keep >/dev/null",
        ],
        vec!["sh", "-c", "cd /srv; tok=$(rlock acquire k --keep)"],
    ] {
        let t = table(vec![(50, script()), (60, sh(argv)), (100, rlock(60))], None);
        refused(&t, "last command of `dash -c` (pid 60)");
    }
    for argv in [
        vec!["sh", "-c", "rlock acquire k --keep; sleep 1.5"],
        vec!["sh", "-c", "rlock acquire k --keep || exit 1\n./deploy"],
        vec!["sh", "script.sh"],
    ] {
        let t = table(vec![(50, script()), (60, sh(argv)), (100, rlock(60))], None);
        assert_eq!(decide(&t).unwrap(), (60, false));
    }
    // A `( ... )` subshell of such a shell is kept for itself, as any
    // subshell: its lock ends with it.
    let mut outer = sh(vec!["sh", "-c", "echo; ( rlock acquire k --keep; job )"]);
    outer.ppid = 1;
    let sub = P {
        ppid: 50,
        ..outer.clone()
    };
    let t = table(vec![(50, outer), (60, sub), (100, rlock(60))], None);
    assert_eq!(decide(&t).unwrap(), (60, false));
}
