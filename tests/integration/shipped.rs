//! The binary as shipped: `make build` (scripts/cargo-release.sh) links
//! the C library in on Linux with glibc. scripts/test.sh builds it after
//! the suite and runs these tests again with RLOCK_TEST_SHIPPED=<its
//! path>; in the suite's own run they take the binary this test run built
//! (a plain cargo build, dynamically linked). What a static glibc could
//! change is what they check: the link itself, a host name resolved
//! through nsswitch.conf's `files`, the holder's user name from the
//! password database, TLS (certificate files, random numbers), and the
//! package's dependencies.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

/// The binary under test, and whether it is the shipped build.
fn binary() -> (PathBuf, bool) {
    match std::env::var_os("RLOCK_TEST_SHIPPED") {
        Some(p) => (PathBuf::from(p), true),
        None => (PathBuf::from(env!("CARGO_BIN_EXE_rlock")), false),
    }
}

/// Whether the ELF file has a program interpreter (PT_INTERP): a
/// dynamically linked executable does, a static one (static PIE included)
/// does not. ELF64 little-endian only (what this suite runs on).
fn has_interpreter(path: &Path) -> bool {
    let elf = std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert!(
        elf.len() > 64 && elf[..4] == *b"\x7fELF" && elf[4] == 2 && elf[5] == 1,
        "{path:?} is not a little-endian ELF64 file"
    );
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let phoff = usize::try_from(u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap())).unwrap();
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3 // PT_INTERP
    })
}

#[test]
fn the_shipped_build_links_the_c_library_in_on_linux_with_glibc() {
    let (bin, shipped) = binary();
    let linux_gnu = cfg!(all(target_os = "linux", target_env = "gnu"));
    // scripts/cargo-release.sh links statically where the C compiler
    // finds glibc's archive, and says it builds a dynamic binary where not.
    let libc_a = Command::new("cc")
        .arg("-print-file-name=libc.a")
        .output()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_ok_and(|p| p.is_absolute() && p.exists());
    if shipped && linux_gnu && libc_a {
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
fn the_shipped_binary_resolves_a_host_name_and_names_its_user() {
    let (bin, _) = binary();
    let r = Redis::start();
    // `localhost`, from /etc/hosts (nsswitch.conf's `files`): the server
    // listens on 127.0.0.1 only, so an address list without it fails.
    let url = r.url().replace("127.0.0.1", "localhost");
    assert!(url.contains("localhost"), "{url}");
    let out = Command::new(&bin)
        .env("RLOCK_URL", &url)
        .env("RLOCK_PREFIX", &r.prefix)
        .args([
            "exec",
            "shipped",
            "--",
            "sh",
            "-c",
            "exec \"$0\" status shipped --json",
        ])
        .arg(&bin)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let holder = &status["holders"][0];
    assert_eq!(status["held"], true, "{status}");
    // The password database's name for this uid, and the kernel's host
    // name: what the holder info says the build looked up.
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let user = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == uid.to_string())
        .map(|f| f[0].to_string());
    if let Some(user) = user {
        assert_eq!(holder["user"], user.as_str(), "{status}");
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(holder["host"], host.trim(), "{status}");
    assert!(!r.held("shipped"), "released after the command");
}

#[test]
fn the_shipped_binary_packages_with_the_dependencies_it_has() {
    let (bin, _) = binary();
    let dir = std::env::temp_dir().join(format!("rlock-shipped-deb-{}", std::process::id()));
    let deb = crate::deb::make_deb_of(&bin, &dir);
    let control = crate::deb::stdout(Command::new("dpkg-deb").arg("-f").arg(&deb));
    let depends = control.lines().find(|l| l.starts_with("Depends:"));
    if has_interpreter(&bin) {
        let depends = depends.unwrap_or_else(|| panic!("no Depends: {control}"));
        assert!(depends.contains("libc6"), "{depends}");
    } else {
        assert_eq!(depends, None, "a static binary depends on nothing");
    }
    // The packaged binary is the one given (stripped: same link).
    let root = dir.join("root");
    crate::deb::stdout(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
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
    let out = Command::new(&bin)
        .env("RLOCK_URL", format!("rediss://localhost:{}", r.port))
        .env("RLOCK_TLS_CA", file("ca.crt"))
        .env("RLOCK_TLS_CERT", file("client.crt"))
        .env("RLOCK_TLS_KEY", file("client.key"))
        .args([
            "exec",
            "tls",
            "--",
            "sh",
            "-c",
            "echo \"fence $RLOCK_FENCE\"",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    let fence = said.trim().strip_prefix("fence ").unwrap_or_default();
    assert!(fence.parse::<u64>().is_ok_and(|f| f > 0), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
