//! Redis Cluster: the seed nodes a cluster is reached through, and a
//! connection that moves to another seed when one knows no slots.

use std::sync::Arc;
use std::time::Duration;

use redis::FromRedisValue;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::ConnectOptions;
use super::handle::scan_cmd;
#[cfg(feature = "tls")]
use super::options::install_crypto_provider;
use super::server::{Client, Server};
use super::url::Seed;
use crate::{Error, Result};

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
pub(super) struct ClusterSeeds {
    /// One client per seed, with that seed as its only initial node, and
    /// the seed's host:port.
    clients: Vec<(String, redis::cluster::ClusterClient)>,
    /// The seed to try first.
    first: std::sync::atomic::AtomicUsize,
}

impl ClusterSeeds {
    /// A connection through the first seed that answers, and that seed;
    /// never through `skip` (a seed whose slot map led nowhere).
    pub(super) fn connect(
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

const NO_NODES: &str =
    "knows no cluster node that answers (not a Redis Cluster node, or not in a cluster)";

/// A connection to a Redis Cluster, with the seeds it came through.
pub(crate) struct ClusterConn {
    pub(super) conn: redis::cluster::ClusterConnection,
    seeds: Arc<ClusterSeeds>,
    /// The seed whose slot map `conn` has.
    seed: usize,
    /// Set again on a connection through another seed.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl ClusterConn {
    /// A connection through the first seed that answers.
    pub(super) fn open(seeds: &Arc<ClusterSeeds>) -> redis::RedisResult<ClusterConn> {
        let (seed, conn) = seeds.connect(None)?;
        Ok(ClusterConn {
            conn,
            seeds: seeds.clone(),
            seed,
            read_timeout: None,
            write_timeout: None,
        })
    }

    pub(super) fn set_read_timeout(&mut self, d: Option<Duration>) -> redis::RedisResult<()> {
        self.read_timeout = d;
        self.conn.set_read_timeout(d)
    }

    pub(super) fn set_write_timeout(&mut self, d: Option<Duration>) -> redis::RedisResult<()> {
        self.write_timeout = d;
        self.conn.set_write_timeout(d)
    }

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

    /// The cluster's slot map, as a random node sees it (CLUSTER SLOTS),
    /// through [`ClusterConn::run`]: a seed that knows no slots is passed
    /// over.
    pub(crate) fn slots(&mut self) -> redis::RedisResult<ClusterSlots> {
        let reply = self.run(|c| {
            c.route_command(
                &redis::cmd("CLUSTER").arg("SLOTS").to_owned(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
        })?;
        ClusterSlots::parse(reply)
    }

    /// Every key matching `glob` of type `ty`, on every master.
    pub(super) fn scan(&mut self, glob: &str, ty: &str) -> redis::RedisResult<Vec<String>> {
        // SCAN is per node: walk every master in turn.
        let masters = self.slots()?.masters();
        let mut keys = Vec::new();
        for Master { host, port, .. } in masters {
            let mut cursor = 0;
            loop {
                let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port,
                });
                let reply = self.conn.route_command(&scan_cmd(cursor, glob, ty), at)?;
                let (next, mut batch): (u64, Vec<String>) =
                    redis::FromRedisValue::from_redis_value(reply)?;
                keys.append(&mut batch);
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(keys)
    }

    /// The connection itself, once [`ClusterConn::run`] has shown its
    /// slot map leads somewhere.
    pub(crate) fn inner(&mut self) -> &mut redis::cluster::ClusterConnection {
        &mut self.conn
    }
}

impl Server {
    pub(super) fn cluster(seeds: Vec<Seed>, opts: &ConnectOptions) -> Result<Server> {
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
            client: Client::Cluster(Arc::new(ClusterSeeds {
                clients,
                first: Default::default(),
            })),
            url: label.clone(),
            label,
            timeout: opts.connect_timeout,
            min_replicas: opts.min_replicas,
        })
    }
}

/// A CLUSTER SLOTS reply: which master serves which slots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClusterSlots {
    pub(crate) ranges: Vec<SlotRange>,
}

/// Slots `start..=end`, and the master that serves them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotRange {
    pub(crate) start: u16,
    pub(crate) end: u16,
    pub(crate) master: Master,
}

/// A master of a cluster: where it is, and how many replicas it has.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Master {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The replicas CLUSTER SLOTS lists with it (for a master in several
    /// ranges, the fewest any of its ranges lists).
    pub(crate) replicas: usize,
}

