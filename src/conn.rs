//! Connecting to Redis: URL checks, RLOCK_PASSWORD, timeouts, and error
//! messages that never contain a password.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use redis::{FromRedisValue, IntoConnectionInfo};

use crate::{Error, Result};

/// A node that never resends (RedLock) replaces a connection idle for
/// longer than this before use: servers, proxies and NATs close idle
/// connections, and a command sent into a dead one would fail. Other nodes
/// keep their connection (no reconnect, no TLS handshake per renewal): a
/// dead one fails the call with an I/O error, and the call is resent on a
/// fresh one (see `Node::eval` in src/lock/script.rs).
pub(crate) const IDLE_RECONNECT: Duration = Duration::from_secs(1);

const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// Redis URLs: `redis://`, `rediss://`, `unix:///path` or `redis+unix:///path`.
    pub urls: Vec<String>,
    /// Password that overrides any in the URL (from RLOCK_PASSWORD).
    pub password: Option<String>,
    /// Bound on connecting, and on waiting for any reply but a blocking wait.
    pub connect_timeout: Duration,
    /// TLS (`rediss://`): a CA certificate (PEM) to trust instead of the
    /// system's roots, and an optional client certificate and key (PEM).
    pub tls: Tls,
    /// The URLs are seed nodes of one Redis Cluster.
    pub cluster: bool,
    /// The URLs are Sentinels watching the master of this name.
    pub sentinel: Option<String>,
    /// After a grant, wait (with WAIT) until this many replicas have it;
    /// fewer within the connect timeout fails the acquire.
    pub min_replicas: u32,
}

/// TLS files for `rediss://` URLs.
#[derive(Clone, Debug, Default)]
pub struct Tls {
    /// A CA certificate (PEM) to trust instead of the system's roots.
    pub ca: Option<PathBuf>,
    /// A client certificate (PEM), for servers that ask for one; needs `key`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
}

impl Tls {
    fn is_set(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }

    #[cfg(feature = "tls")]
    fn certificates(&self) -> Result<redis::TlsCertificates> {
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path)
                .map_err(|e| Error::Usage(format!("cannot read {flag} {}: {e}", path.display())))
        };
        // A file with no certificate in it (a key, the wrong file) would
        // trust nothing, or show none, and every handshake would fail as
        // if the server were at fault: it is bad input.
        let certs = |flag: &str, path: &PathBuf| {
            let pem = read(flag, path)?;
            if !pem
                .windows(CERT_PEM.len())
                .any(|w| w == CERT_PEM.as_bytes())
            {
                return Err(Error::Usage(format!(
                    "{flag} {}: no certificate in it (want PEM, \"{CERT_PEM}\")",
                    path.display()
                )));
            }
            Ok(pem)
        };
        let client_tls = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: certs("--tls-cert", cert)?,
                client_key: read("--tls-key", key)?,
            }),
            (None, None) => None,
            _ => return Err(Error::Usage("--tls-cert and --tls-key go together".into())),
        };
        let root_cert = self
            .ca
            .as_ref()
            .map(|ca| certs("--tls-ca", ca))
            .transpose()?;
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

/// What starts a certificate in a PEM file.
#[cfg(feature = "tls")]
const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----";

/// rustls needs one process-wide crypto provider; ring is the one built in.
#[cfg(feature = "tls")]
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            urls: vec!["redis://127.0.0.1:6379".into()],
            password: None,
            connect_timeout: Duration::from_secs(2),
            tls: Tls::default(),
            cluster: false,
            sentinel: None,
            min_replicas: 0,
        }
    }
}

/// One Redis server, or one Redis Cluster: a client that can open
/// connections to it.
#[derive(Clone)]
pub(crate) struct Server {
    client: Client,
    /// host:port or socket path (the first seed, for a cluster), safe to
    /// print.
    pub(crate) label: String,
    /// The URL as given, redacted (see [`redact`]), for messages that must
    /// name what the user typed.
    pub(crate) url: String,
    pub(crate) timeout: Duration,
    pub(crate) min_replicas: u32,
}

#[derive(Clone)]
enum Client {
    One(Box<redis::Client>),
    #[cfg(feature = "cluster")]
    Cluster(std::sync::Arc<ClusterSeeds>),
    /// Asks the Sentinels for the current master at every (re)connect, so
    /// a failover is followed on the next connection.
    Sentinel(std::sync::Arc<Sentinels>),
}

/// A Redis Cluster and the seed nodes it is reached through.
///
/// redis-rs' ClusterClient, given several seeds, dials them in the order
/// given on every new connection and takes the slot map from the first that
/// answers (a dead seed is passed over, but dialed again each time: a
/// refused connection costs nothing, a host that is down or a frozen node
/// costs the whole connect timeout, on every reconnect of a renewal or a
/// wait). So each seed gets a client of its own, tried one at a time, the
/// one that answered last first, then the others in turn.
///
/// No choice of seed gives a better slot map while a failover is under
/// way: until the replica is promoted, every node's CLUSTER SLOTS still
/// names the dead master (cluster_state:fail included), and redis-rs,
/// with retries(0), fails a command for its slots with the I/O error of
/// dialing it. The caller resends on a new connection until its deadline;
/// once the replica is promoted, every node's map names it.
#[cfg(feature = "cluster")]
struct ClusterSeeds {
    /// One client per seed, with that seed as its only initial node, and
    /// the seed's host:port.
    clients: Vec<(String, redis::cluster::ClusterClient)>,
    /// The seed to try first.
    first: std::sync::atomic::AtomicUsize,
}

