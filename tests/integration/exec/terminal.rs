//! Interactive use: a pseudo-terminal, job control, Ctrl-C and Ctrl-Z,
//! the terminal handed back.

use super::*;

/// A shell command line run under a pseudo-terminal, as from an
/// interactive shell: script(1) gives it a pty as its controlling
/// terminal, and what the test types reaches it through script's stdin.
/// `$BIN` is the rlock binary. The one set-up of every test here.
struct Pty(std::process::Child);

impl Pty {
    fn run(r: &Redis, inner: &str) -> Pty {
        let child = std::process::Command::new("script")
            .args(["-qec", inner, "/dev/null"])
            .env("RLOCK_URL", r.url())
            .env("RLOCK_PREFIX", &r.prefix)
            .env("BIN", env!("CARGO_BIN_EXE_rlock"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Pty(child)
    }

    /// A real interactive bash (no rc files), to type command lines at.
    fn bash(r: &Redis) -> Pty {
        Pty::run(r, "bash --norc --noprofile -i")
    }

    /// Type `text` at the terminal.
    fn say(&mut self, text: impl AsRef<[u8]>) {
        use std::io::Write;
        let stdin = self.0.stdin.as_mut().unwrap();
        stdin.write_all(text.as_ref()).unwrap();
        stdin.flush().unwrap();
    }

    /// The shell's `$?` (the status of the job it ran last), through
    /// `echo $? > file`.
    #[track_caller]
    fn status(&mut self, file: &Path) -> String {
        self.say(format!("echo $? > {}\n", file.display()));
        await_written(file, Duration::from_secs(10), "the exit code");
        read(file).trim().to_string()
    }

    /// Type Ctrl-Z, and wait for `pid` (rlock, whose job it stops) to
    /// stop.
    #[track_caller]
    fn ctrl_z(&mut self, pid: i32, what: &str) {
        self.say("\x1a");
        eventually(Duration::from_secs(20), what, || stopped(pid));
    }

    /// Type `exit` at the shell, and wait for it to end.
    fn exit(mut self) {
        self.say("exit\n");
        self.wait();
    }

    fn wait(mut self) {
        self.0.wait().unwrap();
    }
}

#[test]
fn interactive_command_owns_the_terminal_in_its_own_group() {
    let r = Redis::shared();
    let [out] = paths("tty", ["out"]);
    // The command: its group is its own, and is the terminal's foreground.
    let inner = format!(
        "$BIN exec k -- sh -c 'set -- $(cut -d\")\" -f2 /proc/$$/stat); \
         echo \"$$ $3 $6\" > {o}'; echo $? >> {o}",
        o = out.display()
    );
    let child = Pty::run(&r, &inner);
    child.wait();
    let got = read(&out);
    let mut l = got.lines();
    let f: Vec<&str> = l.next().unwrap_or("").split(' ').collect();
    assert_eq!(f.len(), 3, "{got:?}");
    assert_eq!(
        f[0], f[1],
        "the command is not its own group's leader: {got:?}"
    );
    assert_eq!(
        f[1], f[2],
        "the command's group is not the terminal's foreground: {got:?}"
    );
    assert_eq!(l.next(), Some("0"), "{got:?}");
    r.assert_nothing_held(&[]);
}

#[test]
fn interactive_loss_stops_grandchildren_too() {
    // A grandchild under a terminal writes nothing more once the lock is
    // lost and rlock has exited 79 (issue 10, item 1).
    let r = Redis::shared();
    let [ticks, code] = paths("tty-loss", ["ticks", "code"]);
    let inner = format!(
        "$BIN exec --ttl 3s k -- sh -c 'sh -c \"for i in \\$(seq 50); do echo tick >> {t}; sleep 0.1; done\"'; echo $? > {c}",
        t = ticks.display(),
        c = code.display()
    );
    let child = Pty::run(&r, &inner);
    eventually(Duration::from_secs(10), "ticks", || lines(&ticks) >= 3);
    delete_lock(&r, "k");
    await_written(&code, Duration::from_secs(10), "rlock to exit");
    assert_eq!(read(&code).trim(), "79");
    assert_no_more_lines(
        &ticks,
        Duration::from_millis(500),
        "the grandchild ran on after the loss",
    );
    child.wait();
}

#[test]
fn interactive_rlock_killed_takes_grandchildren_along() {
    let r = Redis::shared();
    let [pidfile] = paths("tty-kill", ["pid"]);
    let inner = format!(
        "$BIN exec k -- sh -c 'echo $$ > {p}; sh -c \"sleep 30\"'",
        p = pidfile.display()
    );
    let child = Pty::run(&r, &inner);
    let cmd = wait_pid(&pidfile);
    eventually(Duration::from_secs(5), "the grandchild", || {
        !descendants_of(cmd).is_empty()
    });
    let gc = descendants_of(cmd);
    kill(rlock_of(cmd) as u32, libc::SIGKILL);
    eventually(Duration::from_secs(5), "the tree to die", || {
        !alive(cmd) && gc.iter().all(|&p| !alive(p))
    });
    child.wait();
}

#[test]
fn interactive_job_control_stops_and_continues_the_job() {
    // A real interactive bash on a pty: Ctrl-Z sends SIGTSTP to the
    // terminal's foreground group, which is the command's. rlock must stop
    // its own job so bash sees it stopped, and on `fg` continue the command.
    let r = Redis::shared();
    let [pidfile, out, code] = paths("tty-tstp", ["pid", "out", "code"]);
    let mut bash = Pty::bash(&r);
    // The command is bash, not dash: dash starts each `sleep` with vfork,
    // and a Ctrl-Z landing between that vfork and the exec stops the child
    // while dash waits for it with every signal blocked, so the job is
    // never seen stopped (by rlock or, without rlock, by the shell).
    bash.say(format!(
        "$BIN exec k -- bash -c 'echo $$ > {p}; for i in $(seq 20); do sleep 0.05; done; echo done > {o}'\n",
        p = pidfile.display(),
        o = out.display(),
    ));
    let cmd = wait_pid(&pidfile);
    let rl = rlock_of(cmd);
    bash.ctrl_z(rl, "rlock to stop its job");
    assert!(stopped(cmd));
    assert!(read(&out).is_empty());
    bash.say("fg\n");
    await_written(&out, Duration::from_secs(10), "the command to finish");
    assert_eq!(bash.status(&code), "0");
    assert_eq!(read(&out).trim(), "done");
    bash.exit();
    r.assert_nothing_held(&[]);
}

#[test]
fn ctrl_c_in_a_terminal_stops_the_script_that_ran_exec() {
    // The terminal sends SIGINT to its foreground group, the command's; the
    // script's shell is not in it. rlock ends its own job with SIGINT after
    // releasing, so the script stops as it would under flock(1).
    let r = Redis::shared();
    let [pidfile, after] = paths("tty-int", ["pid", "after"]);
    let inner = format!(
        "$BIN exec k -- sh -c 'echo $$ > {p}; sleep 30'; echo $? > {a}",
        p = pidfile.display(),
        a = after.display()
    );
    let mut child = Pty::run(&r, &inner);
    wait_pid(&pidfile);
    child.say(b"\x03"); // Ctrl-C
    child.wait();
    assert!(
        read(&after).is_empty(),
        "the script went on after Ctrl-C: {}",
        read(&after)
    );
    assert!(!r.held("k"));
}

#[test]
fn a_command_reading_the_terminal_works_with_stdin_redirected() {
    let r = Redis::shared();
    let [out] = paths("tty-read", ["out"]);
    let inner = format!(
        "echo | $BIN exec k -- sh -c 'read x < /dev/tty; echo got $x > {o}'",
        o = out.display()
    );
    let mut child = Pty::run(&r, &inner);
    eventually(Duration::from_secs(5), "the command to run", || r.held("k"));
    child.say(b"hello\n");
    await_written(&out, Duration::from_secs(10), "the command to read");
    assert_eq!(read(&out).trim(), "got hello");
    child.wait();
    r.assert_nothing_held(&[]);
}

#[test]
fn an_exit_code_of_130_is_not_a_ctrl_c() {
    let r = Redis::shared();
    let [after] = paths("tty-130", ["after"]);
    let inner = format!(
        "$BIN exec k -- sh -c 'exit 130'; echo after=$? > {a}",
        a = after.display()
    );
    Pty::run(&r, &inner).wait();
    assert_eq!(read(&after).trim(), "after=130");
}

#[test]
fn a_killed_interactive_rlock_gives_the_terminal_back() {
    let r = Redis::shared();
    let [pidfile, out] = paths("tty-back", ["pid", "out"]);
    let inner = format!(
        "$BIN exec k -- sh -c 'echo $$ > {p}; sleep 100'; sleep 0.5; read x; echo got=$x > {o}",
        p = pidfile.display(),
        o = out.display()
    );
    let mut child = Pty::run(&r, &inner);
    let cmd = wait_pid(&pidfile);
    kill(rlock_of(cmd) as u32, libc::SIGKILL);
    eventually(Duration::from_secs(5), "the command to die", || !alive(cmd));
    // The terminal's hand-back to the script is not observable from here.
    std::thread::sleep(Duration::from_millis(200));
    child.say(b"typed\n");
    await_written(&out, Duration::from_secs(10), "the script to read");
    assert_eq!(read(&out).trim(), "got=typed");
    child.wait();
}

#[test]
fn after_the_command_exits_ctrl_c_and_ctrl_z_reach_rlock_not_its_leftovers() {
    // The command exits, leaving `sleep 30 &` behind: rlock holds the lock
    // for it. The terminal must come back to rlock's job then, as a shell
    // takes it back once its job's processes exit. Left with the leftover's
    // group, Ctrl-Z stopped the leftover, which nobody ever continued (the
    // lock was held for ever), and Ctrl-C reached only the leftover, which
    // ignores it (a script's `&`): rlock could not be interrupted.
    let r = Redis::shared();
    let [left, code] = paths("tty-leftover", ["left", "code"]);
    let mut bash = Pty::bash(&r);
    bash.say(format!(
        "$BIN exec --grace 1s k -- bash -c 'sleep 30 & echo $! > {l}; exit 3'\n",
        l = left.display(),
    ));
    let lo = wait_pid(&left);
    // Once the command is reaped, the leftover's parent is the guard.
    let guard_of = || {
        let g = ppid(lo);
        (stat(g).first().map(String::as_str) != Some("Z")
            && std::fs::read_to_string(format!("/proc/{g}/comm"))
                .is_ok_and(|c| c.trim() == "rl-guard"))
        .then_some(g)
    };
    eventually(Duration::from_secs(10), "the command to exit", || {
        guard_of().is_some()
    });
    let rl = ppid(guard_of().unwrap());
    let rlock_group = stat(rl)[2].clone();
    eventually(
        Duration::from_secs(10),
        "rlock to take the terminal back",
        || stat(lo).get(5) == Some(&rlock_group),
    );
    // Ctrl-Z: stops rlock's job, not the leftover
    bash.ctrl_z(rl, "rlock to stop");
    assert!(!stopped(lo));
    bash.say("fg\n");
    eventually(Duration::from_secs(20), "rlock to run again", || {
        !stopped(rl)
    });
    eventually(
        Duration::from_secs(10),
        "the terminal back with rlock",
        || stat(lo).get(5) == Some(&rlock_group),
    );
    assert!(r.held("k"));
    bash.say("\x03"); // Ctrl-C: rlock passes it on; SIGKILL after the grace
    eventually(Duration::from_secs(20), "rlock to exit", || !alive(rl));
    // `fg` returns the job's exit status.
    assert_eq!(bash.status(&code), "3");
    assert!(!alive(lo), "the leftover runs on");
    assert!(!r.held("k"));
    bash.exit();
}

#[test]
fn after_bg_and_fg_the_command_gets_the_terminal_when_it_reads() {
    // Ctrl-Z, `bg`, `fg`: bash gives the terminal to rlock's job and sends
    // no SIGCONT (the job runs), so rlock cannot tell; the command, still
    // in the background, gets SIGTTIN when it reads. rlock then owns the
    // terminal and must hand it over, not stop the job that was just
    // brought to the foreground (the user had to type `fg` twice).
    let r = Redis::shared();
    let [pidfile, go, out] = paths("tty-bg-fg", ["pid", "go", "out"]);
    let mut bash = Pty::bash(&r);
    bash.say(format!(
        "$BIN exec k -- bash -c 'echo $$ > {p}; while [ ! -e {g} ]; do sleep 0.05; done; \
         read x; echo got=$x > {o}'\n",
        p = pidfile.display(),
        g = go.display(),
        o = out.display(),
    ));
    let cmd = wait_pid(&pidfile);
    let rl = rlock_of(cmd);
    let rlock_group = stat(rl)[2].clone();
    bash.ctrl_z(rl, "rlock to stop its job");
    bash.say("bg\n");
    eventually(Duration::from_secs(20), "the job to run again", || {
        !stopped(rl) && !stopped(cmd)
    });
    bash.say("fg\n");
    eventually(
        Duration::from_secs(20),
        "bash to give rlock the terminal",
        || stat(rl).get(5) == Some(&rlock_group),
    );
    std::fs::write(&go, "").unwrap();
    eventually(
        Duration::from_secs(20),
        "the command to own the terminal",
        || stat(cmd).get(5) == stat(cmd).get(2),
    );
    bash.say("typed\n");
    await_written(&out, Duration::from_secs(20), "the command to read");
    assert_eq!(read(&out).trim(), "got=typed");
    bash.exit();
    r.assert_nothing_held(&[]);
}

#[test]
fn exec_in_the_background_of_a_script_leaves_the_script_the_terminal() {
    // `rlock exec ... &` in a script: the shell has no job control, so
    // rlock stays in the script's group, which owns the terminal. The
    // command must not take the terminal from it: the script stopped
    // (SIGTTIN) at its next read, and the user's shell showed it stopped.
    let r = Redis::shared();
    let [pidfile, out] = paths("tty-script-bg", ["pid", "out"]);
    let mut bash = Pty::bash(&r);
    bash.say(format!(
        "bash -c '$BIN exec k -- sh -c \"echo \\$\\$ > {p}; sleep 5\" & read x; echo got=$x > {o}; wait'\n",
        p = pidfile.display(),
        o = out.display()
    ));
    let cmd = wait_pid(&pidfile);
    let script = ppid(rlock_of(cmd));
    let script_group = stat(script)[2].clone();
    assert_eq!(stat(cmd).get(5), Some(&script_group), "{:?}", stat(cmd));
    bash.say("typed\n");
    await_written(&out, Duration::from_secs(20), "the script to read");
    assert_eq!(read(&out).trim(), "got=typed");
    bash.exit();
}

#[test]
fn a_nested_exec_stops_and_continues_with_its_job() {
    // `rlock exec k -- rlock exec k -- CMD` on a terminal, Ctrl-Z then
    // `fg`: the outer exec continues its whole tree, the inner command
    // with it, before the inner exec has given it the terminal back; the
    // command must end up reading the terminal, in one `fg`.
    let r = Redis::shared();
    let [pidfile, out, code] = paths("tty-nested", ["pid", "out", "code"]);
    let mut bash = Pty::bash(&r);
    bash.say(format!(
        "$BIN exec k -- $BIN exec k -- bash -c 'echo $$ > {p}; read x; echo got=$x > {o}'\n",
        p = pidfile.display(),
        o = out.display(),
    ));
    let cmd = wait_pid(&pidfile);
    let inner = rlock_of(cmd);
    let outer = rlock_of(inner);
    eventually(
        Duration::from_secs(10),
        "the command to own the terminal",
        || stat(cmd).get(5) == stat(cmd).get(2),
    );
    bash.ctrl_z(outer, "the outer rlock to stop");
    bash.say("fg\n");
    eventually(
        Duration::from_secs(20),
        "the command to own the terminal",
        || stat(cmd).get(5) == stat(cmd).get(2) && [outer, inner, cmd].iter().all(|&p| !stopped(p)),
    );
    bash.say("typed\n");
    await_written(&out, Duration::from_secs(20), "the command to read");
    assert_eq!(read(&out).trim(), "got=typed");
    eventually(Duration::from_secs(20), "rlock to exit", || !alive(outer));
    assert_eq!(bash.status(&code), "0");
    assert!(!r.held("k"));
    bash.exit();
}

#[test]
fn a_lost_lock_gives_the_terminal_back_from_a_killed_sub_job() {
    // The command is an interactive shell that gave the terminal to a job
    // of its own (`sleep 100`, then `fg`). The lock is lost, the tree
    // killed: the terminal's foreground group is then an empty one that
    // is not the command's, and it stayed there. The script that ran
    // `rlock exec` could not read the terminal after it (SIGTTIN, or EIO
    // in an orphaned group as here).
    let r = Redis::shared();
    let [pidfile, code, out] = paths("tty-dead-fg", ["pid", "code", "out"]);
    let inner = format!(
        "$BIN exec --ttl 3s --on-lost kill k -- bash --norc --noprofile -i; echo $? > {c}; \
         read x; echo got=$x > {o}",
        c = code.display(),
        o = out.display()
    );
    let mut child = Pty::run(&r, &inner);
    eventually(Duration::from_secs(10), "the lock", || r.held("k"));
    child.say(format!("sleep 100 & echo $! > {p}; fg\n", p = pidfile.display()).as_bytes());
    let sl = wait_pid(&pidfile);
    eventually(
        Duration::from_secs(10),
        "the sub-job to own the terminal",
        || {
            let st = stat(sl);
            st.len() > 5 && st[5] == st[2]
        },
    );
    delete_lock(&r, "k");
    await_written(&code, Duration::from_secs(20), "rlock to exit");
    assert_eq!(read(&code).trim(), "79");
    child.say(b"typed\n");
    await_written(&out, Duration::from_secs(10), "the script to read");
    assert_eq!(read(&out).trim(), "got=typed");
    child.wait();
}

#[test]
fn on_lost_ignore_a_job_stopped_past_its_lease_still_resumes() {
    // `--on-lost ignore`: the guard has no kill deadline, so a job stopped
    // (Ctrl-Z) past its lease is not killed; `fg` must continue it, not
    // leave it stopped for ever under a running rlock.
    let r = Redis::shared();
    let [pidfile, go, out, code] = paths("tty-ignore-stop", ["pid", "go", "out", "code"]);
    let mut bash = Pty::bash(&r);
    bash.say(format!(
        "$BIN exec --ttl 1s --on-lost ignore k -- bash -c 'echo $$ > {p}; \
         while [ ! -e {g} ]; do sleep 0.05; done; echo done > {o}'\n",
        p = pidfile.display(),
        g = go.display(),
        o = out.display(),
    ));
    let cmd = wait_pid(&pidfile);
    let rl = rlock_of(cmd);
    bash.ctrl_z(rl, "rlock to stop its job");
    // Well past the 1 s lease.
    eventually(Duration::from_secs(20), "the lease to run out", || {
        !r.held("k")
    });
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&go, "").unwrap();
    bash.say("fg\n");
    await_written(&out, Duration::from_secs(20), "the command to finish");
    eventually(Duration::from_secs(20), "rlock to exit", || !alive(rl));
    assert_eq!(bash.status(&code), "79");
    bash.exit();
}