impl ClusterSlots {
    /// Parses a CLUSTER SLOTS reply. Each range is
    /// `[start, end, [host, port, id, ...], replica...]`, each replica
    /// shaped like the master; what Redis 7 adds after the id (hostname
    /// metadata) is ignored. A range without a master, or a master without
    /// a host and port, is passed over; a value of the wrong type is an
    /// error (a reply from something that is not a cluster node).
    pub(crate) fn parse(reply: redis::Value) -> redis::RedisResult<ClusterSlots> {
        let ranges: Vec<Vec<redis::Value>> =
            FromRedisValue::from_redis_value(reply.extract_error()?)?;
        let mut out = Vec::with_capacity(ranges.len());
        for range in ranges {
            let mut it = range.into_iter();
            let (Some(start), Some(end), Some(node)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let node: Vec<redis::Value> = FromRedisValue::from_redis_value(node)?;
            let mut node = node.into_iter();
            let (Some(host), Some(port)) = (node.next(), node.next()) else {
                continue;
            };
            out.push(SlotRange {
                start: number(start, "slot", 16383)?,
                end: number(end, "slot", 16383)?,
                master: Master {
                    host: FromRedisValue::from_redis_value(host)?,
                    port: number(port, "port", u16::MAX)?,
                    replicas: it.count(),
                },
            });
        }
        Ok(ClusterSlots { ranges: out })
    }

    /// Every master once, sorted by host and port.
    pub(crate) fn masters(&self) -> Vec<Master> {
        let mut masters: Vec<Master> = Vec::new();
        for r in &self.ranges {
            let m = &r.master;
            match masters
                .iter_mut()
                .find(|o| o.host == m.host && o.port == m.port)
            {
                Some(o) => o.replicas = o.replicas.min(m.replicas),
                None => masters.push(m.clone()),
            }
        }
        masters.sort();
        masters
    }

    /// How many of the cluster's 16384 slots have a master.
    #[allow(
        dead_code,
        reason = "for doctor.rs, which another change moves to it (#22); drop this allow then"
    )]
    pub(crate) fn covered(&self) -> u32 {
        self.ranges
            .iter()
            .map(|r| u32::from(r.end.saturating_sub(r.start)) + 1)
            .sum()
    }
}

