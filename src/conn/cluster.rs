//! Redis Cluster: the seed nodes a cluster is reached through, and a
//! connection that moves to another seed when one knows no slots.

use std::sync::Arc;
use std::time::Duration;

use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::ConnectOptions;
use super::handle::scan_cmd;
#[cfg(feature = "tls")]
use super::options::install_crypto_provider;
use super::server::{Client, Server};
use super::url::Seed;
use crate::error::Setting;
use crate::{Error, Result, msg};

mod slots;

pub(crate) use slots::{ClusterSlots, Master};

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
            return Err(Error::Invalid(msg![
                Setting::Cluster,
                " needs host:port URLs, not unix sockets"
            ]));
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
            b.build()
                .map_err(|e| Error::invalid(format!("{label}: {e}")))
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
            index: opts.index.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Err(Error::Invalid(m)) => assert_eq!(
                m.to_string(),
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
            Err(Error::Invalid(m)) => {
                assert_eq!(
                    m,
                    msg![Setting::Cluster, " needs host:port URLs, not unix sockets"]
                )
            }
            other => panic!("{:?}", other.map(|s| s.len())),
        }
    }
}
