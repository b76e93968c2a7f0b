//! A throwaway redis-server on a free loopback port, killed (and its
//! directory removed) on drop, and a Redis Cluster made of such servers.
//! One copy for the integration tests, the bench and the examples: each
//! includes this file with `#[path]`.
#![allow(dead_code)] // each includer uses a different part

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct Redis {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

impl Redis {
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// With more redis-server arguments (`["--requirepass", "x"]`); "{port}"
    /// in one stands for the chosen port, so a TLS server can put its TLS
    /// listener there (with `--port 0`).
    pub fn start_with(extra: &[&str]) -> Redis {
        for _ in 0..5 {
            if let Some(r) = Redis::try_start(extra) {
                return r;
            }
        }
        panic!("could not start redis-server on a free port after 5 tries");
    }

    fn try_start(extra: &[&str]) -> Option<Redis> {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "rlock-redis-{}-{}-{port}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("create a temp dir");
        let at = |f: &str| {
            dir.join(f)
                .to_str()
                .expect("temp path is UTF-8")
                .to_string()
        };
        let extra: Vec<String> = extra
            .iter()
            .map(|a| a.replace("{port}", &port.to_string()))
            .collect();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir", &at("")])
            .args([
                "--unixsocket",
                &at("redis.sock"),
                "--logfile",
                &at("redis.log"),
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server not found on PATH: install it (apt-get install redis-server)");
        let mut r = Redis { child, port, dir };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = r.child.try_wait() {
                return None; // port taken meanwhile, most likely: try another
            }
            // Our own server's log, not a connection: another test's server
            // may have taken the port between free_port() and our bind, and
            // would answer in its place.
            if r.log().contains("Ready to accept connections")
                && TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                return Some(r);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server did not start; its log:\n{}", r.log());
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("redis.sock")
    }

    pub fn log(&self) -> String {
        let mut s = String::new();
        let _ =
            std::fs::File::open(self.dir.join("redis.log")).map(|mut f| f.read_to_string(&mut s));
        s
    }

    /// A direct connection, to look at or prepare what rlock works on.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to redis-server")
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Arguments for a server that can join a cluster.
pub const CLUSTER_NODE: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "2000",
];

/// Make the servers (started with [`CLUSTER_NODE`]) one Redis Cluster of
/// masters without replicas, and wait until every node says it is ok.
pub fn create_cluster(nodes: &[&Redis]) -> Result<(), String> {
    let addrs: Vec<String> = nodes
        .iter()
        .map(|r| format!("127.0.0.1:{}", r.port))
        .collect();
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run redis-cli --cluster create: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    let started = Instant::now();
    loop {
        let ok = nodes.iter().all(|r| {
            redis::cmd("CLUSTER")
                .arg("INFO")
                .query::<String>(&mut r.conn())
                .is_ok_and(|i| i.contains("cluster_state:ok"))
        });
        if ok {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(20) {
            return Err("the cluster did not reach cluster_state:ok in 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
