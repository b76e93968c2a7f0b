//! The whole-script idiom, flock(1)'s `[ "${FLOCKER}" != "$0" ] && exec
//! env FLOCKER="$0" flock -en "$0" "$0" "$@" || :` for rlock: the script
//! re-executes itself under `rlock exec`, and RLOCK_HELD, which exec sets
//! for its command, stops the copy inside from doing it again. The script
//! is then exec's command, with all of exec's guarantees. Real script
//! files, run by path under dash (/bin/sh) and bash, `rlock` found on PATH
//! as an installed one would be.

use std::process::{Child, Command, Stdio};

use super::*;

/// The idiom's line, as the cookbook gives it, with exec's `OPTS`.
fn idiom(opts: &str) -> String {
    format!("[ -n \"$RLOCK_HELD\" ] || exec rlock exec -n {opts} deploy -- \"$0\" \"$@\"")
}

/// The script's body: record the pid that runs it, its arguments (one
/// `[arg]` line each), its RLOCK_HELD and a nested call of itself (which
/// would loop or wait for the script's own lock without the idiom's test),
/// then wait for `$D/go`.
const BODY: &str = r#"
if [ "$1" = nested ]; then echo nested-ran >>"$D/nested"; exit 0; fi
echo "$$" >>"$D/ran"
printf '[%s]\n' "$@" >"$D/args"
printf '%s' "$RLOCK_HELD" >"$D/held"
timeout 20 "$0" nested || exit 5
echo ready >"$D/ready"
while [ ! -e "$D/go" ]; do sleep 0.05; done
"#;

/// Write `$D/job` (mode 755) with interpreter `shell` and first line
/// `first`, then [`BODY`].
fn job(d: &Path, shell: &str, first: &str) -> PathBuf {
    let f = d.join("job");
    std::fs::write(&f, format!("#!{shell}\n{first}\n{BODY}")).unwrap();
    let mut perm = std::fs::metadata(&f).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&f, perm).unwrap();
    f
}

/// Arguments a script must get back exactly: spaces, an empty one, a
/// glob, quotes, and words rlock would read as its own.
const ARGS: [&str; 7] = ["two words", " edges ", "", "*", "--", "-n", "q\"u'o"];

