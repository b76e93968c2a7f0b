//! `make deb` (scripts/deb.sh): the Debian package's metadata and files,
//! unpacked into a scratch root and run from there. It packages the
//! binary this test run built (`make deb RLOCK_BIN=...` builds nothing),
//! as the `make install` test does: no release build here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub(crate) fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run(cmd).stdout).unwrap()
}

/// `make deb` of this test run's binary into a fresh directory; returns
/// the .deb's path.
fn make_deb(dir: &Path) -> PathBuf {
    make_deb_of(Path::new(env!("CARGO_BIN_EXE_rlock")), dir)
}

/// `make deb RLOCK_BIN=bin` into a fresh directory; returns the .deb's path.
pub(crate) fn make_deb_of(bin: &Path, dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let _ = std::fs::remove_dir_all(dir);
    let printed = stdout(
        crate::util::make()
            .current_dir(root)
            .args(["-s", "deb"])
            .arg(format!("RLOCK_BIN={}", bin.display()))
            .arg(format!("DEB_DIR={}", dir.display())),
    );
    let arch = stdout(Command::new("dpkg").arg("--print-architecture"));
    // A pre-release's `-` is `~` in Debian versions: 1.0.0~rc.1 < 1.0.0.
    let version = env!("CARGO_PKG_VERSION").replace('-', "~");
    let deb = dir.join(format!("rlock_{version}_{}.deb", arch.trim()));
    assert_eq!(printed.trim(), deb.display().to_string());
    assert!(deb.is_file(), "{deb:?} missing");
    deb
}

