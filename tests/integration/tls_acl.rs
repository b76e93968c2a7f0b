//! TLS (`rediss://` with a CA and client certificates made here with
//! openssl) and the least-privilege ACL documented in the README.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

/// A CA, a server certificate for localhost/127.0.0.1 and a client
/// certificate, all signed by the CA, in a fresh directory.
pub(crate) fn certificates(name: &str) -> PathBuf {
    let dir = rlock_test_support::scratch_dir(&format!("tls-{name}"));
    let sh = |script: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sh(
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj '/CN=rlock test CA'",
    );
    sh("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san");
    for who in ["server", "client"] {
        sh(&format!(
            "openssl req -newkey rsa:2048 -nodes -keyout {who}.key -out {who}.csr -subj '/CN={who}' && \
             openssl x509 -req -in {who}.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out {who}.crt -days 2 -extfile san"
        ));
    }
    dir
}

pub(crate) fn tls_server(dir: &Path, client_certs: bool) -> Redis {
    let p = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let auth = if client_certs { "yes" } else { "no" };
    Redis::start_with(&[
        "--port",
        "0",
        "--tls-port",
        "{port}",
        "--tls-cert-file",
        &p("server.crt"),
        "--tls-key-file",
        &p("server.key"),
        "--tls-ca-cert-file",
        &p("ca.crt"),
        "--tls-auth-clients",
        auth,
    ])
}

#[test]
fn rediss_with_a_custom_ca() {
    let dir = certificates("ca");
    let r = tls_server(&dir, false);
    let url = format!("rediss://localhost:{}", r.port);
    let ca = dir.join("ca.crt");
    let ca = ca.to_str().unwrap();
    let tok = bare_rlock()
        .args(["--url", &url, "--tls-ca", ca, "acquire", "k"])
        .run()
        .ok()
        .token();
    bare_rlock()
        .env("RLOCK_URL", &url)
        .env("RLOCK_TLS_CA", ca)
        .args(["exec", "-w", "1s", "x", "--", "true"])
        .run()
        .ok();
    bare_rlock()
        .args([
            "--url", &url, "--tls-ca", ca, "release", "k", "--token", &tok,
        ])
        .run()
        .ok();
    // Without the CA the server's certificate is not trusted.
    bare_rlock()
        .args(["--url", &url, "status", "k"])
        .run()
        .fails(69, "certificate");
    // Plain redis:// to a TLS port fails as unreachable, not with a panic.
    let plain = format!("redis://127.0.0.1:{}", r.port);
    bare_rlock()
        .args(["--url", &plain, "--connect-timeout", "500ms", "status", "k"])
        .run()
        .code(69);
    // TLS files with a plain URL are a usage error.
    bare_rlock()
        .args(["--url", &plain, "--tls-ca", ca, "status", "k"])
        .run()
        .fails(64, "rediss://");
    bare_rlock()
        .args([
            "--url",
            &url,
            "--tls-ca",
            "/nonexistent/ca.crt",
            "status",
            "k",
        ])
        .run()
        .fails(64, "cannot read");
    // A file with no certificate (here the CA's key): bad input, not a
    // handshake that fails as if the server were at fault (it was exit 69).
    let key = dir.join("ca.key");
    bare_rlock()
        .args(["--url", &url, "--tls-ca", key.to_str().unwrap()])
        .args(["status", "k"])
        .run()
        .fails(64, "no certificate");
}

#[test]
fn rediss_with_a_client_certificate() {
    let dir = certificates("mtls");
    let r = tls_server(&dir, true);
    let url = format!("rediss://127.0.0.1:{}", r.port);
    let f = |name: &str| dir.join(name).to_str().unwrap().to_string();
    bare_rlock()
        .args([
            "--url",
            &url,
            "--tls-ca",
            &f("ca.crt"),
            "--tls-cert",
            &f("client.crt"),
            "--tls-key",
            &f("client.key"),
        ])
        .args(["exec", "k", "--", "true"])
        .run()
        .ok();
    // The server demands a client certificate.
    bare_rlock()
        .args(["--url", &url, "--tls-ca", &f("ca.crt"), "status", "k"])
        .run()
        .code(69);
    bare_rlock()
        .args(["--url", &url, "--tls-cert", &f("client.crt"), "status", "k"])
        .run()
        .code(64);
    // The key given for the certificate too: bad input, not a refused
    // handshake (it was exit 69).
    bare_rlock()
        .args(["--url", &url, "--tls-ca", &f("ca.crt")])
        .args([
            "--tls-cert",
            &f("client.key"),
            "--tls-key",
            &f("client.key"),
        ])
        .args(["status", "k"])
        .run()
        .fails(64, "no certificate");
}

