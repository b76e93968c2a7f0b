//! A throwaway single-node etcd, for the `etcdctl lock` comparison rows.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::client::clean_env;
use crate::process::{on_path, path, run_ok, wait_until};
use crate::support::{unwatch, watch};

/// An etcd child process, single member, on two free loopback ports (client
/// and peer); killed and its data dir removed on drop.
pub(crate) struct Etcd {
    child: Child,
    pub(crate) port: u16,
    dir: PathBuf,
    pub(crate) version: String,
}

impl Etcd {
    /// Err says why there is none: not installed, or failed to start.
    pub(crate) fn start() -> Result<Etcd, String> {
        if !on_path("etcd") || !on_path("etcdctl") {
            return Err("not installed".into());
        }
        let mut why = String::new();
        for attempt in 0..5 {
            match Etcd::try_start(attempt) {
                Ok(e) => return Ok(e),
                Err(e) => why = e,
            }
        }
        Err(format!("failed to start after 5 tries ({why})"))
    }

    fn try_start(attempt: u32) -> Result<Etcd, String> {
        // Both listeners open at once, so that the two ports differ.
        let bind = || TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let (a, b) = (bind(), bind());
        let port_of = |l: TcpListener| l.local_addr().expect("local address").port();
        let (port, peer) = (port_of(a), port_of(b));
        let dir = rlock_test_support::scratch_dir(&format!("bench-etcd-{attempt}-{port}"));
        let log = std::fs::File::create(dir.join("etcd.log")).expect("create etcd.log");
        let client_url = format!("http://127.0.0.1:{port}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new("etcd");
        clean_env(&mut cmd);
        cmd.args(["--name", "default", "--data-dir", &path(&dir.join("data"))])
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("default={peer_url}")])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .args(["--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = cmd.spawn().map_err(|e| format!("spawn etcd: {e}"))?;
        let mut e = Etcd {
            child,
            port,
            dir,
            version: String::new(),
        };
        watch(&e.child, &e.dir);
        let healthy = wait_until(Duration::from_secs(10), || {
            matches!(e.child.try_wait(), Ok(None))
                && e.ctl()
                    .args(["--dial-timeout=1s", "--command-timeout=2s"])
                    .args(["endpoint", "health"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
        });
        if !healthy {
            let log = std::fs::read_to_string(e.dir.join("etcd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(3).collect();
            return Err(format!("not healthy within 10 s; log ends {tail:?}"));
        }
        let out = Command::new("etcd").arg("--version").output();
        e.version = out
            .ok()
            .and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                let v = text.lines().next()?.strip_prefix("etcd Version:")?.trim();
                Some(v.to_string())
            })
            .unwrap_or_else(|| "?".into());
        Ok(e)
    }

    pub(crate) fn endpoints_arg(&self) -> String {
        format!("--endpoints=http://127.0.0.1:{}", self.port)
    }

    /// etcdctl pointed at our etcd, API v3, none of the caller's ETCD*.
    pub(crate) fn ctl(&self) -> Command {
        let mut c = Command::new("etcdctl");
        clean_env(&mut c);
        c.arg(self.endpoints_arg()).stdin(Stdio::null());
        c
    }

    /// All keys in etcd: `etcdctl lock` leaves none once it has exited.
    pub(crate) fn describe_keys(&self) -> String {
        let out = run_ok(self.ctl().args(["get", "", "--prefix", "--keys-only"]));
        let keys: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        if keys.is_empty() {
            "nothing".into()
        } else {
            format!("{keys:?}")
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        unwatch(&self.child);
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