#[cfg(feature = "cluster")]
impl ClusterSeeds {
    /// A connection through the first seed that answers, and that seed;
    /// never through `skip` (a seed whose slot map led nowhere).
    fn connect(
        &self,
        skip: Option<usize>,
    ) -> redis::RedisResult<(usize, redis::cluster::ClusterConnection)> {
        use std::sync::atomic::Ordering::Relaxed;
        let start = self.first.load(Relaxed);
        let mut failed = Vec::new();
        for i in (start..self.clients.len()).chain(0..start) {
            if skip == Some(i) {
                continue;
            }
            let (label, client) = &self.clients[i];
            match client.get_connection() {
                Ok(conn) => {
                    self.first.store(i, Relaxed);
                    return Ok((i, conn));
                }
                Err(e) => failed.push((label, e)),
            }
        }
        if let Some(bad) = skip {
            failed.insert(
                0,
                (
                    &self.clients[bad].0,
                    redis::RedisError::from((redis::ErrorKind::Io, NO_NODES)),
                ),
            );
        }
        if failed.len() == 1 {
            return Err(failed.remove(0).1);
        }
        let why: Vec<String> = failed
            .iter()
            .map(|(label, e)| {
                // A seed that refuses: "Failed to connect to each cluster
                // node (host:port: why)"; keep "host:port: why".
                e.detail()
                    .and_then(|d| d.strip_prefix("Failed to connect to each cluster node ("))
                    .and_then(|d| d.strip_suffix(')'))
                    .map_or_else(|| format!("{label}: {e}"), str::to_string)
            })
            .collect();
        Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "no seed node answered",
            why.join("; "),
        )))
    }
}

#[cfg(feature = "cluster")]
const NO_NODES: &str =
    "knows no cluster node that answers (not a Redis Cluster node, or not in a cluster)";

/// A connection to a Redis Cluster, with the seeds it came through.
#[cfg(feature = "cluster")]
pub(crate) struct ClusterConn {
    conn: redis::cluster::ClusterConnection,
    seeds: std::sync::Arc<ClusterSeeds>,
    /// The seed whose slot map `conn` has.
    seed: usize,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

#[cfg(feature = "cluster")]
impl ClusterConn {
    /// Run `f` on the connection. A seed that answers but knows no slots
    /// (a node not, or no longer, in the cluster; a plain Redis named by
    /// mistake) gives a connection to no node: every command fails with
    /// "No connections found" before anything is sent. Then, and only
    /// then, the other seeds are tried and `f` runs again (safe: nothing
    /// reached a server), so a good connection pays no extra round trip.
    pub(crate) fn run<T>(
        &mut self,
        mut f: impl FnMut(&mut redis::cluster::ClusterConnection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let res = f(&mut self.conn);
        if !matches!(&res, Err(e) if e.kind() == redis::ErrorKind::ClusterConnectionNotFound) {
            return res;
        }
        let (seed, conn) = self.seeds.connect(Some(self.seed))?;
        conn.set_read_timeout(self.read_timeout)?;
        conn.set_write_timeout(self.write_timeout)?;
        (self.seed, self.conn) = (seed, conn);
        f(&mut self.conn)
    }

    /// The connection itself, once [`ClusterConn::run`] has shown its
    /// slot map leads somewhere.
    pub(crate) fn inner(&mut self) -> &mut redis::cluster::ClusterConnection {
        &mut self.conn
    }
}

/// What it takes to find and reach the master a set of Sentinels watches.
/// Looked up by hand, with the connect timeout on every step: redis-rs'
/// Sentinel client has no timeouts, and one frozen Sentinel or master would
/// hang rlock for good.
struct Sentinels {
    name: String,
    sentinels: Vec<redis::Client>,
    /// Credentials for the master (the Sentinels' are in their URLs).
    master: redis::RedisConnectionInfo,
    tls: Option<Tls>,
}

impl Sentinels {
    fn connect_master(&self, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        let mut last = redis::RedisError::from((redis::ErrorKind::Io, "no Sentinel answered"));
        for sentinel in &self.sentinels {
            match self.try_sentinel(sentinel, timeout) {
                Ok(conn) => return Ok(conn),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn try_sentinel(
        &self,
        sentinel: &redis::Client,
        timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let mut s = sentinel.get_connection_with_timeout(timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.name)
            .query(&mut s)?;
        let Some((host, port)) = addr else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "this Sentinel knows no master by that name",
            )));
        };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        let info = format!("{scheme}://{host}:{port}")
            .into_connection_info()?
            .set_redis_settings(self.master.clone());
        let client = match &self.tls {
            // Without the feature, no rediss:// URL gets this far.
            #[cfg(feature = "tls")]
            Some(tls) if tls.is_set() => {
                let certs = tls.certificates().map_err(|e| {
                    redis::RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "TLS files",
                        e.to_string(),
                    ))
                })?;
                redis::Client::build_with_tls(info, certs)?
            }
            _ => redis::Client::open(info)?,
        };
        let mut m = client.get_connection_with_timeout(timeout)?;
        m.set_read_timeout(Some(timeout))?;
        m.set_write_timeout(Some(timeout))?;
        // A Sentinel can lag behind a failover: only a master will do.
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut m)?;
        match role.first().map(|v| String::from_redis_value(v.clone())) {
            Some(Ok(r)) if r == "master" => Ok(m),
            _ => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "the address a Sentinel gave is not a master (yet)",
            ))),
        }
    }
}

