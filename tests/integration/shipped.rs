//! The binary as shipped: `make build` (scripts/cargo-release.sh) links
//! the C library in on Linux with glibc. scripts/test.sh builds it after
//! the suite and runs these tests again with RLOCK_TEST_SHIPPED=<its
//! path>; in the suite's own run they take the binary this test run built
//! (a plain cargo build, dynamically linked). What a static glibc could
//! change is what they check: the link itself, a host name resolved
//! through nsswitch.conf's `files`, the holder's user name from the
//! password database, TLS (certificate files, random numbers), and the
//! package's dependencies; and the script's choice of link.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::deb::stdout;
use crate::util::*;

/// The binary under test, and whether it is the shipped build.
fn binary() -> (PathBuf, bool) {
    match std::env::var_os("RLOCK_TEST_SHIPPED") {
        Some(p) => (PathBuf::from(p), true),
        None => (PathBuf::from(env!("CARGO_BIN_EXE_rlock")), false),
    }
}

/// Whether the ELF file names a program interpreter (ld.so): a
/// dynamically linked executable does, a static one (static PIE included)
/// does not. readelf, as scripts/deb.sh asks it.
fn has_interpreter(path: &Path) -> bool {
    stdout(
        Command::new("readelf")
            .env("LC_ALL", "C")
            .arg("-lW")
            .arg(path),
    )
    .contains("program interpreter")
}

/// scripts/cargo-release.sh, run from the repository's root.
fn release_script() -> Command {
    let mut cmd = Command::new("scripts/cargo-release.sh");
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

#[test]
fn the_shipped_build_links_the_c_library_in_on_linux_with_glibc() {
    let (bin, shipped) = binary();
    // The script links statically where it puts the binaries under
    // target/<host>/release (Linux with glibc and its libc.a), and leaves
    // cargo's defaults (target/release) elsewhere.
    let dir = stdout(release_script().arg("--dir"));
    let host_dir = Path::new(dir.trim())
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d.to_string_lossy().contains("-linux-gnu"));
    if shipped && host_dir {
        assert!(
            !has_interpreter(&bin),
            "{bin:?} (make build's) loads its C library at run time"
        );
    } else {
        // A plain `cargo build` is left as cargo makes it.
        assert!(
            has_interpreter(&bin),
            "{bin:?} (cargo's own build) is linked statically"
        );
    }
    // The reader itself: /bin/sh is dynamically linked on every system
    // this suite runs on.
    assert!(has_interpreter(Path::new("/bin/sh")));
}