/// `program` with `rlock` on PATH, `$D`, this test's Redis and no RLOCK_*
/// of the test process; stdin /dev/null, stdout and stderr piped.
fn job_cmd(r: &Redis, d: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_rlock")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars() {
        if k.starts_with("RLOCK_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("PATH", path)
        .env("D", d)
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Run `job ARGS` (see [`job_cmd`]).
fn run_job(r: &Redis, d: &Path, job: &Path, args: &[&str]) -> Child {
    job_cmd(r, d, job).args(args).spawn().unwrap()
}

const SHELLS: [&str; 2] = ["/bin/sh", "/bin/bash"];

#[test]
fn the_idiom_runs_one_copy_with_its_arguments_and_frees_the_lock_at_its_end() {
    for shell in SHELLS {
        let r = Redis::shared();
        let d = tmp(&format!("idiom-{}", shell.rsplit('/').next().unwrap()));
        let job = job(&d, shell, &idiom("--ttl 30s"));
        let mut a = run_job(&r, &d, &job, &ARGS);
        let mut b = run_job(&r, &d, &job, &ARGS);
        // Started together: one takes the lock, the other is busy at once.
        let mut loser = None;
        eventually(Duration::from_secs(10), "one copy to give up", || {
            loser = [(&mut a, 0), (&mut b, 1)]
                .into_iter()
                .find_map(|(c, i)| c.try_wait().unwrap().map(|st| (i, st.code())));
            loser.is_some()
        });
        let (lost, code) = loser.unwrap();
        let (mut winner, loser) = if lost == 0 { (b, a) } else { (a, b) };
        let busy = finish(loser, "the second copy");
        assert_eq!(code, Some(75), "{shell}: {}", busy.stderr);
        assert!(busy.stderr.contains("busy"), "{shell}: {}", busy.stderr);
        await_written(&d.join("ready"), Duration::from_secs(10), "the body");
        assert_eq!(read(&d.join("ran")).lines().count(), 1, "{shell}");
        let want: String = ARGS.iter().map(|a| format!("[{a}]\n")).collect();
        assert_eq!(read(&d.join("args")), want, "{shell}");
        let held = read(&d.join("held"));
        assert!(
            held.contains(&format!("{}\t", r.key("deploy"))),
            "{shell}: {held:?}"
        );
        assert_eq!(read(&d.join("nested")), "nested-ran\n", "{shell}");
        assert!(r.held("deploy"), "{shell}");
        std::fs::write(d.join("go"), "").unwrap();
        let st = winner.wait().unwrap();
        assert_eq!(st.code(), Some(0), "{shell}");
        // Released by exec at the command's end, not by the 30s lease.
        eventually(
            Duration::from_secs(5),
            "deploy free after the script",
            || !r.held("deploy"),
        );
        r.assert_nothing_held(&[]);
    }
}

#[test]
fn with_e0_the_busy_copy_exits_0_and_says_nothing() {
    for shell in SHELLS {
        let r = Redis::shared();
        let d = tmp(&format!("idiom-e0-{}", shell.rsplit('/').next().unwrap()));
        let job = job(&d, shell, &idiom("-E 0 --ttl 30s"));
        let mut first = run_job(&r, &d, &job, &["x"]);
        await_written(&d.join("ready"), Duration::from_secs(10), "the body");
        let second = finish(run_job(&r, &d, &job, &["x"]), "the second copy").ok();
        assert_eq!(second.stderr, "", "{shell}");
        assert_eq!(read(&d.join("ran")).lines().count(), 1, "{shell}");
        std::fs::write(d.join("go"), "").unwrap();
        assert_eq!(first.wait().unwrap().code(), Some(0), "{shell}");
        eventually(Duration::from_secs(5), "deploy free", || !r.held("deploy"));
        r.assert_nothing_held(&[]);
    }
}

#[test]
fn a_script_killed_with_sigkill_frees_the_lock_at_once() {
    // SIGKILL of the script's own process (the body's $$, exec's
    // command): exec sees its command die, exits 137 and releases; the
    // 30s lease plays no part.
    for shell in SHELLS {
        let r = Redis::shared();
        let d = tmp(&format!("idiom-kill-{}", shell.rsplit('/').next().unwrap()));
        let job = job(&d, shell, &idiom("--ttl 30s"));
        let outer = run_job(&r, &d, &job, &["x"]);
        await_written(&d.join("ready"), Duration::from_secs(10), "the body");
        assert!(r.held("deploy"), "{shell}");
        let pid: i32 = read(&d.join("ran")).trim().parse().unwrap();
        assert_ne!(
            pid,
            outer.id() as i32,
            "{shell}: the body ran in rlock's place"
        );
        kill(pid, libc::SIGKILL);
        finish(outer, "the script under rlock exec").code(137);
        eventually(Duration::from_secs(5), "deploy free after SIGKILL", || {
            !r.held("deploy")
        });
        r.assert_nothing_held(&[]);
    }
}

#[test]
fn under_another_locks_exec_only_a_check_of_this_lock_takes_it() {
    // RLOCK_HELD is set inside any `rlock exec`: a script using the idiom
    // started under `rlock exec other` runs without taking deploy. The
    // guide's variant tests for this lock with `rlock check` instead.
    let r = Redis::shared();
    let d = tmp("idiom-other");
    let plain = job(&d, "/bin/sh", &idiom("--ttl 30s"));
    let outer = |job: &Path| {
        job_cmd(&r, &d, env!("CARGO_BIN_EXE_rlock"))
            .args(["exec", "-n", "other", "--", "sh", "-c", "exec \"$0\" x"])
            .arg(job)
            .spawn()
            .unwrap()
    };
    std::fs::write(d.join("go"), "").unwrap();
    let run = outer(&plain);
    await_written(&d.join("ready"), Duration::from_secs(10), "the body");
    finish(run, "plain idiom under exec other").ok();
    assert!(
        !read(&d.join("held")).contains(&r.key("deploy")),
        "the plain idiom took deploy under another lock's exec"
    );
    std::fs::remove_file(d.join("ready")).unwrap();
    let checked = job(
        &d,
        "/bin/sh",
        "rlock check deploy >/dev/null 2>&1 || exec rlock exec -n --ttl 30s deploy -- \"$0\" \"$@\"",
    );
    let run = outer(&checked);
    await_written(&d.join("ready"), Duration::from_secs(10), "the body");
    finish(run, "checked idiom under exec other").ok();
    assert!(
        read(&d.join("held")).contains(&format!("{}\t", r.key("deploy"))),
        "{}",
        read(&d.join("held"))
    );
    assert_eq!(read(&d.join("ran")).lines().count(), 2);
    r.assert_nothing_held(&[]);
}

#[test]
fn as_a_containers_entrypoint_the_lock_is_freed_when_the_script_ends() {
    // The script as pid 1 of a pid namespace of its own (a container's
    // entrypoint): its line makes `rlock exec` pid 1, which releases
    // before it exits and the namespace ends (a kept lock ends with its
    // lease there: keep/usage.rs).
    let r = Redis::shared();
    let d = tmp("idiom-pid1");
    let job = job(&d, "/bin/sh", &idiom("--ttl 30s"));
    let mut child = job_cmd(&r, &d, "unshare")
        .args(["--kill-child", "-fp", "--mount-proc"])
        .arg(&job)
        .arg("x")
        .spawn()
        .unwrap();
    await_written(&d.join("ready"), Duration::from_secs(10), "the body");
    assert!(r.held("deploy"));
    std::fs::write(d.join("go"), "").unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    eventually(Duration::from_secs(5), "deploy free after pid 1", || {
        !r.held("deploy")
    });
    r.assert_nothing_held(&[]);
}
