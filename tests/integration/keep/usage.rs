//! `--keep` where scripts really use it (issue #29): a line of a bash,
//! dash or busybox sh script; run as cron runs it; under `timeout`,
//! `nice`, `nohup`, `sudo`; `tok=$(...)`; background jobs; a container's
//! entrypoint as pid 1; a CI step as GitHub Actions and GitLab run it.
//! Each case runs in a pid namespace of its own and checks that the lock
//! is held while the script's body runs (`status` and a rival exec) and
//! that it is free within seconds of the script's end: the TTL is 30s, so
//! a lease running out cannot pass for a release.

use std::time::Duration;

use super::*;

/// The script's body under the lock: say so, then wait for `$D/go`.
const HOLDING: &str = "echo holding >\"$D/holding\"
while [ ! -e \"$D/go\" ]; do sleep 0.05; done";

/// The line a script takes the lock with.
const TAKE: &str = "rlock acquire -n k --keep --ttl 30s >/dev/null || exit 0";

/// Write `$D/name`, mode 755, from `text` with `rlock ` spelled as the
/// binary's absolute path and `$D` as the test's directory, so that the
/// file runs as it is in any environment (cron's `env -i` too).
fn file(d: &Path, name: &str, text: &str) -> PathBuf {
    let bin = env!("CARGO_BIN_EXE_rlock");
    let text = text
        .replace("rlock ", &format!("'{bin}' "))
        .replace("$D", d.to_str().unwrap());
    let f = d.join(name);
    std::fs::write(&f, text).unwrap();
    let mut perm = std::fs::metadata(&f).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&f, perm).unwrap();
    f
}

/// A pid namespace of the test's own, its processes killed with it
/// (`unshare --kill-child`, and init's death ends the namespace).
struct Ns {
    child: Child,
    d: PathBuf,
}

impl Ns {
    /// Run `launch` (sh) from a namespace's init, in a session and
    /// process group of its own (as a runner or cron starts a script:
    /// with pid 1 in its group, `--keep` refuses, keep::refuse); the init
    /// records its exit code in `$D/rc` and then stays until the test
    /// writes `$D/done`: the keeper, in the namespace too, lives on after
    /// the script.
    fn launch(r: &Redis, d: &Path, launch: &str) -> Ns {
        let quoted = launch.replace('\'', "'\\''");
        let init = format!(
            "setsid -w sh -c '{quoted}'\necho $? >\"$D/rc\"\n\
             while [ ! -e \"$D/done\" ]; do sleep 0.05; done"
        );
        Ns::init(r, d, &["sh", "-c", &init])
    }

    /// `argv` as the namespace's init itself.
    fn init(r: &Redis, d: &Path, argv: &[&str]) -> Ns {
        let mut cmd = Command::new("unshare");
        for (k, _) in std::env::vars() {
            if k.starts_with("RLOCK_") {
                cmd.env_remove(k);
            }
        }
        let child = cmd
            .args(["--kill-child", "-fp", "--mount-proc"])
            .args(argv)
            .env("D", d)
            .env("RLOCK_URL", r.url())
            .env("RLOCK_PREFIX", &r.prefix)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Ns {
            child,
            d: d.to_path_buf(),
        }
    }