/// A URL checked and turned into connection settings.
struct Seed {
    info: redis::ConnectionInfo,
    label: String,
    /// The URL, redacted.
    shown: String,
    tls: bool,
}

impl Server {
    /// Every server named in `opts`: one, several for RedLock, or one
    /// cluster reached through several seed nodes.
    pub(crate) fn open_all(opts: &ConnectOptions) -> Result<Vec<Server>> {
        if opts.connect_timeout.is_zero() || opts.connect_timeout > MAX_TIMEOUT {
            return Err(Error::Usage(format!(
                "--connect-timeout {} is out of range: use 1ms to 1h",
                crate::duration::human(opts.connect_timeout)
            )));
        }
        if opts.urls.is_empty() {
            return Err(Error::Usage("no Redis URL given".into()));
        }
        let seeds = opts
            .urls
            .iter()
            .map(|u| Seed::parse(u, opts, opts.sentinel.is_none()))
            .collect::<Result<Vec<_>>>()?;
        let mut labels: Vec<&str> = seeds.iter().map(|s| s.label.as_str()).collect();
        labels.sort();
        if labels.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::Usage(
                "the same Redis is named twice; give each server once".into(),
            ));
        }
        if opts.cluster && opts.sentinel.is_some() {
            return Err(Error::Usage(
                "--cluster and --sentinel exclude each other".into(),
            ));
        }
        if opts.cluster {
            #[cfg(not(feature = "cluster"))]
            return Err(Error::Usage(
                "--cluster: this rlock was built without Redis Cluster support (the \"cluster\" \
                 feature)"
                    .into(),
            ));
            #[cfg(feature = "cluster")]
            if opts.min_replicas > 0 {
                // redis-rs sends WAIT to every master, not the key's own.
                return Err(Error::Usage(
                    "--min-replicas is not supported with --cluster".into(),
                ));
            }
            #[cfg(feature = "cluster")]
            return Ok(vec![Server::cluster(seeds, opts)?]);
        }
        if let Some(name) = &opts.sentinel {
            return Ok(vec![Server::sentinel(seeds, name, opts)?]);
        }
        seeds.into_iter().map(|s| Server::one(s, opts)).collect()
    }

    fn one(seed: Seed, opts: &ConnectOptions) -> Result<Server> {
        let shown = seed.label.clone();
        #[cfg(not(feature = "tls"))]
        let client = redis::Client::open(seed.info);
        #[cfg(feature = "tls")]
        let client = if seed.tls {
            install_crypto_provider();
            if opts.tls.is_set() {
                redis::Client::build_with_tls(seed.info, opts.tls.certificates()?)
            } else {
                redis::Client::open(seed.info)
            }
        } else {
            redis::Client::open(seed.info)
        };
        let client = client.map_err(|e| Error::Usage(format!("{shown}: {e}")))?;
        Ok(Server {
            client: Client::One(Box::new(client)),
            label: seed.label,
            url: seed.shown,
            timeout: opts.connect_timeout,
            min_replicas: opts.min_replicas,
        })
    }

    #[cfg(feature = "cluster")]
    fn cluster(seeds: Vec<Seed>, opts: &ConnectOptions) -> Result<Server> {
        if seeds
            .iter()
            .any(|s| matches!(s.info.addr(), redis::ConnectionAddr::Unix(_)))
        {
            return Err(Error::Usage(
                "--cluster needs host:port URLs, not unix sockets".into(),
            ));
        }
        let label = format!("cluster via {}", seeds[0].label);
        #[cfg(feature = "tls")]
        let tls = seeds.iter().any(|s| s.tls);
        #[cfg(feature = "tls")]
        let certs = if tls && opts.tls.is_set() {
            Some(opts.tls.certificates()?)
        } else {
            None
        };
        #[cfg(feature = "tls")]
        if tls {
            install_crypto_provider();
        }
        let build = |nodes: Vec<redis::ConnectionInfo>, label: &str| {
            let mut b = redis::cluster::ClusterClient::builder(nodes)
                .connection_timeout(opts.connect_timeout)
                .response_timeout(opts.connect_timeout)
                // No resends by redis-rs: rlock resends itself (Node::eval),
                // with the same request id, on a fresh connection with a
                // fresh slot map, and says so in one place.
                .retries(0);
            if let Some(pw) = &opts.password {
                b = b.password(pw);
            }
            #[cfg(feature = "tls")]
            if tls {
                b = b.tls(redis::TlsMode::Secure);
                if let Some(certs) = &certs {
                    b = b.certs(certs.clone());
                }
            }
            b.build().map_err(|e| Error::Usage(format!("{label}: {e}")))
        };
        // All seeds in one client first, only for redis-rs' checks that
        // they agree (credentials, database, TLS).
        build(seeds.iter().map(|s| s.info.clone()).collect(), &label)?;
        let mut clients = Vec::with_capacity(seeds.len());
        for seed in seeds {
            clients.push((seed.label.clone(), build(vec![seed.info], &seed.label)?));
        }
        Ok(Server {
            client: Client::Cluster(std::sync::Arc::new(ClusterSeeds {
                clients,
                first: Default::default(),
            })),
            url: label.clone(),
            label,
            timeout: opts.connect_timeout,
            min_replicas: opts.min_replicas,
        })
    }

    fn sentinel(seeds: Vec<Seed>, name: &str, opts: &ConnectOptions) -> Result<Server> {
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err(Error::Usage(format!(
                "invalid --sentinel master name {name:?}"
            )));
        }
        let label = format!("master {name:?} via Sentinel {}", seeds[0].label);
        let tls = seeds.iter().any(|s| s.tls);
        // The master gets RLOCK_PASSWORD, or the first URL's credentials.
        let mut master = seeds[0].info.redis_settings().clone();
        if let Some(pw) = &opts.password {
            master = master.set_password(pw);
        }
        let mut sentinels = Vec::new();
        for seed in seeds {
            if let Client::One(c) = Server::one(seed, opts)?.client {
                sentinels.push(*c);
            }
        }
        Ok(Server {
            client: Client::Sentinel(std::sync::Arc::new(Sentinels {
                name: name.to_string(),
                sentinels,
                master,
                tls: tls.then(|| opts.tls.clone()),
            })),
            url: label.clone(),
            label,
            timeout: opts.connect_timeout,
            min_replicas: opts.min_replicas,
        })
    }

    /// The Sentinels a `--sentinel` server asks (none for the others), for
    /// `rlock doctor`.
    pub(crate) fn sentinel_clients(&self) -> &[redis::Client] {
        match &self.client {
            Client::Sentinel(s) => &s.sentinels,
            _ => &[],
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        match self.client {
            #[cfg(feature = "cluster")]
            Client::Cluster(_) => true,
            Client::One(_) | Client::Sentinel(_) => false,
        }
    }

    /// Does a new connection follow a failover by itself (Sentinel asks
    /// for the master again, Cluster reads the slots again)? Then READONLY
    /// and MASTERDOWN are passing states, not a wrong address.
    pub(crate) fn follows_failovers(&self) -> bool {
        match self.client {
            #[cfg(feature = "cluster")]
            Client::Cluster(_) => true,
            Client::Sentinel(_) => true,
            Client::One(_) => false,
        }
    }

    /// A fresh connection whose replies are bounded by the connect timeout.
    pub(crate) fn connect(&self) -> Result<Conn> {
        let unavailable = |cause: redis::RedisError| match cause.is_timeout() {
            true => Error::Unavailable {
                context: "connect".into(),
                cause: crate::error::no_answer(cause, &self.label, self.timeout),
            },
            false => Error::Unavailable {
                context: format!("cannot use Redis at {}", self.label),
                cause,
            },
        };
        let mut conn = match &self.client {
            Client::One(c) => Conn::One(
                c.get_connection_with_timeout(self.timeout)
                    .map_err(unavailable)?,
            ),
            #[cfg(feature = "cluster")]
            Client::Cluster(c) => {
                let (seed, conn) = c.connect(None).map_err(unavailable)?;
                Conn::Cluster(Box::new(ClusterConn {
                    conn,
                    seeds: c.clone(),
                    seed,
                    read_timeout: None,
                    write_timeout: None,
                }))
            }
            Client::Sentinel(s) => Conn::One(s.connect_master(self.timeout).map_err(unavailable)?),
        };
        conn.set_read_timeout(Some(self.timeout))
            .map_err(unavailable)?;
        conn.set_write_timeout(Some(self.timeout))
            .map_err(unavailable)?;
        Ok(conn)
    }
}