#[test]
fn make_deb_builds_a_package_whose_fields_files_and_binary_are_right() {
    let dir = rlock_test_support::scratch_path("deb");
    let deb = make_deb(&dir);
    let field = |name: &str| stdout(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(name));

    // The control fields, from Cargo.toml and dpkg.
    assert_eq!(field("Package").trim(), "rlock");
    assert_eq!(
        field("Version").trim(),
        env!("CARGO_PKG_VERSION").replace('-', "~")
    );
    assert_eq!(
        field("Architecture").trim(),
        stdout(Command::new("dpkg").arg("--print-architecture")).trim()
    );
    assert_eq!(field("Section").trim(), "utils");
    assert_eq!(field("Priority").trim(), "optional");
    let homepage = match env!("CARGO_PKG_HOMEPAGE") {
        "" => env!("CARGO_PKG_REPOSITORY"),
        h => h,
    };
    assert_eq!(field("Homepage").trim(), homepage);
    let maintainer = field("Maintainer");
    assert!(
        maintainer.contains(" <") && maintainer.trim().ends_with('>'),
        "Maintainer: {maintainer}"
    );
    let description = field("Description");
    let mut lines = description.lines();
    assert_eq!(lines.next(), Some(env!("CARGO_PKG_DESCRIPTION")));
    let long: Vec<_> = lines.collect();
    assert!(long.len() >= 3, "no long description: {description}");
    assert!(long.iter().all(|l| l.starts_with(' ')), "{description}");

    // The files: exactly these, all root's, with Debian's modes.
    let listing = stdout(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let mut files = BTreeSet::new();
    for line in listing.lines() {
        let cols: Vec<_> = line.split_whitespace().collect();
        let (mode, owner, path) = (cols[0], cols[1], cols[5]);
        assert_eq!(owner, "root/root", "{line}");
        match mode.chars().next() {
            Some('d') => assert_eq!(mode, "drwxr-xr-x", "{line}"),
            Some('-') if path == "./usr/bin/rlock" => assert_eq!(mode, "-rwxr-xr-x", "{line}"),
            Some('-') => assert_eq!(mode, "-rw-r--r--", "{line}"),
            _ => panic!("neither file nor directory: {line}"),
        }
        if !mode.starts_with('d') {
            files.insert(path.trim_start_matches("./").to_string());
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages: Vec<String> = std::fs::read_dir(root.join("man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    assert!(pages.len() > 10 && pages.contains(&"rlock-exec.1".to_string()));
    let completions = [
        ("rlock.bash", "usr/share/bash-completion/completions/rlock"),
        ("_rlock", "usr/share/zsh/vendor-completions/_rlock"),
        (
            "rlock.fish",
            "usr/share/fish/vendor_completions.d/rlock.fish",
        ),
    ];
    let mut expected: BTreeSet<String> = [
        "usr/bin/rlock",
        "usr/share/doc/rlock/copyright",
        "usr/share/doc/rlock/changelog.gz",
        "usr/share/doc/rlock/changelog.Debian.gz",
        // The exporter's unit and the alert rules, as examples.
        "usr/share/doc/rlock/examples/rlock-exporter.service",
        "usr/share/doc/rlock/examples/alerts.yml",
    ]
    .into_iter()
    .chain(completions.iter().map(|c| c.1))
    .map(String::from)
    .collect();
    expected.extend(pages.iter().map(|p| format!("usr/share/man/man1/{p}.gz")));
    assert_eq!(files, expected);

    // Installed by dpkg into a scratch root (its own empty dpkg database:
    // --force-depends, as libc6 is not "installed" there): the binary runs,
    // the man pages are the generated ones compressed as policy wants
    // (gzip -9n: best compression, no name, no timestamp), the completions
    // are the committed ones, dpkg --verify finds every file as its
    // md5sums say, and removing the package leaves nothing behind.
    let scratch = dir.join("root");
    let admin = scratch.join("var/lib/dpkg");
    for d in ["info", "updates", "triggers"] {
        std::fs::create_dir_all(admin.join(d)).unwrap();
    }
    std::fs::write(admin.join("status"), "").unwrap();
    let dpkg = || {
        let mut c = Command::new("dpkg");
        c.arg(format!("--root={}", scratch.display()))
            .arg("--log=/dev/null")
            .arg("--force-not-root");
        c
    };
    run(dpkg().arg("--force-depends").arg("-i").arg(&deb));
    let v = stdout(Command::new(scratch.join("usr/bin/rlock")).arg("--version"));
    assert_eq!(v.trim(), format!("rlock {}", env!("CARGO_PKG_VERSION")));
    for page in &pages {
        let gz = scratch.join(format!("usr/share/man/man1/{page}.gz"));
        let bytes = std::fs::read(&gz).unwrap();
        assert_eq!(&bytes[..3], &[0x1f, 0x8b, 8], "{page}: not gzip");
        assert_eq!(bytes[3] & 0x08, 0, "{page}: gzip stored a name (no -n)");
        assert_eq!(&bytes[4..8], &[0, 0, 0, 0], "{page}: gzip stored a time");
        assert_eq!(bytes[8], 2, "{page}: not gzip -9");
        let text = run(Command::new("gzip").arg("-dc").arg(&gz)).stdout;
        assert_eq!(text, std::fs::read(root.join("man").join(page)).unwrap());
    }
    for (source, installed) in completions {
        assert_eq!(
            std::fs::read(scratch.join(installed)).unwrap(),
            std::fs::read(root.join("completions").join(source)).unwrap(),
            "{installed}"
        );
    }
    for (source, installed) in [
        (
            "contrib/systemd/rlock-exporter.service",
            "usr/share/doc/rlock/examples/rlock-exporter.service",
        ),
        (
            "contrib/prometheus/alerts.yml",
            "usr/share/doc/rlock/examples/alerts.yml",
        ),
    ] {
        assert_eq!(
            std::fs::read(scratch.join(installed)).unwrap(),
            std::fs::read(root.join(source)).unwrap(),
            "{installed}"
        );
    }
    let copyright = std::fs::read_to_string(scratch.join("usr/share/doc/rlock/copyright")).unwrap();
    assert_eq!(env!("CARGO_PKG_LICENSE"), "MIT OR Apache-2.0");
    for needle in [
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n",
        "License: MIT or Apache-2.0\n",
        "\nLicense: MIT\n",
        "\nLicense: Apache-2.0\n",
        "/usr/share/common-licenses/Apache-2.0",
    ] {
        assert!(copyright.contains(needle), "{needle:?} not in\n{copyright}");
    }
    run(dpkg().args(["--verify", "rlock"]));
    // Installed-Size: KiB per file rounded up, 1 per directory.
    let size: u64 = field("Installed-Size").trim().parse().unwrap();
    assert_eq!(size, kib(&scratch.join("usr")));

    // Depends, checked against a second way of computing it: every
    // library the binary links (ELF NEEDED) belongs to a package that
    // Depends names, with a minimum version.
    let depends = field("Depends");
    let dynamic = stdout(
        Command::new("objdump")
            .arg("-p")
            .arg(scratch.join("usr/bin/rlock")),
    );
    let needed: Vec<&str> = dynamic
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(str::trim)
        .collect();
    assert!(needed.contains(&"libc.so.6"), "{dynamic}");
    for lib in needed {
        let owners = stdout(Command::new("dpkg").arg("-S").arg(format!("*/{lib}")));
        let package = owners
            .lines()
            .next()
            .and_then(|l| l.split([':', ',']).next())
            .unwrap_or_else(|| panic!("no package ships {lib}"));
        assert!(
            depends
                .split(',')
                .any(|d| d.trim().starts_with(&format!("{package} (>= "))),
            "{lib} is {package}'s, not in Depends: {depends}"
        );
    }

    // lintian, where it is installed: its findings are printed, and an
    // error (E:) fails the test; warnings and infos do not.
    match Command::new("lintian")
        .args(["-I", "-E", "--pedantic"])
        .arg(&deb)
        .output()
    {
        Err(_) => eprintln!("lintian is not installed: not run"),
        Ok(out) => {
            let report = String::from_utf8_lossy(&out.stdout);
            eprintln!("lintian:\n{report}{}", String::from_utf8_lossy(&out.stderr));
            let errors: Vec<_> = report.lines().filter(|l| l.starts_with("E:")).collect();
            assert!(errors.is_empty(), "lintian errors: {errors:#?}");
        }
    }
    run(dpkg().args(["--remove", "rlock"]));
    assert!(
        !scratch.join("usr").exists(),
        "left after dpkg --remove: {}",
        stdout(Command::new("find").arg(scratch.join("usr")))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What dpkg-gencontrol counts as Installed-Size below `dir`.
fn kib(dir: &Path) -> u64 {
    let mut n = 1;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        n += if meta.is_dir() {
            kib(&p)
        } else {
            meta.len().div_ceil(1024)
        };
    }
    n
}

#[test]
fn make_deb_without_a_binary_says_what_is_missing_and_writes_nothing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = rlock_test_support::scratch_path("nodeb");
    let out = crate::util::make()
        .current_dir(root)
        .args(["-s", "deb", "RLOCK_BIN=/nonexistent/rlock"])
        .arg(format!("DEB_DIR={}", dir.display()))
        .output()
        .expect("make");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("rlock: /nonexistent/rlock is missing") && first.contains("make deb"),
        "{err}"
    );
    assert!(!dir.exists(), "wrote {dir:?}");
}

#[test]
fn make_deb_builds_the_release_binary_unless_given_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // -n: what make would run, without running it (a release build takes
    // minutes).
    let plan = |args: &[&str]| {
        stdout(
            crate::util::make()
                .current_dir(root)
                .args(["-n", "deb"])
                .args(args),
        )
    };
    let default = plan(&[]);
    let lines: Vec<_> = default.lines().collect();
    assert_eq!(lines.len(), 2, "{default}");
    // `make build`: the shipped build (scripts/cargo-release.sh), whose
    // binary is where the script says.
    assert!(
        lines[0].starts_with("scripts/cargo-release.sh build --locked --release"),
        "{default}"
    );
    let dir = stdout(
        Command::new("scripts/cargo-release.sh")
            .current_dir(root)
            .arg("--dir"),
    );
    assert!(
        lines[1].contains(&format!("RLOCK_BIN={}/rlock", dir.trim()))
            && lines[1].ends_with("scripts/deb.sh"),
        "{default}"
    );
    let given = plan(&["RLOCK_BIN=/some/rlock"]);
    assert!(!given.contains("cargo"), "{given}");
    assert!(given.contains("RLOCK_BIN=/some/rlock"), "{given}");
}

/// `make deb` where git cannot tell the last commit's time (GIT_DIR
/// pointing nowhere, as in a tarball without .git or a checkout git
/// refuses): with SOURCE_DATE_EPOCH, a package stamped with it; without,
/// one line asking for it, exit nonzero, nothing written (never the
/// build's own time, which would make every build differ).
#[test]
fn make_deb_without_git_needs_source_date_epoch() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = rlock_test_support::scratch_path("nogit");
    let make = || {
        let mut cmd = crate::util::make();
        cmd.current_dir(root)
            .args(["-s", "deb"])
            .arg(format!("RLOCK_BIN={}", env!("CARGO_BIN_EXE_rlock")))
            .arg(format!("DEB_DIR={}", dir.display()))
            .env("GIT_DIR", dir.join("no-git"))
            .env_remove("SOURCE_DATE_EPOCH");
        cmd
    };
    let out = make().output().expect("make");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let lines: Vec<_> = err.lines().filter(|l| !l.starts_with("make")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("rlock: ") && lines[0].contains("set SOURCE_DATE_EPOCH"),
        "{err}"
    );
    assert!(!dir.exists(), "{dir:?} written");

    let printed = stdout(make().env("SOURCE_DATE_EPOCH", "1700000000"));
    let deb = PathBuf::from(printed.trim());
    let listing = stdout(
        Command::new("dpkg-deb")
            .arg("-c")
            .arg(&deb)
            .env("TZ", "UTC"),
    );
    assert!(
        listing.lines().all(|l| l.contains("2023-11-14 22:13")),
        "{listing}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
