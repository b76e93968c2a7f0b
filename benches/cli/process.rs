//! Running commands and waiting for them, or for a condition.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output};
use std::thread;
use std::time::{Duration, Instant};

/// Run to completion; panics unless it exits 0 (a failing command would
/// make its timing meaningless).
pub(crate) fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    if !out.status.success() {
        panic!(
            "{cmd:?} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Wall time of one successful run whose stdout contains `want`.
pub(crate) fn timed(cmd: &mut Command, want: &str) -> Duration {
    let t = Instant::now();
    let out = run_ok(cmd);
    let d = t.elapsed();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(want),
        "{cmd:?} printed {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    d
}

pub(crate) fn wait_deadline(c: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Ok(Some(st)) = c.try_wait() {
            return Some(st);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// An executable file called `name` in some directory of PATH.
pub(crate) fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

pub(crate) fn path(p: &Path) -> String {
    p.to_str().expect("temp path is UTF-8").to_string()
}

pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Lines in a file; 0 if it does not exist.
pub(crate) fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |s| s.lines().count())
}

/// Poll `f` every millisecond until it holds or `limit` passes.
pub(crate) fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() >= limit {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    true
}