impl Seed {
    /// `password`: apply RLOCK_PASSWORD (not to Sentinels, which have their
    /// own credentials in their URLs).
    fn parse(url: &str, opts: &ConnectOptions, password: bool) -> Result<Seed> {
        let shown = redact(url);
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
        match scheme {
            "redis" | "unix" | "redis+unix" if opts.tls.is_set() => {
                return Err(Error::Usage(format!(
                    "Redis URL {shown}: --tls-ca/--tls-cert/--tls-key need a rediss:// URL"
                )));
            }
            "redis" | "unix" | "redis+unix" => {}
            "rediss" if cfg!(feature = "tls") => {}
            "rediss" => {
                return Err(Error::Usage(format!(
                    "Redis URL {shown}: this rlock was built without TLS support (the \"tls\" \
                     feature); use redis:// or unix://"
                )));
            }
            _ => {
                return Err(Error::Usage(format!(
                    "Redis URL {shown}: unknown scheme; use redis://, rediss:// or unix://"
                )));
            }
        }
        let info = url.into_connection_info().map_err(|e| {
            Error::Usage(format!(
                "invalid Redis URL {shown}: {}",
                e.detail().unwrap_or("does not parse")
            ))
        })?;
        let mut redis = info.redis_settings().clone().set_skip_set_lib_name();
        if let Some(pw) = opts.password.as_ref().filter(|_| password) {
            redis = redis.set_password(pw);
        }
        let label = info.addr().to_string();
        Ok(Seed {
            info: info.set_redis_settings(redis),
            label,
            shown,
            tls: scheme == "rediss",
        })
    }
}