    /// The launched command's exit code, once it has ended.
    #[track_caller]
    fn rc(&self) -> String {
        wait_line(&self.d, "rc")
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        for f in ["go", "done"] {
            let _ = std::fs::write(self.d.join(f), "");
        }
        for _ in 0..100 {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill(self.child.id(), libc::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Lock `key` is held: `status` says so and a rival exec is busy (75).
#[track_caller]
fn assert_held(r: &Redis, key: &str, when: &str) {
    assert!(r.held(key), "{key} not held {when}: {}", r.status_json(key));
    rlock(r)
        .args(["exec", "-n", key, "--", "true"])
        .run()
        .code(75);
}

/// The common course: the body runs ($D/holding); a second later (a
/// keeper watching a process that exits at once has let go by then) the
/// lock is held; the script is let go, the launch exits 0, and the lock
/// is free within 5s.
#[track_caller]
fn held_then_freed(r: &Redis, ns: Ns, key: &str) {
    wait_line(&ns.d, "holding");
    std::thread::sleep(Duration::from_secs(1));
    assert_held(r, key, "while the script runs");
    go(&ns.d);
    assert_eq!(ns.rc(), "0");
    eventually(
        Duration::from_secs(5),
        "the lock free after the script",
        || !r.held(key),
    );
    drop(ns);
    r.assert_nothing_held(&[]);
}

/// A script of [`TAKE`] and [`HOLDING`], run by `shell`.
fn a_line_of(shell: &str, name: &str) {
    let r = Redis::shared();
    let d = tmp(name);
    let s = file(&d, "s.sh", &format!("{TAKE}\n{HOLDING}\n"));
    let ns = Ns::launch(&r, &d, &format!("{shell} {}", s.display()));
    held_then_freed(&r, ns, "k");
}

#[test]
fn a_line_of_a_bash_script() {
    a_line_of("bash", "use-bash");
}

#[test]
fn a_line_of_a_dash_script() {
    a_line_of("dash", "use-dash");
}

#[test]
fn a_line_of_a_busybox_sh_script() {
    if Command::new("busybox").arg("true").status().is_err() {
        eprintln!("skipped: no busybox (scripts/ensure-redis.sh installs it)");
        return;
    }
    a_line_of("busybox sh", "use-busybox");
}

#[test]
fn run_as_cron_runs_it() {
    // cron's child: a session of its own, no terminal, stdin /dev/null
    // (here) and stdout and stderr a pipe that cron reads to the end
    // before it mails (`| cat`: the launch ends once every writer has
    // closed it, the keeper included), the crontab's environment only.
    let r = Redis::shared();
    let d = tmp("use-cron");
    let s = file(&d, "job", &format!("#!/bin/sh\n{TAKE}\n{HOLDING}\n"));
    let launch = format!(
        "setsid env -i PATH=/usr/bin:/bin HOME=/ SHELL=/bin/sh LOGNAME=root \
         RLOCK_URL=\"$RLOCK_URL\" RLOCK_PREFIX=\"$RLOCK_PREFIX\" \
         /bin/sh -c '{}' </dev/null 2>&1 | cat >\"$D/cron.out\"",
        s.display()
    );
    let ns = Ns::launch(&r, &d, &launch);
    held_then_freed(&r, ns, "k");
    assert_eq!(read(&d.join("cron.out")), "", "cron would mail this");
}

/// A bash script of [`TAKE`] and [`HOLDING`], run under `wrapper`.
fn under(wrapper: &str, name: &str) {
    let r = Redis::shared();
    let d = tmp(name);
    let s = file(&d, "s.sh", &format!("#!/bin/bash\n{TAKE}\n{HOLDING}\n"));
    let ns = Ns::launch(&r, &d, &format!("{wrapper} {}", s.display()));
    held_then_freed(&r, ns, "k");
}

#[test]
fn under_timeout() {
    under("timeout 60", "use-timeout");
}

#[test]
fn under_nice() {
    under("nice", "use-nice");
}

#[test]
fn under_nohup() {
    under("nohup", "use-nohup");
}

/// sudo resets the environment: RLOCK_URL and RLOCK_PREFIX are passed on
/// as a sudoers `env_keep` would.
const SUDO: &str = "sudo --preserve-env=RLOCK_URL,RLOCK_PREFIX -u root";

fn have_sudo() -> bool {
    let ok = Command::new("sudo")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: no sudo that runs without a password");
    }
    ok
}

#[test]
fn under_sudo_as_the_same_user() {
    if have_sudo() {
        under(SUDO, "use-sudo");
    }
}

#[test]
fn sudo_rlock_acquire_as_a_line() {
    // The guide: a wrapper whose command line ends with rlock's own is
    // looked through (`sudo rlock acquire ...`).
    if !have_sudo() {
        return;
    }
    let r = Redis::shared();
    let d = tmp("use-sudo-line");
    let s = file(&d, "s.sh", &format!("{SUDO} {TAKE}\n{HOLDING}\n"));
    let ns = Ns::launch(&r, &d, &format!("bash {}", s.display()));
    held_then_freed(&r, ns, "k");
}

#[test]
fn tok_from_acquire_released_mid_script() {
    let r = Redis::shared();
    let d = tmp("use-tok-release");
    let s = file(
        &d,
        "s.sh",
        &format!(
            "tok=$(rlock acquire k --keep --ttl 30s) || exit 9
             {HOLDING}
             rlock release k --token \"$tok\" || exit 8
             echo released >\"$D/released\"
             while [ ! -e \"$D/go2\" ]; do sleep 0.05; done"
        ),
    );
    let ns = Ns::launch(&r, &d, &format!("bash {}", s.display()));
    wait_line(&d, "holding");
    std::thread::sleep(Duration::from_secs(1));
    assert_held(&r, "k", "while the script runs");
    go(&d);
    wait_line(&d, "released");
    // release answers once the lock is free: no wait here.
    assert!(!r.held("k"), "held after release: {}", r.status_json("k"));
    std::fs::write(d.join("go2"), "").unwrap();
    assert_eq!(ns.rc(), "0");
    drop(ns);
    r.assert_nothing_held(&[]);
}

#[test]
fn tok_from_acquire_without_release() {
    let r = Redis::shared();
    let d = tmp("use-tok");
    let s = file(
        &d,
        "s.sh",
        &format!("tok=$(rlock acquire k --keep --ttl 30s) || exit 9\n{HOLDING}\n"),
    );
    let ns = Ns::launch(&r, &d, &format!("bash {}", s.display()));
    held_then_freed(&r, ns, "k");
}

#[test]
fn a_script_that_starts_background_jobs_and_waits() {
    // Held while the jobs run and after they have ended: their end is not
    // the script's.
    let r = Redis::shared();
    let d = tmp("use-jobs");
    let s = file(
        &d,
        "s.sh",
        &format!(
            "{TAKE}
             echo started >\"$D/jobs\"
             sleep 2 & sleep 2 & wait
             {HOLDING}"
        ),
    );
    let ns = Ns::launch(&r, &d, &format!("bash {}", s.display()));
    wait_line(&d, "jobs");
    assert_held(&r, "k", "while the jobs run");
    held_then_freed(&r, ns, "k");
}

/// A container's entrypoint script as pid 1 (`unshare -fp --mount-proc
/// bash script.sh`): the lock is held while it runs; at its end the kernel
/// kills the whole namespace, keeper and guard with it, so the lock ends
/// with its lease, not at once: the limit the guide states ("Limits"), for
/// which it points to the whole-script idiom (exec as pid 1 releases
/// before it exits: exec::whole_script). A 3 s lease keeps the test short;
/// should the limit ever go, the first check here fails and the guide
/// must say so.
#[test]
fn a_containers_entrypoint_script_as_pid_1_holds_until_its_lease_ends() {
    let r = Redis::shared();
    let d = tmp("use-pid1");
    let take = TAKE.replace("--ttl 30s", "--ttl 3s");
    let s = file(&d, "s.sh", &format!("{take}\n{HOLDING}\n"));
    let mut ns = Ns::init(&r, &d, &["bash", s.to_str().unwrap()]);
    wait_line(&d, "holding");
    std::thread::sleep(Duration::from_secs(1));
    assert_held(&r, "k", "while the entrypoint runs");
    go(&d);
    let st = ns.child.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    // Right after pid 1: still held (nothing left to release it).
    assert!(r.held("k"), "freed at once: update the guide's Limits");
    eventually(
        Duration::from_secs(10),
        "the lock free at its lease's end",
        || !r.held("k"),
    );
    // Nobody released it: its keys end by their expiry, which Redis
    // carries out a little after the lease's end (6.2's active expiry
    // samples keys ten times a second): a CI run found them still there
    // right after `status` said free.
    let (state, holders) = (r.key("k"), format!("{}:h", r.key("k")));
    eventually(Duration::from_secs(10), "the lock's keys expired", || {
        r.cmd::<i64>(&["EXISTS", &state, &holders]) == 0
    });
    drop(ns);
    r.assert_nothing_held(&[]);
}

#[test]
fn a_github_actions_step() {
    // `run:` is written to a file and run as `bash -e {0}`.
    let r = Redis::shared();
    let d = tmp("use-gha");
    let s = file(&d, "step.sh", &format!("{TAKE}\n{HOLDING}\n"));
    let ns = Ns::launch(&r, &d, &format!("bash -e {}", s.display()));
    held_then_freed(&r, ns, "k");
}

#[test]
fn a_gitlab_jobs_script_lines_on_stdin() {
    // GitLab's runner feeds all of a job's `script:` lines to one shell.
    let r = Redis::shared();
    let d = tmp("use-gitlab-s");
    let s = file(&d, "lines", &format!("{TAKE}\n{HOLDING}\n"));
    let ns = Ns::launch(&r, &d, &format!("bash -s <{}", s.display()));
    held_then_freed(&r, ns, "k");
}

#[test]
fn a_gitlab_jobs_script_lines_as_one_c_string() {
    let r = Redis::shared();
    let d = tmp("use-gitlab-c");
    let s = file(&d, "lines", &format!("{TAKE}\n{HOLDING}\n"));
    let ns = Ns::launch(&r, &d, &format!("bash -c \"$(cat {})\"", s.display()));
    held_then_freed(&r, ns, "k");
}
