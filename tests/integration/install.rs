//! `make install` and `make uninstall` into a temporary DESTDIR.

use std::path::Path;
use std::process::Command;

#[test]
fn make_install_puts_every_file_where_it_belongs_and_uninstall_removes_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dest = rlock_test_support::scratch_path("install");
    // The binary this test run built stands in for `make build`'s (same
    // sources): install only copies, it never builds.
    let make = |target: &str| {
        crate::util::make()
            .current_dir(root)
            .arg(target)
            .arg(format!("DESTDIR={}", dest.display()))
            .arg("PREFIX=/usr")
            .arg(format!("RLOCK_BIN={}", env!("CARGO_BIN_EXE_rlock")))
            .output()
            .expect("make")
    };
    let out = make("install");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let usr = dest.join("usr");
    for f in [
        "bin/rlock",
        "share/man/man1/rlock.1",
        "share/man/man1/rlock-exec.1",
        "share/man/man1/rlock-check.1",
        "share/bash-completion/completions/rlock",
        "share/zsh/site-functions/_rlock",
        "share/fish/vendor_completions.d/rlock.fish",
    ] {
        assert!(usr.join(f).is_file(), "{f} not installed");
    }
    let pages = std::fs::read_dir(root.join("man")).unwrap().count();
    assert_eq!(
        std::fs::read_dir(usr.join("share/man/man1"))
            .unwrap()
            .count(),
        pages
    );
    let v = Command::new(usr.join("bin/rlock"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("rlock"));
    let out = make("uninstall");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = walk(&dest);
    assert!(left.is_empty(), "left after uninstall: {left:?}");
    let _ = std::fs::remove_dir_all(&dest);
}

/// Files (not directories) below `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn make_install_never_builds_and_says_what_is_missing() {
    // `make install` only copies, and says so when there is nothing to
    // copy: under sudo rustup's cargo is usually not on PATH, and a build
    // as root would leave a root-owned target/.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dest = rlock_test_support::scratch_path("noinstall");
    let out = crate::util::make()
        .current_dir(root)
        .arg("install")
        .arg(format!("DESTDIR={}", dest.display()))
        .arg("RLOCK_BIN=/nonexistent/rlock")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("make");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("make build"), "{err}");
    assert!(!err.contains("cargo"), "it tried to build: {err}");
    assert!(!dest.exists(), "installed something: {dest:?}");
}