/// A connection to one Redis, or to a Redis Cluster (which routes every
/// command by its first key, following MOVED and ASK).
pub(crate) enum Conn {
    One(redis::Connection),
    #[cfg(feature = "cluster")]
    Cluster(Box<ClusterConn>),
}

impl Conn {
    pub(crate) fn set_read_timeout(&mut self, d: Option<Duration>) -> redis::RedisResult<()> {
        match self {
            Conn::One(c) => c.set_read_timeout(d),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => {
                c.read_timeout = d;
                c.conn.set_read_timeout(d)
            }
        }
    }

    pub(crate) fn set_write_timeout(&mut self, d: Option<Duration>) -> redis::RedisResult<()> {
        match self {
            Conn::One(c) => c.set_write_timeout(d),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => {
                c.write_timeout = d;
                c.conn.set_write_timeout(d)
            }
        }
    }

    /// Every key matching `glob` of type `ty`, on every master.
    pub(crate) fn scan(&mut self, glob: &str, ty: &str) -> redis::RedisResult<Vec<String>> {
        let scan = |cursor: u64| {
            let mut c = redis::cmd("SCAN");
            c.arg(cursor)
                .arg("MATCH")
                .arg(glob)
                .arg("COUNT")
                .arg(1000)
                .arg("TYPE")
                .arg(ty);
            c
        };
        let mut keys = Vec::new();
        match self {
            Conn::One(c) => {
                let mut cursor = 0;
                loop {
                    let (next, mut batch): (u64, Vec<String>) = scan(cursor).query(c)?;
                    keys.append(&mut batch);
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
            }
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => {
                use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
                // SCAN is per node: walk every master in turn.
                let slots = c.run(|c| {
                    c.route_command(
                        &redis::cmd("CLUSTER").arg("SLOTS").to_owned(),
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                    )
                })?;
                // Each range is [start, end, [host, port, id, ...], replicas...].
                let ranges: Vec<Vec<redis::Value>> =
                    redis::FromRedisValue::from_redis_value(slots)?;
                let mut masters: Vec<(String, u16)> = Vec::new();
                for r in ranges {
                    if let Some(node) = r.into_iter().nth(2) {
                        let node: Vec<redis::Value> =
                            redis::FromRedisValue::from_redis_value(node)?;
                        let mut it = node.into_iter();
                        if let (Some(h), Some(p)) = (it.next(), it.next()) {
                            masters.push((
                                redis::FromRedisValue::from_redis_value(h)?,
                                redis::FromRedisValue::from_redis_value(p)?,
                            ));
                        }
                    }
                }
                masters.sort();
                masters.dedup();
                for (host, port) in masters {
                    let mut cursor = 0;
                    loop {
                        let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                            host: host.clone(),
                            port,
                        });
                        let reply = c.conn.route_command(&scan(cursor), at)?;
                        let (next, mut batch): (u64, Vec<String>) =
                            redis::FromRedisValue::from_redis_value(reply)?;
                        keys.append(&mut batch);
                        cursor = next;
                        if cursor == 0 {
                            break;
                        }
                    }
                }
            }
        }
        Ok(keys)
    }
}

impl redis::ConnectionLike for Conn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        match self {
            Conn::One(c) => c.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.run(|c| c.req_packed_command(cmd)),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        match self {
            Conn::One(c) => c.req_packed_commands(cmd, offset, count),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.run(|c| c.req_packed_commands(cmd, offset, count)),
        }
    }

    fn req_command(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        match self {
            Conn::One(c) => c.req_command(cmd),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.run(|c| c.req_command(cmd)),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c) => c.get_db(),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.conn.get_db(),
        }
    }

    fn supports_pipelining(&self) -> bool {
        match self {
            Conn::One(c) => c.supports_pipelining(),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.conn.supports_pipelining(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            Conn::One(c) => c.check_connection(),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.conn.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            Conn::One(c) => c.is_open(),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.conn.is_open(),
        }
    }
}

/// The URL with any user:password replaced by `***`. Passwords may hold
/// characters a URL should have escaped (`/`, `?`, `@`), so everything up to
/// the last `@` counts as credentials; what does not look like a URL at all
/// is not echoed if it holds an `@`. A query string (`?pass=...` works for
/// unix sockets) is hidden too.
pub fn redact(url: &str) -> String {
    let hidden = match (url.split_once("://"), url.rfind('@')) {
        (_, None) => url.to_string(),
        (Some((scheme, rest)), Some(_)) => match rest.rfind('@') {
            Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
            None => "<redacted URL>".to_string(),
        },
        (None, Some(_)) => "<redacted URL>".to_string(),
    };
    match hidden.split_once('?') {
        Some((base, _)) => format!("{base}?***"),
        None => hidden,
    }
}

