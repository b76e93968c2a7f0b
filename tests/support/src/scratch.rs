//! Scratch directories for the tests and the benches: every one a process
//! makes is under `$TMPDIR/rlock-scratch/<pid>/`, and the first made in a
//! process removes those of processes that are gone. A run leaves its
//! files behind (to be looked at after a failure) until the next run,
//! rather than ~200 directories in `$TMPDIR` for good.

use std::path::{Path, PathBuf};
use std::sync::Once;

/// A fresh (emptied) directory `name` of this process's own.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = scratch_path(name);
    std::fs::create_dir(&dir).expect("create a scratch directory");
    dir
}

/// A path `name` in this process's scratch directory, with nothing there
/// (what an earlier use left, file or directory, removed): for a file, or
/// for what a test expects to be made, or not made, by what it runs.
pub fn scratch_path(name: &str) -> PathBuf {
    static SWEPT: Once = Once::new();
    let root = std::env::temp_dir().join("rlock-scratch");
    SWEPT.call_once(|| sweep(&root));
    let ours = root.join(std::process::id().to_string());
    std::fs::create_dir_all(&ours).expect("create this process's scratch directory");
    let path = ours.join(name);
    if std::fs::remove_dir_all(&path).is_err() {
        let _ = std::fs::remove_file(&path);
    }
    path
}

/// Remove the directories of processes that no longer run (a pid that
/// runs again, reused, keeps its directory until it is gone too).
fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let pid = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok());
        if pid.is_some_and(|pid| pid > 0 && !running(pid)) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn running(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gone_process_directory_is_swept_and_a_running_one_kept() {
        let root = std::env::temp_dir().join(format!("rlock-scratch-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // A pid that cannot run: above the kernel's pid_max limit (4M).
        let gone = root.join("2147483000");
        let ours = root.join(std::process::id().to_string());
        let other = root.join("not-a-pid");
        for d in [&gone, &ours, &other] {
            std::fs::create_dir_all(d.join("f")).unwrap();
        }
        sweep(&root);
        assert!(!gone.exists(), "a gone process's directory stays");
        assert!(ours.exists(), "a running process's directory went");
        assert!(other.exists(), "a name that is no pid went");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_name_is_fresh_whatever_its_last_use_left() {
        let name = "reused";
        let file = scratch_path(name);
        std::fs::write(&file, "x").unwrap();
        let dir = scratch_dir(name);
        assert_eq!(dir, file);
        assert!(dir.is_dir() && std::fs::read_dir(&dir).unwrap().next().is_none());
        std::fs::write(dir.join("f"), "x").unwrap();
        assert!(
            !scratch_path(name).exists(),
            "a directory with a file stayed"
        );
    }
}
