//! A server (one Redis, a Redis Cluster, or the master Sentinels name): the
//! checks that turn [`ConnectOptions`] into servers, and opening a
//! connection to one.

use std::sync::Arc;
use std::time::Duration;

use super::ConnectOptions;
#[cfg(feature = "cluster")]
use super::cluster::{ClusterConn, ClusterSeeds};
use super::handle::Conn;
#[cfg(feature = "tls")]
use super::options::install_crypto_provider;
use super::sentinel::Sentinels;
use super::url::Seed;
use crate::{Error, Result};

/// One Redis server, or one Redis Cluster: a client that can open
/// connections to it.
#[derive(Clone)]
pub(crate) struct Server {
    pub(super) client: Client,
    /// host:port or socket path (the first seed, for a cluster), safe to
    /// print.
    pub(crate) label: String,
    /// The URL as given, redacted (see [`redact`](super::redact)), for
    /// messages that must name what the user typed.
    pub(crate) url: String,
    pub(crate) timeout: Duration,
    pub(crate) min_replicas: u32,
    /// How this client uses the index of locks in use.
    pub(crate) index: super::Index,
}

#[derive(Clone)]
pub(super) enum Client {
    One(Box<redis::Client>),
    #[cfg(feature = "cluster")]
    Cluster(Arc<ClusterSeeds>),
    /// Asks the Sentinels for the current master at every (re)connect, so
    /// a failover is followed on the next connection.
    Sentinel(Arc<Sentinels>),
}

impl Server {
    /// Every server named in `opts`: one, several for RedLock, or one
    /// cluster reached through several seed nodes.
    pub(crate) fn open_all(opts: &ConnectOptions) -> Result<Vec<Server>> {
        opts.check()?;
        let seeds = opts
            .urls
            .iter()
            .map(|u| Seed::parse(u, opts, opts.sentinel.is_none()))
            .collect::<Result<Vec<_>>>()?;
        let mut labels: Vec<&str> = seeds.iter().map(|s| s.label.as_str()).collect();
        labels.sort();
        if labels.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::invalid(
                "the same Redis is named twice; give each server once",
            ));
        }
        opts.check_mode()?;
        #[cfg(feature = "cluster")]
        if opts.cluster {
            return Ok(vec![Server::cluster(seeds, opts)?]);
        }
        if let Some(name) = &opts.sentinel {
            return Ok(vec![Server::sentinel(seeds, name, opts)?]);
        }
        seeds.into_iter().map(|s| Server::one(s, opts)).collect()
    }

    pub(super) fn one(seed: Seed, opts: &ConnectOptions) -> Result<Server> {
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
        let client = client.map_err(|e| Error::invalid(format!("{shown}: {e}")))?;
        Ok(Server {
            client: Client::One(Box::new(client)),
            label: seed.label,
            url: seed.shown,
            timeout: opts.connect_timeout,
            min_replicas: opts.min_replicas,
            index: opts.index.clone(),
        })
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
            true => Error::unavailable(
                "connect",
                crate::error::no_answer(cause, &self.label, self.timeout),
            ),
            // A command of the connection's set-up (CLUSTER SLOTS) refused
            // by the ACL: a missing permission, not an outage.
            false if crate::error::code(&cause) == Some("NOPERM") => {
                Error::from_redis(cause, &format!("connect to Redis at {}", self.label))
            }
            false => Error::unavailable(format!("cannot use Redis at {}", self.label), cause),
        };
        let mut conn = match &self.client {
            Client::One(c) => Conn::One(
                c.get_connection_with_timeout(self.timeout)
                    .map_err(unavailable)?,
            ),
            #[cfg(feature = "cluster")]
            Client::Cluster(c) => {
                Conn::Cluster(Box::new(ClusterConn::open(c).map_err(unavailable)?))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_unknown_schemes() {
        let opts = |u: &str| ConnectOptions {
            urls: vec![u.into()],
            ..Default::default()
        };
        for bad in ["http://x", "x", "memcache://h:1"] {
            assert!(
                matches!(Server::open_all(&opts(bad)), Err(Error::Invalid(_))),
                "{bad}"
            );
        }
        assert!(Server::open_all(&opts("redis://127.0.0.1:1")).is_ok());
    }

    fn open(urls: &[&str]) -> Result<Vec<Server>> {
        Server::open_all(&ConnectOptions {
            urls: urls.iter().map(|u| u.to_string()).collect(),
            ..Default::default()
        })
    }

    #[test]
    fn one_server_per_url() {
        let opts = ConnectOptions {
            urls: vec!["redis://:pw@a:1".into(), "redis://b:2/0".into()],
            connect_timeout: Duration::from_millis(250),
            min_replicas: 1,
            ..Default::default()
        };
        let servers = Server::open_all(&opts).unwrap();
        let seen: Vec<(&str, &str)> = servers
            .iter()
            .map(|s| (s.label.as_str(), s.url.as_str()))
            .collect();
        assert_eq!(seen, [("a:1", "redis://***@a:1"), ("b:2", "redis://b:2/0")]);
        for s in &servers {
            assert_eq!(s.timeout, Duration::from_millis(250));
            assert_eq!(s.min_replicas, 1);
            // A plain server does not follow a failover by itself.
            assert!(!s.is_cluster() && !s.follows_failovers());
            assert!(s.ask_sentinels().is_empty());
        }
    }

    #[test]
    fn the_same_server_twice_is_refused() {
        for urls in [
            &["redis://h:6379", "redis://h"][..],
            &["redis://:a@h:1", "redis://:b@h:1/2"],
            &["unix:///s.sock", "redis+unix:///s.sock?db=1"],
            &["redis://a:1", "redis://b:1", "redis://a:1"],
        ] {
            match open(urls) {
                Err(Error::Invalid(m)) => {
                    assert_eq!(
                        m.to_string(),
                        "the same Redis is named twice; give each server once"
                    )
                }
                other => panic!("{urls:?}: {:?}", other.map(|s| s.len())),
            }
        }
        assert_eq!(open(&["redis://h:1", "redis://h:2"]).unwrap().len(), 2);
    }

    #[test]
    fn the_first_bad_url_is_named() {
        match open(&["redis://ok:1", "redis://:hunter2@h:port", "http://x"]) {
            Err(Error::Invalid(m)) => {
                assert_eq!(
                    m.to_string(),
                    "invalid Redis URL redis://***@h:port: does not parse"
                )
            }
            other => panic!("{:?}", other.map(|s| s.len())),
        }
    }

    #[test]
    fn a_bad_url_is_heard_of_before_a_bad_mode() {
        let opts = ConnectOptions {
            urls: vec!["ftp://h".into()],
            cluster: true,
            sentinel: Some(String::new()),
            ..Default::default()
        };
        match Server::open_all(&opts) {
            Err(Error::Invalid(m)) => {
                assert!(
                    m.to_string()
                        .starts_with("Redis URL ftp://h: unknown scheme"),
                    "{m}"
                )
            }
            other => panic!("{:?}", other.map(|s| s.len())),
        }
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
            Err(Error::Invalid(m)) => {
                assert_eq!(
                    m.to_string(),
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
            Err(Error::Invalid(m)) => {
                assert_eq!(m.0[0], crate::error::Setting::Cluster.into(), "{m}")
            }
            other => panic!("{:?}", other.map(|s| s.len())),
        }
    }
}