/// `text` with every word that looks like a URL redacted (for messages
/// that may quote what the user typed, like clap's).
pub fn redact_text(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            if w.contains("://") || w.contains('@') {
                let t = w.trim_matches(|c| c == '\'' || c == '"');
                w.replace(t, &redact(t))
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `argv` as one line safe to store in Redis and show in `rlock status`:
/// the arguments joined with spaces, secrets replaced by `***`, and cut to
/// 200 characters plus `...` (after redacting, so a cut never leaves half a
/// password in view). Hidden are:
///
/// - a URL's user and password, and its query string (see [`redact`]),
///   also inside an argument (`--url=redis://u:p@h` gives
///   `--url=redis://***@h`); and `user:password@host` without a scheme;
/// - the value of `NAME=value` or `--flag=value` whose name contains, in any
///   case, PASSWORD, PASSWD, PASS, SECRET, TOKEN, AUTH, CREDENTIAL, APIKEY,
///   API_KEY or PRIVATE (`-` counts as `_`): `RLOCK_PASSWORD=***`. When the
///   whole argument is one such assignment, all of it after `=` is hidden,
///   spaces included;
/// - the argument after a flag that takes a secret: a flag named, or ending
///   in, password, passwd, secret, token, apikey, api-key, private-key,
///   credential(s); one named `pass` or `auth` or ending in `-pass`/`-auth`;
///   redis-server's `--requirepass` and `--masterauth`; openssl's `-passin`
///   and `-passout`; and `-a`, but only after redis-cli (or
///   redis-benchmark, or valkey's and keydb's), as `-a` means something
///   harmless to most programs (`cp -a`). `--no-...` flags take no value.
///   The match is stricter than for `NAME=value` because a flag that takes
///   no value would hide an innocent argument;
/// - the value of an HTTP header with such a name (`Authorization: ***`,
///   also after `Bearer` and the like).
///
/// A shell command in one argument (the one after `-c`, as in `sh -c '...'`
/// or `bash -lc '...'`) is read word by word with the same rules; its
/// quoting is not parsed, so a quoted secret with spaces in it can show past
/// its first word. The rules err on the side of hiding: `AUTHOR=x` is shown
/// as `AUTHOR=***`, and `ssh h 'PGPASSWORD=x psql'` as `ssh h PGPASSWORD=***`.
pub fn redact_command(argv: &[OsString]) -> String {
    let mut words = Words::default();
    let line = argv
        .iter()
        .map(|a| words.arg(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line,
    }
}

/// Names (of variables, `--flag=`s, headers) whose value is a secret when
/// they contain one of these.
const SECRET_NAMES: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PASS",
    "SECRET",
    "TOKEN",
    "AUTH",
    "CREDENTIAL",
    "APIKEY",
    "API_KEY",
    "PRIVATE",
];

/// Flags ending in one of these take a secret as the next argument.
const SECRET_FLAG_ENDINGS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "api-key",
    "private-key",
    "credential",
    "credentials",
];

/// Flags named one of these, or ending in `-` and one of these, do too
/// (`--bypass` and `--oauth` do not).
const SECRET_FLAG_WORDS: &[&str] = &["pass", "auth"];

/// And these flags, whole.
const SECRET_FLAGS: &[&str] = &["requirepass", "masterauth", "passin", "passout"];

/// Programs whose `-a` is a password.
const REDIS_TOOLS: &[&str] = &[
    "redis-cli",
    "redis-benchmark",
    "valkey-cli",
    "valkey-benchmark",
    "keydb-cli",
    "keydb-benchmark",
];

/// Authorization schemes written before the secret in a header value.
const AUTH_SCHEMES: &[&str] = &["bearer", "basic", "digest", "token", "negotiate"];

/// What [`redact_command`] has seen so far.
#[derive(Default)]
struct Words {
    hide: Hide,
    /// The last argument was `-c` (or `-lc`...): this one is a shell
    /// command.
    script: bool,
    /// A redis-cli came before: its `-a` takes a password.
    redis_tool: bool,
}

#[derive(Default, PartialEq)]
enum Hide {
    #[default]
    No,
    /// The next word or argument is a secret.
    Next,
    /// The next word is a header's value: a secret, or an authorization
    /// scheme with the secret after it.
    Header,
}

impl Words {
    fn arg(&mut self, arg: &str) -> String {
        // `-c`, or `-lc`, `-ec`: the shell's flag for a command.
        let shell_flag = arg
            .strip_prefix('-')
            .is_some_and(|f| f.ends_with('c') && f.chars().all(|c| c.is_ascii_lowercase()));
        let script = std::mem::replace(&mut self.script, shell_flag);
        if self.hide != Hide::No {
            self.hide = Hide::No;
            return "***".into();
        }
        // One assignment or header is hidden whole, spaces and all; not
        // a shell command that starts with one.
        if let Some((name, _)) = arg.split_once('=').filter(|_| !script)
            && secret_name(name.trim_start_matches('-'))
        {
            return format!("{name}=***");
        }
        if let Some((name, value)) = arg.split_once(':').filter(|_| !script)
            && value.starts_with(char::is_whitespace)
            && secret_name(name)
        {
            return format!("{name}: ***");
        }
        let mut out = String::with_capacity(arg.len());
        let mut rest = arg;
        while !rest.is_empty() {
            let space = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..space]);
            rest = &rest[space..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if end > 0 {
                out.push_str(&self.word(&rest[..end]));
            }
            rest = &rest[end..];
        }
        out
    }

    fn word(&mut self, w: &str) -> String {
        let bare = w.trim_matches(['\'', '"']);
        match self.hide {
            Hide::No => {}
            Hide::Next => {
                self.hide = Hide::No;
                return "***".into();
            }
            Hide::Header => {
                let scheme = AUTH_SCHEMES.iter().any(|s| bare.eq_ignore_ascii_case(s));
                self.hide = if scheme { Hide::Next } else { Hide::No };
                return "***".into();
            }
        }
        let program = bare.rsplit('/').next().unwrap_or(bare);
        if REDIS_TOOLS.contains(&program) {
            self.redis_tool = true;
        }
        if self.takes_secret(bare) {
            self.hide = Hide::Next;
            return w.into();
        }
        if let Some(name) = bare.strip_suffix(':')
            && secret_name(name)
        {
            self.hide = Hide::Header;
            return w.into();
        }
        if let Some((name, value)) = w.split_once('=') {
            let bare = name.trim_start_matches(['\'', '"', '-']);
            if is_name(bare) {
                if secret_name(bare) {
                    return format!("{name}=***");
                }
                return format!("{name}={}", redact_value(value));
            }
        }
        redact_value(w)
    }

    /// Whether `w` is a flag whose value, in the next word, is a secret.
    fn takes_secret(&self, w: &str) -> bool {
        let Some(flag) = w.strip_prefix('-') else {
            return false;
        };
        if flag == "a" {
            return self.redis_tool;
        }
        let name = flag
            .trim_start_matches('-')
            .to_ascii_lowercase()
            .replace('_', "-");
        if name.len() < 2 || !is_name(&name) || name.starts_with("no-") {
            return false;
        }
        SECRET_FLAGS.contains(&name.as_str())
            || SECRET_FLAG_ENDINGS.iter().any(|e| name.ends_with(e))
            || SECRET_FLAG_WORDS
                .iter()
                .any(|e| name == *e || name.ends_with(&format!("-{e}")))
    }
}