/// A slot number or a port in a CLUSTER SLOTS reply, refused when out of
/// range (redis-rs would wrap an integer around into a u16).
fn number(v: redis::Value, what: &'static str, max: u16) -> redis::RedisResult<u16> {
    let n: i64 = FromRedisValue::from_redis_value(v)?;
    u16::try_from(n).ok().filter(|n| *n <= max).ok_or_else(|| {
        redis::RedisError::from((
            redis::ErrorKind::Parse,
            "CLUSTER SLOTS reply out of range",
            format!("{what} {n}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// `[host, port, id]`, as CLUSTER SLOTS lists a node.
    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![bulk(host), Value::Int(port), bulk("0123abcd")])
    }

    fn range(start: i64, end: i64, nodes: Vec<Value>) -> Value {
        let mut r = vec![Value::Int(start), Value::Int(end)];
        r.extend(nodes);
        Value::Array(r)
    }

    fn master(host: &str, port: u16, replicas: usize) -> Master {
        Master {
            host: host.into(),
            port,
            replicas,
        }
    }

    #[test]
    fn three_masters_with_replicas() {
        let reply = Value::Array(vec![
            range(
                10923,
                16383,
                vec![node("10.0.0.3", 7002), node("10.0.0.6", 7005)],
            ),
            range(
                0,
                5460,
                vec![node("10.0.0.1", 7000), node("10.0.0.4", 7003)],
            ),
            range(5461, 10922, vec![node("10.0.0.2", 7001)]),
        ]);
        let slots = ClusterSlots::parse(reply).unwrap();
        assert_eq!(
            slots.ranges[0],
            SlotRange {
                start: 10923,
                end: 16383,
                master: master("10.0.0.3", 7002, 1),
            }
        );
        assert_eq!(
            slots.masters(),
            [
                master("10.0.0.1", 7000, 1),
                master("10.0.0.2", 7001, 0),
                master("10.0.0.3", 7002, 1),
            ]
        );
        assert_eq!(slots.covered(), 16384);
    }

    #[test]
    fn a_master_of_several_ranges_is_listed_once_with_its_fewest_replicas() {
        let reply = Value::Array(vec![
            range(0, 99, vec![node("a", 1), node("r1", 1), node("r2", 1)]),
            range(100, 199, vec![node("b", 2)]),
            range(200, 299, vec![node("a", 1), node("r1", 1)]),
        ]);
        let slots = ClusterSlots::parse(reply).unwrap();
        assert_eq!(slots.ranges.len(), 3);
        assert_eq!(slots.masters(), [master("a", 1, 1), master("b", 2, 0)]);
        assert_eq!(slots.covered(), 300);
    }

    #[test]
    fn slots_without_a_master_are_not_covered() {
        let reply = Value::Array(vec![
            range(0, 0, vec![node("a", 1)]),
            range(16383, 16383, vec![node("a", 1)]),
            // No node at all, or a node without its port: passed over.
            range(1, 5000, vec![]),
            range(5001, 6000, vec![Value::Array(vec![bulk("b")])]),
        ]);
        let slots = ClusterSlots::parse(reply).unwrap();
        assert_eq!(slots.covered(), 2);
        assert_eq!(slots.masters(), [master("a", 1, 0)]);
        let empty = ClusterSlots::parse(Value::Array(vec![])).unwrap();
        assert_eq!((empty.covered(), empty.masters()), (0, vec![]));
    }

    #[test]
    fn redis_7_node_metadata_is_ignored() {
        // Redis 7: [ip, port, id, {hostname: ...}]; RESP3 may send a map.
        let meta = Value::Map(vec![(bulk("hostname"), bulk("redis-1.internal"))]);
        let n = Value::Array(vec![bulk("10.0.0.1"), Value::Int(7000), bulk("id"), meta]);
        let reply = Value::Array(vec![range(0, 16383, vec![n])]);
        let slots = ClusterSlots::parse(reply).unwrap();
        assert_eq!(slots.masters(), [master("10.0.0.1", 7000, 0)]);
    }

    #[test]
    fn a_reply_of_the_wrong_shape_is_an_error() {
        let bad_port = Value::Array(vec![bulk("h"), Value::Int(70000)]);
        for bad in [
            Value::Int(1),
            Value::Array(vec![Value::Int(3)]),
            range(0, 10, vec![bulk("not a node")]),
            Value::Array(vec![range(0, 10, vec![bad_port])]),
            Value::Array(vec![range(-1, 10, vec![node("h", 1)])]),
            Value::Array(vec![range(0, 70000, vec![node("h", 1)])]),
            Value::Array(vec![range(0, 16384, vec![node("h", 1)])]),
        ] {
            assert!(ClusterSlots::parse(bad.clone()).is_err(), "{bad:?}");
        }
        // A node that refuses says why.
        let refused =
            redis::parse_redis_value(b"-ERR This instance has cluster support disabled\r\n")
                .unwrap();
        let e = ClusterSlots::parse(refused).unwrap_err();
        assert!(e.to_string().contains("cluster support disabled"), "{e}");
    }

    fn cluster(urls: &[&str]) -> Result<Vec<Server>> {
        Server::open_all(&ConnectOptions {
            urls: urls.iter().map(|u| u.to_string()).collect(),
            cluster: true,
            ..Default::default()
        })
    }

    #[test]
    fn one_server_through_all_the_seeds() {
        let servers = cluster(&[
            "redis://:pw@n1:7000",
            "redis://:pw@n2:7001",
            "redis://:pw@n3:7002",
        ])
        .unwrap();
        assert_eq!(servers.len(), 1);
        let s = &servers[0];
        assert_eq!(s.label, "cluster via n1:7000");
        assert_eq!(s.url, s.label);
        assert!(s.is_cluster() && s.follows_failovers());
        let Client::Cluster(seeds) = &s.client else {
            panic!("not a cluster: {}", s.label);
        };
        let labels: Vec<&str> = seeds.clients.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["n1:7000", "n2:7001", "n3:7002"]);
    }

    #[test]
    fn seeds_agree_on_credentials() {
        match cluster(&["redis://:pw@n1:7000", "redis://:other@n2:7001"]) {
            Err(Error::Usage(m)) => assert_eq!(
                m,
                "cluster via n1:7000: Cannot use different password among initial nodes. - \
                 InvalidClientConfig"
            ),
            other => panic!("{:?}", other.map(|s| s.len())),
        }
        // RLOCK_PASSWORD gives every seed the same one.
        let opts = ConnectOptions {
            urls: vec![
                "redis://:pw@n1:7000".into(),
                "redis://:other@n2:7001".into(),
            ],
            cluster: true,
            password: Some("same".into()),
            ..Default::default()
        };
        assert!(Server::open_all(&opts).is_ok());
    }

    #[test]
    fn seeds_are_host_port_urls() {
        match cluster(&["redis://n1:7000", "unix:///run/redis.sock"]) {
            Err(Error::Usage(m)) => {
                assert_eq!(m, "--cluster needs host:port URLs, not unix sockets")
            }
            other => panic!("{:?}", other.map(|s| s.len())),
        }
    }
}
