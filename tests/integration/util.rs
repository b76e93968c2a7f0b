//! Test harness: real redis-server processes on free ports, and a builder
//! that runs the real `rlock` binary and checks its exit code and output.

use std::ops::Deref;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

#[path = "../support/redis_server.rs"]
mod redis_server;
pub use redis_server::{
    CLUSTER_NODE, CLUSTER_NODE_FAST, free_port, redis_version, server_bin, server_version,
};

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// The redis-server a test works on: its own (`Redis::start`), killed when
/// the test drops it, or a namespace of its own (a key prefix) on the one
/// server this test process shares (`Redis::shared`). Derefs to the
/// process (`port`, `url()`, `socket()`, `conn()`).
pub struct Redis {
    server: Server,
    /// The key prefix of this test's locks: `rlock:` on a server of its
    /// own, a unique one on the shared server. `rlock(&r)` and
    /// `r.locker()` use it, and so do the helpers below.
    pub prefix: String,
}

enum Server {
    Own(redis_server::Redis),
    Shared(&'static redis_server::Redis),
}

impl Deref for Redis {
    type Target = redis_server::Redis;
    fn deref(&self) -> &redis_server::Redis {
        match &self.server {
            Server::Own(r) => r,
            Server::Shared(r) => r,
        }
    }
}

/// The server shared by the tests that neither stop, kill nor reconfigure
/// theirs, nor look at server-wide state; started by the first of them.
static SHARED: OnceLock<redis_server::Redis> = OnceLock::new();

/// Kill the shared server when the test process exits (a static is never
/// dropped).
extern "C" fn stop_shared() {
    if let Some(r) = SHARED.get() {
        kill(r.child.id(), libc::SIGKILL);
        let _ = std::fs::remove_dir_all(&r.dir);
    }
}

/// Send signal `sig` to process `pid` (a `u32` from `Child::id` or an
/// `i32` from a pid file).
pub fn kill(pid: impl TryInto<libc::pid_t>, sig: i32) {
    let pid = pid.try_into().unwrap_or_else(|_| panic!("not a pid"));
    // SAFETY: a plain syscall; the pids are our own children's.
    unsafe { libc::kill(pid, sig) };
}

impl Redis {
    /// A redis-server of the test's own.
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// A redis-server of the test's own, with more arguments (see
    /// `redis_server::Redis::start_with`).
    pub fn start_with(extra: &[&str]) -> Redis {
        Redis {
            server: Server::Own(redis_server::Redis::start_with(extra)),
            prefix: "rlock:".into(),
        }
    }

    /// A namespace of the test's own on the shared server: a key prefix no
    /// other test uses. For tests that neither kill, stop nor reconfigure
    /// the server, nor depend on server-wide state (INFO, KEYS *, DBSIZE,
    /// raw keys outside the prefix).
    pub fn shared() -> Redis {
        let server = SHARED.get_or_init(|| {
            let r = redis_server::Redis::start();
            // SAFETY: registers a plain `extern "C" fn()` that captures
            // nothing; it runs once, at exit.
            unsafe { libc::atexit(stop_shared) };
            r
        });
        Redis {
            server: Server::Shared(server),
            prefix: format!("t{}:", SEQ.fetch_add(1, Ordering::SeqCst)),
        }
    }

    /// `redis://127.0.0.1:PORT` (also as `Redis::url`, for `map`).
    pub fn url(&self) -> String {
        (**self).url()
    }

