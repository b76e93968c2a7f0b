//! A throwaway redis-server on a free loopback port, killed (and its
//! directory removed) on drop, and a Redis Cluster made of such servers.

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::net::UnixStream;
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

/// The server binary every server the tests start runs (Sentinels too):
/// `$RLOCK_TEST_REDIS_SERVER` if set (a path, e.g. a Redis 6.2
/// `redis-server` or a `valkey-server`: see scripts/compat.sh), else
/// `redis-server` on PATH.
pub fn server_bin() -> String {
    std::env::var("RLOCK_TEST_REDIS_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".into())
}

/// The cli that goes with [`server_bin`] (for `--cluster create`):
/// `$RLOCK_TEST_REDIS_CLI` if set, else the `-cli` beside a chosen server
/// (`valkey-cli` beside `valkey-server`), else `redis-cli` on PATH.
pub fn cli_bin() -> String {
    if let Some(cli) = std::env::var("RLOCK_TEST_REDIS_CLI")
        .ok()
        .filter(|s| !s.is_empty())
    {
        return cli;
    }
    let server = server_bin();
    match server.strip_suffix("-server") {
        Some(base) if server.contains('/') => format!("{base}-cli"),
        _ => "redis-cli".into(),
    }
}

/// What [`server_bin`] says it is (`--version`): `Redis server v=6.2.14
/// ...` or `Valkey server v=8.1.8 ...`, as (name, version).
pub fn server_version() -> (String, String) {
    let out = Command::new(server_bin())
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?} --version: {e}", server_bin()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let name = text.split_whitespace().next().unwrap_or("").to_string();
    let version = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or_else(|| panic!("no v= in {text:?}"))
        .to_string();
    (name, version)
}

/// The (major, minor) of Redis the server under test speaks as: its own
/// for Redis, the `redis_version` Valkey reports (7.2 for Valkey 8).
pub fn redis_version() -> (u32, u32) {
    let (name, version) = server_version();
    if name == "Valkey" {
        return (7, 2);
    }
    let mut it = version.split('.').map(|p| p.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// A free port whose cluster bus port (port + 10000) is free too.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= u16::MAX - 10_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// Give this process (and so every rlock, shell and command the tests
/// start) default dispositions for the signals the tests send as a user
/// would. A test run started as a script's background job (`cargo test &`
/// ignores INT and QUIT) or under nohup (HUP) would otherwise hand SIG_IGN
/// down, and rlock rightly leaves ignored signals alone. Every server
/// start calls it, so it runs before a test spawns anything that matters.
fn default_signals() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP] {
            // SAFETY: plain syscall; SIG_DFL is a valid disposition.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    });
}

impl Redis {
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// With more redis-server arguments (`["--requirepass", "x"]`); "{port}"
    /// in one stands for the chosen port, so a TLS server can put its TLS
    /// listener there (with `--port 0`).
    pub fn start_with(extra: &[&str]) -> Redis {
        default_signals();
        for _ in 0..5 {
            if let Some(r) = Redis::try_start(extra) {
                return r;
            }
        }
        panic!(
            "could not start {} {extra:?} on a free port after 5 tries",
            server_bin()
        );
    }

    fn try_start(extra: &[&str]) -> Option<Redis> {
        let port = if extra.contains(&"--cluster-enabled") {
            free_cluster_port()
        } else {
            free_port()
        };
        let dir = crate::scratch_dir(&format!(
            "redis-{}-{port}",
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
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
        let child = Command::new(server_bin())
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
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {:?} ({e}): install redis-server (apt-get install \
                     redis-server), or set RLOCK_TEST_REDIS_SERVER to a server binary",
                    server_bin()
                )
            });
        let mut r = Redis { child, port, dir };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            // Ready when our own unix socket answers: redis-server creates
            // it after binding its TCP port, so a server that lost the port
            // to another process (another test's server, a cluster node's
            // bus at port + 10000) never passes for ready, whereas a TCP
            // connect would reach the other process.
            if UnixStream::connect(r.socket()).is_ok() {
                return Some(r);
            }
            if let Ok(Some(_)) = r.child.try_wait() {
                return None; // port taken meanwhile, most likely: try another
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

/// Arguments for a server that can join a cluster that fails over fast: a
/// master silent for 1 s is suspected, and its replica promoted about a
/// second after that (for the failover tests).
pub const CLUSTER_NODE_FAST: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "1000",
];

/// Make the servers (started with [`CLUSTER_NODE`]) one Redis Cluster of
/// masters without replicas, and wait until every node says it is ok.
pub fn create_cluster(nodes: &[&Redis]) -> Result<(), String> {
    create_cluster_with_replicas(nodes, 0)
}

/// Make the servers one Redis Cluster with `replicas` replicas per master
/// (redis-cli picks which servers are masters: `nodes.len() / (1 +
/// replicas)` of them), and wait until every node says `cluster_state:ok`,
/// every replica's link to its master is up, and every node knows every
/// other one, each replica as the replica of a master, with no node in
/// handshake or suspected.
pub fn create_cluster_with_replicas(nodes: &[&Redis], replicas: usize) -> Result<(), String> {
    let addrs: Vec<String> = nodes
        .iter()
        .map(|r| format!("127.0.0.1:{}", r.port))
        .collect();
    let out = Command::new(cli_bin())
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run {} --cluster create: {e}", cli_bin()))?;
    if !out.status.success() {
        return Err(format!(
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    let masters = nodes.len() / (1 + replicas);
    let started = Instant::now();
    loop {
        let ok = nodes
            .iter()
            .all(|r| cluster_node_ready(r, nodes.len(), masters));
        if ok {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(format!(
                "the cluster of {} nodes ({masters} masters) was not ready in 30 s",
                nodes.len()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One node of a new cluster is ready: `cluster_state:ok`, its link to its
/// master up if it is a replica, and it sees `total` healthy nodes, of which
/// `masters` masters and the rest replicas of one of those masters.
fn cluster_node_ready(r: &Redis, total: usize, masters: usize) -> bool {
    let Ok(mut c) = redis::Client::open(r.url())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
    else {
        return false;
    };
    let info: redis::RedisResult<String> = redis::cmd("CLUSTER").arg("INFO").query(&mut c);
    if !info.is_ok_and(|i| i.contains("cluster_state:ok")) {
        return false;
    }
    let repl: redis::RedisResult<String> = redis::cmd("INFO").arg("replication").query(&mut c);
    match repl {
        Ok(i) if i.contains("role:master") => {}
        Ok(i) if i.contains("role:slave") && i.contains("master_link_status:up") => {}
        _ => return false,
    }
    let Ok(view) = redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut c) else {
        return false;
    };
    // <id> <ip:port@cport> <flags> <master id or -> ...
    let lines: Vec<Vec<&str>> = view
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() >= 8)
        .collect();
    let healthy = |flags: &str| {
        !flags
            .split(',')
            .any(|f| matches!(f, "fail" | "fail?" | "handshake" | "noaddr"))
    };
    let master_ids: Vec<&str> = lines
        .iter()
        .filter(|f| f[2].split(',').any(|x| x == "master"))
        .map(|f| f[0])
        .collect();
    let replicas = lines
        .iter()
        .filter(|f| f[2].split(',').any(|x| x == "slave") && master_ids.contains(&f[3]))
        .count();
    lines.len() == total
        && lines.iter().all(|f| healthy(f[2]))
        && master_ids.len() == masters
        && replicas == total - masters
}