/// A variable, flag or header name (nothing that could be a URL or a path).
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase().replace('-', "_");
    is_name(&name) && SECRET_NAMES.iter().any(|s| name.contains(s))
}

/// A URL redacted; `user:password@host` without a scheme too.
fn redact_value(v: &str) -> String {
    if v.contains("://") {
        return redact(v);
    }
    match v.rfind('@') {
        Some(at) if v[..at].contains(':') => format!("***{}", &v[at..]),
        _ => v.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials() {
        assert_eq!(redact("redis://u:s3cret@h:1/0"), "redis://***@h:1/0");
        assert_eq!(redact("redis://:s3cret@h"), "redis://***@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("nonsense"), "nonsense");
        assert_eq!(redact("redis://:se?cret@h"), "redis://***@h");
        assert_eq!(redact("redis://user:se/cret@h:1"), "redis://***@h:1");
        assert_eq!(redact("redis:/:secret@h"), "<redacted URL>");
        assert_eq!(redact("redis//:secret@h"), "<redacted URL>");
        assert_eq!(redact("unix:///x.sock?pass=hunter2"), "unix:///x.sock?***");
        assert_eq!(
            redact_text("unexpected argument 'redis://:hunter2@h' found"),
            "unexpected argument 'redis://***@h' found"
        );
    }

    fn cmd(args: &[&str]) -> String {
        redact_command(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn harmless_commands_are_unchanged() {
        for c in [
            &["make", "deploy"][..],
            &["./job", "--limit=3", "FOO=bar", "-v"],
            &["redis-cli", "-h", "h", "-p", "6379", "--askpass", "ping"],
            &["cp", "-a", "src", "dst"],
            &["ssh", "deploy@web1", "./x"],
            &["git", "clone", "git@github.com:o/r.git"],
            &["docker", "pull", "img@sha256:abc"],
            &["curl", "https://example.com/a", "-H", "Accept: text/plain"],
            &["sh", "-c", "sleep 1;  echo\tdone"],
            &[
                "tool",
                "--bypass",
                "x",
                "--no-password",
                "y",
                "--password-file",
                "/p",
            ],
            &["tool", "--oauth", "x", "--key", "k"],
            &[],
        ] {
            assert_eq!(cmd(c), c.join(" "));
        }
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(b"caf\xe9".to_vec());
        assert_eq!(redact_command(&["echo".into(), odd]), "echo caf\u{fffd}");
    }

    #[test]
    fn hides_urls_passwords() {
        assert_eq!(
            cmd(&["redis-cli", "-u", "redis://user:secret@h:6379/0", "ping"]),
            "redis-cli -u redis://***@h:6379/0 ping"
        );
        assert_eq!(
            cmd(&["./job", "--url=redis://u:p@h", "x"]),
            "./job --url=redis://***@h x"
        );
        assert_eq!(
            cmd(&["job", "unix:///s.sock?pass=hunter2"]),
            "job unix:///s.sock?***"
        );
        assert_eq!(
            cmd(&["curl", "--proxy", "user:hunter2@proxy:3128", "x"]),
            "curl --proxy ***@proxy:3128 x"
        );
    }

    #[test]
    fn hides_secret_assignments() {
        assert_eq!(
            cmd(&["env", "RLOCK_PASSWORD=hunter2", "./job"]),
            "env RLOCK_PASSWORD=*** ./job"
        );
        for name in [
            "PGPASSWORD",
            "db_passwd",
            "PASS",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "BASIC_AUTH",
            "GOOGLE_CREDENTIALS",
            "APIKEY",
            "x_api_key",
            "PRIVATE_KEY",
            "--password",
            "--api-key",
            "-token",
        ] {
            assert_eq!(
                cmd(&["env", &format!("{name}=hunter2"), "x"]),
                format!("env {name}=*** x")
            );
        }
        // The whole value of one argument, spaces and all.
        assert_eq!(
            cmd(&["env", "PASSWORD=two words", "x"]),
            "env PASSWORD=*** x"
        );
    }

    #[test]
    fn hides_the_argument_after_a_secret_flag() {
        for flag in [
            "--password",
            "--pass",
            "--token",
            "--secret",
            "--auth",
            "--db-password",
            "--client_secret",
            "--access-token",
            "--x-api-key",
            "--basic-auth",
            "--requirepass",
            "--masterauth",
            "-passin",
            "-Password",
        ] {
            assert_eq!(
                cmd(&["tool", flag, "hunter 2", "ping"]),
                format!("tool {flag} *** ping")
            );
        }
        assert_eq!(
            cmd(&["redis-cli", "-a", "hunter2", "-p", "6380", "ping"]),
            "redis-cli -a *** -p 6380 ping"
        );
        assert_eq!(
            cmd(&["timeout", "5", "/usr/bin/redis-cli", "-a", "hunter2"]),
            "timeout 5 /usr/bin/redis-cli -a ***"
        );
        // The flag last: nothing to hide, nothing lost.
        assert_eq!(cmd(&["tool", "--token"]), "tool --token");
    }

    #[test]
    fn hides_authorization_headers() {
        assert_eq!(
            cmd(&["curl", "-H", "Authorization: Bearer abc", "u"]),
            "curl -H Authorization: *** u"
        );
        assert_eq!(
            cmd(&["curl", "-H", "X-Api-Key: abc", "u"]),
            "curl -H X-Api-Key: *** u"
        );
    }

    #[test]
    fn reads_shell_commands_word_by_word() {
        assert_eq!(
            cmd(&[
                "sh",
                "-c",
                "PGPASSWORD=hunter2 psql; redis-cli -a hunter2 ping && \
                 curl -H 'Authorization: Bearer abc' https://u:hunter2@h/x"
            ]),
            "sh -c PGPASSWORD=*** psql; redis-cli -a *** ping && \
             curl -H 'Authorization: *** *** https://***@h/x"
        );
        assert_eq!(
            cmd(&["bash", "-lc", "export FOO=1 TOKEN=abc; ./job --secret s"]),
            "bash -lc export FOO=1 TOKEN=*** ./job --secret ***"
        );
        // Not after -c: one assignment, hidden whole.
        assert_eq!(
            cmd(&["ssh", "h", "PGPASSWORD=x psql"]),
            "ssh h PGPASSWORD=***"
        );
        // Errs on the side of hiding.
        assert_eq!(cmd(&["env", "AUTHOR=Ann", "x"]), "env AUTHOR=*** x");
    }

    #[test]
    fn cuts_long_lines_after_redacting() {
        let long = "x".repeat(185);
        let line = cmd(&[&long, "redis://u:hunter2@host", "y"]);
        // Cut first, it would have ended in "redis://u:hunt".
        assert_eq!(line, format!("{long} redis://***@ho..."));
        assert_eq!(line.chars().count(), 203);
        let short = cmd(&[&"é".repeat(200)]);
        assert_eq!(short, "é".repeat(200));
        assert_eq!(cmd(&[&"é".repeat(201)]), format!("{}...", "é".repeat(200)));
    }

    #[test]
    fn refuses_unknown_schemes() {
        let opts = |u: &str| ConnectOptions {
            urls: vec![u.into()],
            ..Default::default()
        };
        for bad in ["http://x", "x", "memcache://h:1"] {
            assert!(
                matches!(Server::open_all(&opts(bad)), Err(Error::Usage(_))),
                "{bad}"
            );
        }
        assert!(Server::open_all(&opts("redis://127.0.0.1:1")).is_ok());
    }

    /// Built without TLS (`--no-default-features`): a rediss:// URL is bad
    /// usage, said in one line, not a panic or a plain-text connection.
    #[cfg(not(feature = "tls"))]
    #[test]
    fn rediss_needs_the_tls_feature() {
        let opts = ConnectOptions {
            urls: vec!["rediss://u:hunter2@127.0.0.1:1".into()],
            ..Default::default()
        };
        match Server::open_all(&opts) {
            Err(Error::Usage(m)) => {
                assert_eq!(
                    m,
                    "Redis URL rediss://***@127.0.0.1:1: this rlock was built without TLS \
                     support (the \"tls\" feature); use redis:// or unix://"
                );
            }
            other => panic!("{:?}", other.map(|s| s.len())),
        }
    }

    /// Built without Redis Cluster support: --cluster is bad usage.
    #[cfg(not(feature = "cluster"))]
    #[test]
    fn cluster_needs_the_cluster_feature() {
        let opts = ConnectOptions {
            urls: vec!["redis://127.0.0.1:1".into()],
            cluster: true,
            ..Default::default()
        };
        match Server::open_all(&opts) {
            Err(Error::Usage(m)) => assert!(m.contains("without Redis Cluster support"), "{m}"),
            other => panic!("{:?}", other.map(|s| s.len())),
        }
    }
}