    /// The process, to signal it (SIGSTOP, SIGKILL); only for a server of
    /// the test's own.
    #[track_caller]
    pub fn child_pid(&self) -> u32 {
        match &self.server {
            Server::Own(r) => r.child.id(),
            Server::Shared(_) => panic!("a test that signals its server needs Redis::start()"),
        }
    }

    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.conn())
            .unwrap_or_else(|e| panic!("redis {args:?}: {e}"))
    }

    /// Keys in the server (on the shared one: those under this test's
    /// prefix), sorted.
    pub fn keys(&self) -> Vec<String> {
        let pattern = match self.server {
            Server::Own(_) => "*".to_string(),
            Server::Shared(_) => format!("{}*", self.prefix),
        };
        let mut k: Vec<String> = self.cmd(&["KEYS", &pattern]);
        k.sort();
        k
    }

    /// The Redis key of lock `key`'s hash (`<prefix>{key}`); its other keys
    /// append a suffix (`:h`, `:q`, `:fence`, ...).
    pub fn key(&self, key: &str) -> String {
        format!("{}{{{key}}}", self.prefix)
    }

    /// A library handle on this server with this test's prefix.
    pub fn locker(&self) -> rlock::Locker {
        locker_with(&self.url(), &self.prefix)
    }

    /// `rlock status KEY --json`.
    #[track_caller]
    pub fn status_json(&self, key: &str) -> serde_json::Value {
        let out = rlock(self).args(["status", key, "--json"]).run().ok();
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// Whether lock `key` is held, by `rlock status`.
    #[track_caller]
    pub fn held(&self, key: &str) -> bool {
        self.status_json(key)["held"] == true
    }

    /// Wait (up to 10 s) until `n` waiters are queued for lock `key`.
    #[track_caller]
    pub fn await_waiters(&self, key: &str, n: u64) {
        eventually(
            Duration::from_secs(10),
            &format!("{n} waiter(s) queued for {key:?}"),
            || self.status_json(key)["waiters"] == n,
        );
    }

    /// Set lock `key`'s last fence well ahead of the server's clock, kept
    /// for an hour, and return it: the grants that follow then count up
    /// from it by one each, whatever their TTLs.
    pub fn fence_ahead(&self, key: &str) -> u64 {
        let t: Vec<String> = self.cmd(&["TIME"]);
        let now_ms = t[0].parse::<u64>().unwrap() * 1000;
        let f = now_ms + 10_000_000_000;
        let _: () = self.cmd(&[
            "SET",
            &format!("{}:fence", self.key(key)),
            &f.to_string(),
            "PX",
            "3600000",
        ]);
        f
    }

    /// Assert no lock state is left: only fencing counters (which never
    /// expire by design), request records (which must carry a TTL; they let
    /// a resent call answer as the first one did) and keys the test wrote
    /// itself may remain.
    #[track_caller]
    pub fn assert_nothing_held(&self, allowed: &[&str]) {
        // What may stay a little while: request records and wake-up lists
        // (seconds), the last fence (until its lease would have ended and
        // the server's clock has passed it). None of them for ever.
        let left: Vec<String> = self
            .keys()
            .into_iter()
            .filter(|k| !allowed.contains(&k.as_str()))
            .filter(|k| {
                let fence = k.ends_with(":fence");
                let passing = k.contains("}:r:") || k.contains("}:w:");
                if fence || passing {
                    let ttl: i64 = self.cmd(&["PTTL", k]);
                    assert!(ttl > 0, "{k} has PTTL {ttl}: a key that never expires");
                    assert!(fence || ttl <= 60_000, "{k} has PTTL {ttl}");
                }
                !(fence || passing)
            })
            .collect();
        assert!(left.is_empty(), "lock state left in Redis: {left:?}");
    }
}

/// Make the servers (started with [`CLUSTER_NODE`]) one Redis Cluster.
pub fn create_cluster(nodes: &[&Redis]) -> Result<(), String> {
    redis_server::create_cluster(&nodes.iter().map(|r| &***r).collect::<Vec<_>>())
}

/// Make the servers one Redis Cluster with `replicas` replicas per master.
pub fn create_cluster_with_replicas(nodes: &[&Redis], replicas: usize) -> Result<(), String> {
    redis_server::create_cluster_with_replicas(
        &nodes.iter().map(|r| &***r).collect::<Vec<_>>(),
        replicas,
    )
}

/// Runs the real binary.
pub struct Rlock {
    cmd: Command,
    desc: String,
}

/// The binary on `redis`, with its prefix when it is not the default.
pub fn rlock(redis: &Redis) -> Rlock {
    let mut r = bare_rlock();
    r.cmd.env("RLOCK_URL", redis.url());
    if redis.prefix != "rlock:" {
        r.cmd.env("RLOCK_PREFIX", &redis.prefix);
    }
    r
}

