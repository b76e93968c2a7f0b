//! Secrets on the command line of `rlock exec` never reach Redis: each
//! kind of secret is run (by stand-ins named like the real programs, so
//! nothing real runs) under a real lock, and neither `status --json`
//! while it runs nor `history --json` after shows it.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::util::*;

#[test]
fn status_and_history_show_no_secret_of_any_kind() {
    let r = Redis::shared();
    let dir = tmp_dir("redaction", "standins");
    let go = dir.join("go");
    // Holds the lock until the test has read status.
    let standin = dir.join("standin");
    std::fs::write(
        &standin,
        "#!/bin/sh\nwhile [ ! -e \"$GO\" ]; do sleep 0.02; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&standin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let prog = |name: &str| {
        let p = dir.join(name);
        if !p.exists() {
            std::os::unix::fs::symlink(&standin, &p).unwrap();
        }
        p.display().to_string()
    };
    let gh = format!("ghp_{}", "Zq7".repeat(12));
    let cases: Vec<(Vec<String>, String)> = [
        (
            vec![prog("curl"), "-u".into(), "admin:Pw-curl-u".into()],
            "Pw-curl-u",
        ),
        (
            vec![prog("curl"), "--user".into(), "admin:Pw-user".into()],
            "Pw-user",
        ),
        (
            vec![
                prog("curl"),
                "-H".into(),
                "Authorization:Bearer Pw-bearer".into(),
            ],
            "Pw-bearer",
        ),
        (
            vec![
                prog("curl"),
                "-H".into(),
                "Cookie: session=Pw-cookie".into(),
            ],
            "Pw-cookie",
        ),
        (
            vec![prog("curl"), "-b".into(), "session=Pw-b".into()],
            "Pw-b",
        ),
        (
            vec![
                prog("git"),
                "-c".into(),
                "http.extraHeader=Authorization: Bearer Pw-git".into(),
                "fetch".into(),
            ],
            "Pw-git",
        ),
        (
            vec![prog("gpg"), "--passphrase".into(), "Pw-gpg".into()],
            "Pw-gpg",
        ),
        (
            vec![
                prog("mount"),
                "-o".into(),
                "username=b,password=Pw-mount".into(),
            ],
            "Pw-mount",
        ),
        (
            vec![
                prog("docker"),
                "login".into(),
                "-p".into(),
                "Pw-docker".into(),
            ],
            "Pw-docker",
        ),
        (
            vec!["env".into(), "MYSQL_PWD=Pw-mysql".into(), prog("mysql")],
            "Pw-mysql",
        ),
        (
            vec![prog("pscp"), "-pw".into(), "Pw-pscp".into()],
            "Pw-pscp",
        ),
        (
            vec![prog("smbclient"), "-U".into(), "bob%Pw-smb".into()],
            "Pw-smb",
        ),
        (
            vec![
                prog("curl"),
                "-d".into(),
                r#"{"password":"Pw-json"}"#.into(),
            ],
            "Pw-json",
        ),
        (vec![prog("deploy"), format!("--to={gh}")], &gh[4..]),
        (
            vec![prog("aws"), "AKIAIOSFODNN7EXAMPLE".into()],
            "IOSFODNN7EXAMPLE",
        ),
    ]
    .into_iter()
    .map(|(argv, secret)| (argv, secret.to_string()))
    .collect();
    for (argv, secret) in &cases {
        let _ = std::fs::remove_file(&go);
        let child = rlock(&r)
            .env("GO", &go.display().to_string())
            .args(["exec", "secrets", "--"])
            .args(argv)
            .spawn();
        eventually(Duration::from_secs(10), "the lock", || r.held("secrets"));
        let st = r.status_json("secrets");
        let shown = st["holders"][0]["cmd"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        std::fs::write(&go, "").unwrap();
        finish(child, "exec").ok();
        assert!(shown.contains("***"), "{argv:?}: {shown}");
        assert!(!st.to_string().contains(secret.as_str()), "{argv:?}: {st}");
    }
    let history = rlock(&r)
        .args(["history", "secrets", "--json", "--limit", "100"])
        .run()
        .ok()
        .stdout;
    assert_eq!(history.lines().count(), 2 * cases.len(), "{history}");
    for (argv, secret) in &cases {
        assert!(!history.contains(secret.as_str()), "{argv:?}: {history}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