#[test]
fn the_release_script_says_when_it_cannot_link_statically_and_where_its_binary_is() {
    // No C compiler's libc.a (CC=false answers nothing): cargo's own
    // build, in target/release, said on stderr.
    let out = release_script()
        .env("CC", "false")
        .args(["build", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        assert!(err.contains("no static C library (libc.a)"), "{err}");
    }
    let scratch = tmp_dir("shipped", "release-dir");
    let target = scratch.to_str().unwrap();
    let dir = |envs: &[(&str, &str)]| {
        let mut cmd = release_script();
        cmd.env("CARGO_TARGET_DIR", target).arg("--dir");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        stdout(&mut cmd).trim().to_string()
    };
    assert_eq!(dir(&[("CC", "false")]), format!("{target}/release"));
    // Without rustc on PATH (`sudo make install`): the directory a build
    // left an rlock in, else target/release.
    let no_rustc = [("PATH", "/usr/bin:/bin")];
    assert_eq!(dir(&no_rustc), format!("{target}/release"));
    let built = scratch.join("x86_64-unknown-linux-gnu/release");
    std::fs::create_dir_all(&built).unwrap();
    std::fs::copy("/bin/true", built.join("rlock")).unwrap();
    assert_eq!(dir(&no_rustc), built.to_str().unwrap());
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn the_shipped_binary_resolves_a_host_name_and_names_its_user() {
    let (bin, _) = binary();
    let r = Redis::start();
    // `localhost`, from /etc/hosts (nsswitch.conf's `files`): the server
    // listens on 127.0.0.1 only, so an address list without it fails.
    let url = r.url().replace("127.0.0.1", "localhost");
    assert!(url.contains("localhost"), "{url}");
    let out = bare_rlock_at(&bin)
        .env("RLOCK_URL", &url)
        .env("RLOCK_PREFIX", &r.prefix)
        .args(["exec", "shipped", "--", "sh", "-c"])
        .args(["exec \"$0\" status shipped --json", bin.to_str().unwrap()])
        .run()
        .ok();
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let holder = &status["holders"][0];
    assert_eq!(status["held"], true, "{status}");
    // The password database's name for this uid (id(1), through the C
    // library's own lookup; a uid without one has none to compare), and
    // the kernel's host name.
    let id = Command::new("id").arg("-un").output().unwrap();
    if id.status.success() {
        let user = String::from_utf8_lossy(&id.stdout);
        assert_eq!(holder["user"], user.trim(), "{status}");
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(holder["host"], host.trim(), "{status}");
    assert!(!r.held("shipped"), "released after the command");
}

/// Owner tokens come from the kernel's getrandom(2) through glibc: a
/// static binary cannot find glibc's function with dlsym, which the
/// getrandom crate tries first and, failing, opens and polls /dev/random
/// and reads /dev/urandom on every run (scripts/cargo-release.sh names its
/// backend). strace(1) shows the files an exec opens, its guard's too.
#[test]
fn the_shipped_binary_takes_its_randomness_without_opening_a_device() {
    let (bin, _) = binary();
    let r = Redis::start();
    let trace = r.dir.join("shipped-random.strace");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=open,openat", "-o"])
        .arg(&trace)
        .arg(&bin)
        .args(["exec", "shipped-random", "--", "true"])
        .env("RLOCK_URL", r.url())
        .env("RLOCK_PREFIX", &r.prefix)
        .output()
        .expect("strace (scripts/ensure-redis.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let opened = std::fs::read_to_string(&trace).unwrap();
    assert!(
        opened.contains("openat"),
        "strace saw no open at all: {opened}"
    );
    assert!(
        !opened.contains("/dev/random") && !opened.contains("/dev/urandom"),
        "{opened}"
    );
    assert!(!r.held("shipped-random"));
}

#[test]
fn the_shipped_binary_packages_with_the_dependencies_it_has() {
    let (bin, _) = binary();
    let dir = rlock_test_support::scratch_path("shipped-deb");
    let deb = crate::deb::make_deb_of(&bin, &dir);
    let control = stdout(Command::new("dpkg-deb").arg("-f").arg(&deb));
    let depends = control.lines().find(|l| l.starts_with("Depends:"));
    if has_interpreter(&bin) {
        let depends = depends.unwrap_or_else(|| panic!("no Depends: {control}"));
        assert!(depends.contains("libc6"), "{depends}");
    } else {
        assert_eq!(depends, None, "a static binary depends on nothing");
    }
    // The packaged binary is the one given (stripped: same link).
    let root = dir.join("root");
    stdout(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    assert_eq!(
        has_interpreter(&root.join("usr/bin/rlock")),
        has_interpreter(&bin)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_shipped_binary_runs_a_command_over_tls() {
    // rustls, its CA file read from disk and ring's random numbers, in
    // the binary as linked: a TLS server whose certificate names
    // localhost, and a client certificate it asks for.
    let (bin, _) = binary();
    let dir = crate::tls_acl::certificates("shipped");
    let r = crate::tls_acl::tls_server(&dir, true);
    let file = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let out = bare_rlock_at(&bin)
        .env("RLOCK_URL", &format!("rediss://localhost:{}", r.port))
        .env("RLOCK_TLS_CA", &file("ca.crt"))
        .env("RLOCK_TLS_CERT", &file("client.crt"))
        .env("RLOCK_TLS_KEY", &file("client.key"))
        .args([
            "exec",
            "tls",
            "--",
            "sh",
            "-c",
            "echo \"fence $RLOCK_FENCE\"",
        ])
        .run()
        .ok();
    let fence = out.stdout.trim().strip_prefix("fence ").unwrap_or_default();
    assert!(fence.parse::<u64>().is_ok_and(|f| f > 0), "{}", out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}
