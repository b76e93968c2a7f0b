//! Running the real `rlock` binary: the `Rlock` builder, its `Run`, and
//! shell contenders racing for a lock.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::Redis;

/// Runs the real binary.
pub struct Rlock {
    cmd: Command,
    desc: String,
}

/// The binary on `redis`, with its prefix when it is not the default.
pub fn rlock(redis: &Redis) -> Rlock {
    let mut r = bare_rlock();
    r.cmd.env("RLOCK_URL", redis.url());
    if redis.prefix != "rlock:" {
        r.cmd.env("RLOCK_PREFIX", &redis.prefix);
    }
    r
}

/// The binary with a clean environment (no RLOCK_* from the caller).
pub fn bare_rlock() -> Rlock {
    bare_rlock_at(std::path::Path::new(env!("CARGO_BIN_EXE_rlock")))
}

/// [`bare_rlock`] of another build of the binary (the shipped one).
pub fn bare_rlock_at(bin: &std::path::Path) -> Rlock {
    let mut cmd = Command::new(bin);
    for (k, _) in std::env::vars() {
        if k.starts_with("RLOCK_") {
            cmd.env_remove(k);
        }
    }
    cmd.stdin(Stdio::null());
    Rlock {
        cmd,
        desc: "rlock".into(),
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    desc: String,
}

impl Rlock {
    /// Run it from a shell that outlives it by nothing: a lock it takes
    /// names that shell as its holder, not this test process, whose later
    /// waits for the lock would rightly say they wait for themselves.
    pub fn by_another_process(self) -> Self {
        // One script string: a command line that ends with rlock's own
        // would be a wrapper's, looked through.
        let quote =
            |a: &std::ffi::OsStr| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''"));
        let mut line = quote(std::ffi::OsStr::new(env!("CARGO_BIN_EXE_rlock")));
        for a in self.cmd.get_args() {
            line.push(' ');
            line.push_str(&quote(a));
        }
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &format!("{line}; exit $?")]);
        for (k, v) in self.cmd.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.stdin(Stdio::null());
        Rlock {
            cmd,
            desc: self.desc,
        }
    }

    /// Run it in a PID namespace of its own ([`super::in_pid_namespace`]):
    /// for a command that starts an `acquire --keep` keeper.
    pub fn in_pid_namespace(self) -> Self {
        let mut cmd = super::in_pid_namespace(&self.cmd);
        cmd.stdin(Stdio::null());
        Rlock {
            cmd,
            desc: self.desc,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for a in args {
            self.desc.push(' ');
            self.desc.push_str(a.as_ref());
            self.cmd.arg(a.as_ref());
        }
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.cmd.env(k, v);
        self
    }

    pub fn stdout(mut self, s: impl Into<Stdio>) -> Self {
        self.cmd.stdout(s);
        self
    }

    pub fn stderr(mut self, s: impl Into<Stdio>) -> Self {
        self.cmd.stderr(s);
        self
    }

    /// Spawn with stdout and stderr as set (inherited unless set).
    pub fn spawn_plain(mut self) -> Child {
        self.cmd.spawn().unwrap()
    }

    pub fn spawn(mut self) -> Child {
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        self.cmd.spawn().unwrap()
    }

    pub fn run(mut self) -> Run {
        let started = Instant::now();
        let out = self.cmd.output().unwrap();
        Run::from(out, started.elapsed(), self.desc)
    }
}

impl Run {
    pub fn from(out: Output, elapsed: Duration, desc: String) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed,
            desc,
        }
    }

    #[track_caller]
    pub fn code(self, want: i32) -> Run {
        assert_eq!(
            self.code, want,
            "`{}` exited {} (want {want})\nstdout: {}\nstderr: {}",
            self.desc, self.code, self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn ok(self) -> Run {
        self.code(0)
    }

    /// Exit code `want` and exactly one `rlock: ...` line on stderr
    /// mentioning `needle`; no panic text.
    #[track_caller]
    pub fn fails(self, want: i32, needle: &str) -> Run {
        let r = self.code(want);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "want one stderr line, got: {}", r.stderr);
        assert!(lines[0].starts_with("rlock: "), "stderr: {}", r.stderr);
        assert!(
            r.stderr.to_lowercase().contains(&needle.to_lowercase()),
            "stderr {:?} lacks {needle:?}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        r
    }

    /// Exit code `want`, and `needle` somewhere on stderr (which may hold
    /// more than one line, e.g. a report while the command ran).
    #[track_caller]
    pub fn fails_with_lines(self, want: i32, needle: &str) -> Run {
        let r = self.code(want);
        assert!(
            r.stderr.contains(needle),
            "stderr {:?} lacks {needle:?}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        r
    }

    /// The token printed by `acquire`.
    #[track_caller]
    pub fn token(&self) -> String {
        let t = self.stdout.trim_end_matches('\n');
        assert!(
            uuid::Uuid::parse_str(t).is_ok_and(|u| u.get_version_num() == 4),
            "stdout is not just a UUIDv4 token: {:?}",
            self.stdout
        );
        t.to_string()
    }
}

/// Wait for a child and collect its output.
pub fn finish(child: Child, desc: &str) -> Run {
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    Run::from(out, started.elapsed(), desc.to_string())
}

/// Run `count` copies of the shell `script` at once, with `RLOCK_URL`,
/// `BIN` (the rlock binary) and `PORT` (of `port_of`) in their environment,
/// and assert that every one of them exits 0.
#[track_caller]
pub fn contenders(count: usize, script: &str, url: &str, port_of: &Redis) {
    let kids: Vec<_> = (0..count)
        .map(|_| {
            Command::new("sh")
                .args(["-c", script])
                .env("BIN", env!("CARGO_BIN_EXE_rlock"))
                .env("PORT", port_of.port.to_string())
                .env("RLOCK_URL", url)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for k in kids {
        finish(k, "contender").ok();
    }
}

/// `make`, as a user runs it from a shell: without the MAKEFLAGS,
/// MAKELEVEL and MFLAGS a parent make (`make test`) exports, which turn
/// on `--print-directory` and pass its flags down.
pub fn make() -> Command {
    let mut cmd = Command::new("make");
    for k in ["MAKEFLAGS", "MAKELEVEL", "MFLAGS"] {
        cmd.env_remove(k);
    }
    cmd
}
