//! The command line never runs a command other than the one meant: the
//! examples of issue 30, each run against stand-in programs on PATH that
//! record the arguments they were given (and the locks held while they
//! ran), so a test sees exactly what would have run.

use std::path::{Path, PathBuf};

use crate::util::*;

/// A directory of stand-ins for `names`: each appends `NAME ARGS...` and
/// then the locks it runs under (RLOCK_FENCES's names, or RLOCK_KEY) to
/// `calls`, one line per call.
fn stand_ins(test: &str, names: &[&str]) -> (PathBuf, PathBuf) {
    let dir = tmp_dir("wrong-command", test);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = dir.join("calls");
    for name in names {
        let path = bin.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nlocks=$(printf '%s' \"${{RLOCK_FENCES:-$RLOCK_KEY=}}\" | sed 's/=[0-9]*//g')\n\
                 echo \"{name} $* | $locks\" >> '{}'\n",
                calls.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (bin, calls)
}

fn path_with(bin: &Path) -> String {
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

/// What the stand-ins recorded, or "" when none ran.
fn calls(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap_or_default()
}

/// Each line of the first list: refused with 64, naming both
/// readings, nothing run, nothing held; then each reading written so that
/// it reads one way runs exactly that.
#[test]
fn a_line_that_reads_two_ways_runs_nothing() {
    let r = Redis::start();
    let names = [
        "ssh", "touch", "timeout", "sleep", "kubectl", "cmd", "echo", "world", "b",
    ];
    let (bin, file) = stand_ins("two-ways", &names);
    let path = path_with(&bin);
    for line in [
        "exec k ssh host -- touch /tmp/x",
        "exec k timeout 1 -- sleep 3",
        "exec k kubectl exec pod -- cmd",
        "rw write k ssh host -- touch /tmp/x",
        "exec k echo hello -- world",
        "exec a b --ttl 5s -- cmd",
        "exec a b -n -- cmd",
        "exec a b -- cmd",
    ] {
        let words: Vec<&str> = line.split(' ').collect();
        let run = rlock(&r)
            .env("PATH", &path)
            .args(&words)
            .run()
            .fails(64, "reads two ways");
        assert!(
            run.stderr.lines().count() == 1,
            "`{line}`: not one line: {}",
            run.stderr
        );
        assert_eq!(calls(&file), "", "`{line}` ran something");
        assert!(r.keys().is_empty(), "`{line}` wrote {:?}", r.keys());
    }
    // Each reading, written unambiguously, runs what it says.
    for (line, want) in [
        (
            "exec k -- ssh host -- touch /tmp/x",
            "ssh host -- touch /tmp/x | k",
        ),
        (
            "exec k --and ssh --and host -- touch /tmp/x",
            "touch /tmp/x | host ssh k",
        ),
        ("exec k -- timeout 1 -- sleep 3", "timeout 1 -- sleep 3 | k"),
        (
            "exec k -- kubectl exec pod -- cmd",
            "kubectl exec pod -- cmd | k",
        ),
        (
            "rw write k -- ssh host -- touch /tmp/x",
            "ssh host -- touch /tmp/x | k",
        ),
        ("exec k -- echo hello -- world", "echo hello -- world | k"),
        ("exec a -- b --ttl 5s -- cmd", "b --ttl 5s -- cmd | a"),
        ("exec a --and b --ttl 5s -- cmd", "cmd  | a b"),
        ("exec a --and b -n -- cmd", "cmd  | a b"),
        // flock's form, no `--` before the command: flock's meaning.
        ("exec k ssh host touch /tmp/x", "ssh host touch /tmp/x | k"),
        ("exec -n k echo hello world", "echo hello world | k"),
        ("exec k -n echo --ttl 5s", "echo --ttl 5s | k"),
    ] {
        let _ = std::fs::remove_file(&file);
        let words: Vec<&str> = line.split(' ').collect();
        rlock(&r).env("PATH", &path).args(&words).run().ok();
        // RLOCK_FENCES lists a set's locks in canonical (name) order.
        let got = calls(&file);
        let got = got.trim_end();
        let sorted = |s: &str| -> String {
            let (cmd, locks) = s.rsplit_once(" | ").unwrap_or((s, ""));
            let mut l: Vec<&str> = locks.split_whitespace().collect();
            l.sort_unstable();
            format!("{cmd} | {}", l.join(" "))
        };
        assert_eq!(sorted(got), sorted(want), "`{line}`");
    }
    r.assert_nothing_held(&[]);
}

/// The refusal says what each reading runs and how to write each.
#[test]
fn the_refusal_names_both_readings() {
    let r = Redis::shared();
    let run = rlock(&r)
        .args(["exec", "k", "ssh", "host", "--", "touch", "/tmp/x"])
        .run()
        .fails(64, "runs `ssh host -- touch /tmp/x` under lock \"k\"");
    for part in [
        "runs `touch /tmp/x` under locks \"k\", \"ssh\", \"host\"",
        "`rlock exec [OPTIONS] k -- ssh host -- touch /tmp/x`",
        "`rlock exec [OPTIONS] k --and ssh --and host -- touch /tmp/x`",
    ] {
        assert!(run.stderr.contains(part), "{part}: {}", run.stderr);
    }
}

/// An option after a second key (`a --and b --ttl 5s`) is an option: it
/// applies, to every lock of the set.
#[test]
fn an_option_after_the_keys_applies() {
    let r = Redis::start();
    let child = rlock(&r)
        .args(["exec", "a", "--and", "b", "--ttl", "7s", "--", "sleep", "3"])
        .spawn();
    eventually(std::time::Duration::from_secs(5), "the set held", || {
        r.held("b")
    });
    for k in ["a", "b"] {
        let pttl: i64 = r.cmd(&["PTTL", &r.key(k)]);
        assert!(pttl > 3_000 && pttl <= 7_000, "{k}: PTTL {pttl}");
    }
    finish(child, "exec a --and b --ttl 7s").code(0);
    r.assert_nothing_held(&[]);
}