/// The binary with a clean environment (no RLOCK_* from the caller).
pub fn bare_rlock() -> Rlock {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rlock"));
    for (k, _) in std::env::vars() {
        if k.starts_with("RLOCK_") {
            cmd.env_remove(k);
        }
    }
    cmd.stdin(Stdio::null());
    Rlock {
        cmd,
        desc: "rlock".into(),
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    desc: String,
}

impl Rlock {
    /// Run it from a shell that outlives it by nothing: a lock it takes
    /// names that shell as its holder, not this test process, whose later
    /// waits for the lock would rightly say they wait for themselves.
    pub fn by_another_process(self) -> Self {
        // One script string: a command line that ends with rlock's own
        // would be a wrapper's, looked through.
        let quote =
            |a: &std::ffi::OsStr| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''"));
        let mut line = quote(std::ffi::OsStr::new(env!("CARGO_BIN_EXE_rlock")));
        for a in self.cmd.get_args() {
            line.push(' ');
            line.push_str(&quote(a));
        }
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &format!("{line}; exit $?")]);
        for (k, v) in self.cmd.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.stdin(Stdio::null());
        Rlock {
            cmd,
            desc: self.desc,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for a in args {
            self.desc.push(' ');
            self.desc.push_str(a.as_ref());
            self.cmd.arg(a.as_ref());
        }
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.cmd.env(k, v);
        self
    }

    pub fn stdout(mut self, s: impl Into<Stdio>) -> Self {
        self.cmd.stdout(s);
        self
    }

    pub fn stderr(mut self, s: impl Into<Stdio>) -> Self {
        self.cmd.stderr(s);
        self
    }

    /// Spawn with stdout and stderr as set (inherited unless set).
    pub fn spawn_plain(mut self) -> Child {
        self.cmd.spawn().unwrap()
    }

    pub fn spawn(mut self) -> Child {
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        self.cmd.spawn().unwrap()
    }

    pub fn run(mut self) -> Run {
        let started = Instant::now();
        let out = self.cmd.output().unwrap();
        Run::from(out, started.elapsed(), self.desc)
    }
}

impl Run {
    pub fn from(out: Output, elapsed: Duration, desc: String) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed,
            desc,
        }
    }

    #[track_caller]
    pub fn code(self, want: i32) -> Run {
        assert_eq!(
            self.code, want,
            "`{}` exited {} (want {want})\nstdout: {}\nstderr: {}",
            self.desc, self.code, self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn ok(self) -> Run {
        self.code(0)
    }

    /// Exit code `want` and exactly one `rlock: ...` line on stderr
    /// mentioning `needle`; no panic text.
    #[track_caller]
    pub fn fails(self, want: i32, needle: &str) -> Run {
        let r = self.code(want);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "want one stderr line, got: {}", r.stderr);
        assert!(lines[0].starts_with("rlock: "), "stderr: {}", r.stderr);
        assert!(
            r.stderr.to_lowercase().contains(&needle.to_lowercase()),
            "stderr {:?} lacks {needle:?}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        r
    }

    /// Exit code `want`, and `needle` somewhere on stderr (which may hold
    /// more than one line, e.g. a report while the command ran).
    #[track_caller]
    pub fn fails_with_lines(self, want: i32, needle: &str) -> Run {
        let r = self.code(want);
        assert!(
            r.stderr.contains(needle),
            "stderr {:?} lacks {needle:?}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        r
    }

    /// The token printed by `acquire`.
    #[track_caller]
    pub fn token(&self) -> String {
        let t = self.stdout.trim_end_matches('\n');
        assert!(
            uuid::Uuid::parse_str(t).is_ok_and(|u| u.get_version_num() == 4),
            "stdout is not just a UUIDv4 token: {:?}",
            self.stdout
        );
        t.to_string()
    }
}

/// Wait for a child and collect its output.
pub fn finish(child: Child, desc: &str) -> Run {
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    Run::from(out, started.elapsed(), desc.to_string())
}

/// A fresh directory `rlock-AREA-PID-NAME` under the temp dir.
pub fn tmp_dir(area: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlock-{area}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file's text, or "" while it does not exist.
pub fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Whether process `pid` runs (a zombie still answers kill(0); look at its
/// state instead).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.rsplit_once(") ").map_or("", |(_, r)| r).starts_with('Z'))
        .unwrap_or(false)
}

/// Where the next pid of this pid namespace is set (root only): tests that
/// need a pid reused write the pid before it there.
pub const NS_LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";

/// Whether this process may write [`NS_LAST_PID`].
pub fn can_set_next_pid() -> bool {
    std::fs::read_to_string(NS_LAST_PID)
        .and_then(|v| std::fs::write(NS_LAST_PID, v.trim()))
        .is_ok()
}

/// Poll `f` until it is true or `limit` passes.
#[track_caller]
pub fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let started = Instant::now();
    while !f() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A Redis Cluster of `n` masters (no replicas), each a [`Redis`]; or,
/// for the failover tests, of masters with replicas that fail over fast.
pub struct Cluster {
    pub nodes: Vec<Redis>,
    /// Nodes killed by [`Cluster::kill`]: left out of every look-up.
    dead: Mutex<Vec<usize>>,
}

/// How a failover went: times are from the SIGKILL.
#[derive(Debug)]
pub struct Failover {
    /// The master killed, and the replica promoted in its place (indexes
    /// into [`Cluster::nodes`]).
    pub killed: usize,
    pub promoted: usize,
    /// Until a survivor first reported `cluster_state:fail` (the dead
    /// master flagged FAIL, its slots unserved); None if the poll missed it.
    pub down_after: Option<Duration>,
    /// Until the replica first reported `role:master`.
    pub promoted_after: Duration,
    /// Until every survivor reported `cluster_state:ok` and named the
    /// replica as the master of the slot.
    pub ok_after: Duration,
}

impl std::fmt::Display for Failover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_millis();
        write!(f, "node {} SIGKILLed; ", self.killed)?;
        match self.down_after {
            Some(d) => write!(f, "cluster_state:fail after {} ms, ", ms(d))?,
            None => write!(f, "cluster_state:fail not seen, ")?,
        }
        write!(
            f,
            "node {} promoted after {} ms, cluster ok after {} ms",
            self.promoted,
            ms(self.promoted_after),
            ms(self.ok_after)
        )
    }
}

/// A direct connection bounded by a 1 s timeout, or None.
fn quick_conn(port: u16) -> Option<redis::Connection> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(1))
        .ok()?;
    c.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    Some(c)
}

fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> Option<T> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut quick_conn(port)?).ok()
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        let nodes: Vec<Redis> = (0..n).map(|_| Redis::start_with(&CLUSTER_NODE)).collect();
        create_cluster(&nodes.iter().collect::<Vec<_>>()).unwrap();
        Cluster {
            nodes,
            dead: Mutex::new(Vec::new()),
        }
    }

    /// `masters` masters with `replicas` replicas each, with
    /// `cluster-node-timeout 1000`, ready when every node is ok and every
    /// replica connected to its master.
    pub fn start_with_replicas(masters: usize, replicas: usize) -> Cluster {
        let nodes: Vec<Redis> = (0..masters * (1 + replicas))
            .map(|_| Redis::start_with(&CLUSTER_NODE_FAST))
            .collect();
        create_cluster_with_replicas(&nodes.iter().collect::<Vec<_>>(), replicas).unwrap();
        Cluster {
            nodes,
            dead: Mutex::new(Vec::new()),
        }
    }

    /// Seed URLs, comma-separated.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(Redis::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every node's URL, node `first` first and the others in order.
    pub fn urls_from(&self, first: usize) -> String {
        std::iter::once(first)
            .chain((0..self.nodes.len()).filter(|&i| i != first))
            .map(|i| self.nodes[i].url())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn is_dead(&self, i: usize) -> bool {
        self.dead.lock().unwrap().contains(&i)
    }

    /// Indexes of the nodes not killed.
    pub fn alive(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| !self.is_dead(i))
            .collect()
    }

    fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|r| r.port == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// The slot of lock `key`: that of its main key `rlock:{key}` (every
    /// key of the lock shares the `{key}` hash tag).
    pub fn keyslot(&self, key: &str) -> u16 {
        let lock_key = format!("rlock:{{{key}}}");
        self.alive()
            .into_iter()
            .find_map(|i| query(self.nodes[i].port, &["CLUSTER", "KEYSLOT", &lock_key]))
            .expect("no node answers CLUSTER KEYSLOT")
    }

    /// Port of the master of `slot` according to the node on `port`.
    fn slot_master(port: u16, slot: u16) -> Option<u16> {
        // Each range is [start, end, [host, port, id, ...], replicas...].
        let ranges: Vec<Vec<redis::Value>> = query(port, &["CLUSTER", "SLOTS"])?;
        ranges.into_iter().find_map(|r| {
            let start: u16 = redis::FromRedisValue::from_redis_value(r.first()?.clone()).ok()?;
            let end: u16 = redis::FromRedisValue::from_redis_value(r.get(1)?.clone()).ok()?;
            if !(start..=end).contains(&slot) {
                return None;
            }
            let node: Vec<redis::Value> =
                redis::FromRedisValue::from_redis_value(r.get(2)?.clone()).ok()?;
            redis::FromRedisValue::from_redis_value(node.get(1)?.clone()).ok()
        })
    }

    /// The master node now serving lock `key`'s slot (as the first live
    /// node that answers sees it).
    pub fn master_of(&self, key: &str) -> usize {
        let slot = self.keyslot(key);
        let port = self
            .alive()
            .into_iter()
            .find_map(|i| Cluster::slot_master(self.nodes[i].port, slot))
            .expect("no node answers CLUSTER SLOTS");
        self.index_of(port)
    }

    /// The live replicas of node `master`, by their own INFO replication.
    pub fn replicas_of(&self, master: usize) -> Vec<usize> {
        let port = format!("master_port:{}\r", self.nodes[master].port);
        self.alive()
            .into_iter()
            .filter(|&i| {
                query::<String>(self.nodes[i].port, &["INFO", "replication"])
                    .is_some_and(|s| s.contains("role:slave") && s.contains(&port))
            })
            .collect()
    }

    /// A read-only command on node `i`, answered there even if it is a
    /// replica (READONLY first); None if it fails.
    pub fn read<T: redis::FromRedisValue>(&self, i: usize, args: &[&str]) -> Option<T> {
        let mut c = quick_conn(self.nodes[i].port)?;
        redis::cmd("READONLY").query::<()>(&mut c).ok()?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c).ok()
    }

    /// Whether `key` (a Redis key) is on node `i`, replica or master.
    pub fn has_key(&self, i: usize, key: &str) -> bool {
        self.read::<i64>(i, &["EXISTS", key]) == Some(1)
    }

    /// SIGKILL node `i`; it is left out of every look-up from now on.
    pub fn kill(&self, i: usize) {
        self.dead.lock().unwrap().push(i);
        kill(self.nodes[i].child_pid(), libc::SIGKILL);
    }

    /// SIGKILL the master serving lock `key` and wait until one of its
    /// replicas is promoted and every survivor reports `cluster_state:ok`
    /// and names that replica as the slot's master.
    pub fn kill_master_of(&self, key: &str) -> Failover {
        let slot = self.keyslot(key);
        let killed = self.master_of(key);
        let replicas = self.replicas_of(killed);
        assert!(
            !replicas.is_empty(),
            "node {killed} (master of {key:?}) has no replica"
        );
        self.kill(killed);
        let started = Instant::now();
        let mut down_after = None;
        let mut promoted: Option<(usize, Duration)> = None;
        loop {
            let survivors = self.alive();
            let states: Vec<Option<String>> = survivors
                .iter()
                .map(|&i| query::<String>(self.nodes[i].port, &["CLUSTER", "INFO"]))
                .collect();
            let elapsed = started.elapsed();
            if down_after.is_none()
                && states
                    .iter()
                    .any(|s| s.as_ref().is_some_and(|s| s.contains("cluster_state:fail")))
            {
                down_after = Some(elapsed);
            }
            if promoted.is_none() {
                promoted = replicas
                    .iter()
                    .find(|&&i| {
                        query::<String>(self.nodes[i].port, &["INFO", "replication"])
                            .is_some_and(|s| s.contains("role:master"))
                    })
                    .map(|&i| (i, elapsed));
            }
            if let Some((new, promoted_after)) = promoted {
                let ok = states
                    .iter()
                    .all(|s| s.as_ref().is_some_and(|s| s.contains("cluster_state:ok")))
                    && survivors.iter().all(|&i| {
                        Cluster::slot_master(self.nodes[i].port, slot) == Some(self.nodes[new].port)
                    });
                if ok {
                    return Failover {
                        killed,
                        promoted: new,
                        down_after,
                        promoted_after,
                        ok_after: started.elapsed(),
                    };
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no failover of node {killed} within 30 s (promoted: {promoted:?})"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A replica of `master`, in sync.
pub fn replica_of(master: &Redis) -> Redis {
    let replica = Redis::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    eventually(Duration::from_secs(10), "the replica to sync", || {
        let info: String = replica.cmd(&["INFO", "replication"]);
        info.contains("master_link_status:up")
    });
    // And the master to count it: until it sees the replica online (its
    // first REPLCONF ACK), WAIT counts nobody, and a --min-replicas grant
    // right after this returned failed now and then under load.
    eventually(
        Duration::from_secs(10),
        "the master to see its replica",
        || {
            let info: String = master.cmd(&["INFO", "replication"]);
            info.contains("state=online")
        },
    );
    replica
}

/// A master, one replica and three Sentinels watching them as "mymaster".
pub struct Sentinels {
    pub master: Redis,
    pub replica: Redis,
    sentinels: Vec<(Child, u16, PathBuf)>,
}

impl Sentinels {
    pub fn start() -> Sentinels {
        let master = Redis::start();
        let mport = master.port.to_string();
        let replica = replica_of(&master);
        let sentinels = (0..3)
            .map(|i| {
                let port = free_port();
                let dir = std::env::temp_dir().join(format!(
                    "rlock-sentinel-{}-{}-{i}",
                    std::process::id(),
                    SEQ.fetch_add(1, Ordering::SeqCst)
                ));
                std::fs::create_dir_all(&dir).unwrap();
                let conf = dir.join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {mport} 2\n\
                         sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n",
                        dir.display()
                    ),
                )
                .unwrap();
                let child = Command::new(redis_server::server_bin())
                    .arg(&conf)
                    .arg("--sentinel")
                    .args(["--logfile", dir.join("sentinel.log").to_str().unwrap()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                (child, port, dir)
            })
            .collect();
        let s = Sentinels {
            master,
            replica,
            sentinels,
        };
        // Ready when every Sentinel is connected to the replica and has its
        // INFO: flags exactly "slave" (not "slave,disconnected").
        eventually(
            Duration::from_secs(20),
            "the sentinels to see the replica",
            || {
                s.sentinels.iter().all(|(_, port, _)| {
                    let replicas: redis::RedisResult<Vec<Vec<String>>> =
                        redis::Client::open(format!("redis://127.0.0.1:{port}"))
                            .and_then(|c| c.get_connection())
                            .and_then(|mut c| {
                                redis::cmd("SENTINEL")
                                    .arg("replicas")
                                    .arg("mymaster")
                                    .query(&mut c)
                            });
                    replicas.is_ok_and(|r| {
                        r.iter()
                            .any(|f| f.windows(2).any(|w| w[0] == "flags" && w[1] == "slave"))
                    })
                })
            },
        );
        s
    }

    pub fn urls(&self) -> String {
        self.sentinels
            .iter()
            .map(|(_, port, _)| format!("redis://127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Port of the master the first Sentinel names now.
    pub fn master_port(&self) -> u16 {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{}", self.sentinels[0].1))
            .unwrap()
            .get_connection()
            .unwrap();
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg("mymaster")
            .query(&mut c)
            .unwrap();
        port
    }

    pub fn freeze_first(&self) {
        kill(self.sentinels[0].0.id(), libc::SIGSTOP);
    }

    pub fn thaw_first(&self) {
        kill(self.sentinels[0].0.id(), libc::SIGCONT);
    }

    /// Make the replica the master, and wait until the Sentinels say so.
    pub fn failover(&self) {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{}", self.sentinels[0].1))
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = redis::cmd("SENTINEL")
            .arg("failover")
            .arg("mymaster")
            .query(&mut c)
            .unwrap();
        eventually(Duration::from_secs(20), "the failover", || {
            // The Sentinels kill the promoted replica's clients: tolerate a
            // reset connection while polling.
            let role: redis::RedisResult<String> = redis::cmd("INFO")
                .arg("replication")
                .query(&mut self.replica.conn());
            self.master_port() == self.replica.port && role.is_ok_and(|r| r.contains("role:master"))
        });
    }
}

impl Sentinels {
    /// The master port Sentinel `i` names now, if it answers.
    fn named_by(&self, i: usize) -> Option<u16> {
        let (_, port): (String, u16) = query(
            self.sentinels[i].1,
            &["SENTINEL", "get-master-addr-by-name", "mymaster"],
        )?;
        Some(port)
    }

    /// A crash failover: SIGKILL the master's redis-server, and wait until
    /// every Sentinel names the replica as the master and the replica
    /// reports `role:master`. Returns how long that took from the kill.
    pub fn crash_master(&self) -> Duration {
        kill(self.master.child_pid(), libc::SIGKILL);
        let started = Instant::now();
        eventually(Duration::from_secs(30), "the crash failover", || {
            (0..self.sentinels.len()).all(|i| self.named_by(i) == Some(self.replica.port))
                && query::<String>(self.replica.port, &["INFO", "replication"])
                    .is_some_and(|r| r.contains("role:master"))
        });
        started.elapsed()
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for (child, _, dir) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Run `count` copies of the shell `script` at once, with `RLOCK_URL`,
/// `BIN` (the rlock binary) and `PORT` (of `port_of`) in their environment,
/// and assert that every one of them exits 0.
#[track_caller]
pub fn contenders(count: usize, script: &str, url: &str, port_of: &Redis) {
    let kids: Vec<_> = (0..count)
        .map(|_| {
            Command::new("sh")
                .args(["-c", script])
                .env("BIN", env!("CARGO_BIN_EXE_rlock"))
                .env("PORT", port_of.port.to_string())
                .env("RLOCK_URL", url)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for k in kids {
        finish(k, "contender").ok();
    }
}

/// A library handle on one server, default options, prefix `rlock:`.
pub fn locker(url: &str) -> rlock::Locker {
    locker_with(url, "rlock:")
}

/// A library handle on one server, default options, prefix `prefix`.
pub fn locker_with(url: &str, prefix: &str) -> rlock::Locker {
    let opts = rlock::ConnectOptions {
        urls: vec![url.to_string()],
        ..Default::default()
    };
    rlock::Locker::connect(&opts, prefix).unwrap()
}

/// A TCP proxy in front of a Redis that can lose one script call's reply
/// after the server ran it, then refuse connections for a while: what a
/// client sees when the network goes away mid-call.
pub struct Proxy {
    pub port: u16,
    /// Lose the reply of the next EVAL/EVALSHA, then refuse for this long.
    pub lose_next: Arc<Mutex<Option<Duration>>>,
    /// Hold the reply of the next EVAL/EVALSHA back for this long.
    pub delay_next: Arc<Mutex<Option<Duration>>>,
    /// Hold the reply of every EVAL/EVALSHA back for this long.
    pub delay_all: Arc<Mutex<Option<Duration>>>,
}

impl Proxy {
    pub fn start(to: u16) -> Proxy {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::sync::atomic::AtomicBool;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let lose_next: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(None));
        let delay_next: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(None));
        let delay_all: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(None));
        let refuse_until = Arc::new(Mutex::new(std::time::Instant::now()));
        let (lose, refuse, delay) = (lose_next.clone(), refuse_until.clone(), delay_next.clone());
        let every = delay_all.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if std::time::Instant::now() < *refuse.lock().unwrap() {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let swallow = Arc::new(AtomicBool::new(false));
                let hold = Arc::new(Mutex::new(None::<std::time::Instant>));
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut s_in, mut c_out) = (server, client);
                let (lose, refuse, sw) = (lose.clone(), refuse.clone(), swallow.clone());
                let (delay, hold_c, hold_s) = (delay.clone(), hold.clone(), hold.clone());
                let every = every.clone();
                let (c_kill, s_kill) = (c_out.try_clone().unwrap(), s_out.try_clone().unwrap());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n) = c_in.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let eval = buf[..n].windows(4).any(|w| w == b"EVAL");
                        let cut = if eval {
                            lose.lock().unwrap().take()
                        } else {
                            None
                        };
                        if cut.is_some() {
                            sw.store(true, Ordering::SeqCst);
                        }
                        let d = eval
                            .then(|| delay.lock().unwrap().take().or(*every.lock().unwrap()))
                            .flatten();
                        if let Some(d) = d {
                            *hold_c.lock().unwrap() = Some(std::time::Instant::now() + d);
                        }
                        if s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        if let Some(d) = cut {
                            // Let the server run it, then cut the line.
                            std::thread::sleep(Duration::from_millis(200));
                            *refuse.lock().unwrap() = std::time::Instant::now() + d;
                            let _ = c_kill.shutdown(Shutdown::Both);
                            let _ = s_kill.shutdown(Shutdown::Both);
                            break;
                        }
                    }
                });
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n) = s_in.read(&mut buf) {
                        if n == 0 || swallow.load(Ordering::SeqCst) {
                            break;
                        }
                        if let Some(t) = hold_s.lock().unwrap().take() {
                            std::thread::sleep(
                                t.saturating_duration_since(std::time::Instant::now()),
                            );
                        }
                        if c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Proxy {
            port,
            lose_next,
            delay_next,
            delay_all,
        }
    }
}