/// The ACL docs/deployments.md documents for the operator role (every
/// rlock command), word for word.
pub(crate) fn readme_acl() -> Vec<String> {
    role_acl("operator")
}

/// The ACL line docs/deployments.md ("Roles") gives role `role`'s user
/// `rlock-<role>`, word for word.
pub(crate) fn role_acl(role: &str) -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deployments.md"))
            .unwrap();
    let start = format!("ACL SETUSER rlock-{role} ");
    let line = readme
        .lines()
        .find(|l| l.trim_start().starts_with(&start))
        .unwrap_or_else(|| panic!("docs/deployments.md documents `{start}...`"));
    let six = redis_version() < (7, 0);
    // Redis 6.2 refuses the read-only script calls' names: the doc says
    // to drop them there.
    line.split_whitespace()
        .filter(|w| !(six && (*w == "+evalsha_ro" || *w == "+eval_ro")))
        .map(str::to_string)
        .collect()
}

/// Every command a script runs (`redis.call('X'`, `redis.pcall('X'`, or
/// `call('X'` where a part of lua/part/ is given either, in lua/ and
/// lua/part/) is one the documented ACL allows: a path the other tests
/// miss (a rare branch) would otherwise fail only for least-privileged
/// users.
#[test]
fn the_documented_acl_allows_every_command_the_scripts_run() {
    let acl = readme_acl();
    let mut missing = Vec::new();
    let mut files = 0;
    for dir in ["/lua", "/lua/part"] {
        let dir = format!("{}{dir}", env!("CARGO_MANIFEST_DIR"));
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                continue;
            }
            files += 1;
            let code = std::fs::read_to_string(&path).unwrap();
            for rest in code.split("call('").skip(1) {
                let cmd: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
                let allowed = format!("+{}", cmd.to_lowercase());
                if !acl.contains(&allowed) {
                    missing.push(format!("{cmd} ({})", path.display()));
                }
            }
        }
    }
    assert!(files > 15, "{files} files");
    assert!(missing.is_empty(), "not in the documented ACL: {missing:?}");
}

#[test]
fn every_command_works_as_the_least_privileged_acl_user() {
    let r = Redis::start();
    let acl = readme_acl();
    let args: Vec<&str> = acl.iter().map(String::as_str).collect();
    let _: () = r.cmd(&args);
    let url = format!(
        "redis://rlock-operator:operator-secret@127.0.0.1:{}",
        r.port
    );
    let run = |a: &[&str]| bare_rlock().env("RLOCK_URL", &url).args(a).run();
    let tok = run(&["acquire", "k"]).ok().token();
    run(&["renew", "k", "--token", &tok]).ok();
    run(&["status", "k"]).ok();
    run(&["list"]).ok();
    run(&["history", "k"]).ok();
    assert!(run(&["top", "--once"]).ok().stdout.contains("\nk "));
    assert!(run(&["metrics"]).ok().stdout.contains("{lock=\"k\"} 1"));
    // A waiter is woken by the release (BLPOP, RPUSH inside the script).
    let waiter = bare_rlock()
        .env("RLOCK_URL", &url)
        .args(["acquire", "k"])
        .spawn();
    r.await_waiters("k", 1);
    run(&["release", "k", "--token", &tok]).ok();
    let next = finish(waiter, "waiter").ok().token();
    run(&["release", "k", "--token", &next]).ok();
    run(&["exec", "k", "--", "true"]).ok();
    run(&["rw", "read", "cat", "--", "true"]).ok();
    run(&["exec", "--limit", "2", "sem", "--", "true"]).ok();
    // Interrupting a wait pokes the wake-up list (RPUSH, PEXPIRE).
    let holder = run(&["acquire", "k"]).ok().token();
    let waiter = bare_rlock()
        .env("RLOCK_URL", &url)
        .args(["acquire", "k"])
        .spawn();
    r.await_waiters("k", 1);
    kill(waiter.id(), libc::SIGINT);
    finish(waiter, "waiter").code(130);
    run(&["release", "k", "--token", &holder]).ok();
    // An operator's break (break.lua), and the renewal that reads its notice.
    let broken = run(&["acquire", "k"]).ok().token();
    run(&["break", "k", "--reason", "acl", "--yes"]).ok();
    run(&["renew", "k", "--token", &broken]).fails(79, "broken by");
    // Held, marked, until its holder gives it back (release.lua).
    run(&["release", "k", "--token", &broken]).fails(79, "broken by");
    r.assert_nothing_held(&[]);
    // And the user is really limited: keys outside the prefix are refused.
    run(&["--prefix", "other:", "status", "k"]).fails(77, "NOPERM");
}
