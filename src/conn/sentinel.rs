//! Sentinel: finding the master a set of Sentinels names, with a timeout
//! on every step, and following it through failovers.

use std::sync::Arc;
use std::time::Duration;

use redis::{FromRedisValue, IntoConnectionInfo};

use super::ConnectOptions;
use super::options::Tls;
use super::server::{Client, Server};
use super::url::Seed;
use crate::Result;

/// What it takes to find and reach the master a set of Sentinels watches.
/// Looked up by hand, with the connect timeout on every step: redis-rs'
/// Sentinel client has no timeouts, and one frozen Sentinel or master would
/// hang rlock for good.
pub(super) struct Sentinels {
    name: String,
    sentinels: Vec<redis::Client>,
    /// Credentials for the master (the Sentinels' are in their URLs).
    master: redis::RedisConnectionInfo,
    tls: Option<Tls>,
}

impl Sentinels {
    pub(super) fn connect_master(
        &self,
        timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
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
        let Some((host, port)) = ask_master(sentinel, &self.name, timeout)?.0 else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "this Sentinel knows no master by that name",
            )));
        };
        let info = master_url(&host, port, self.tls.is_some())
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

impl Server {
    pub(super) fn sentinel(seeds: Vec<Seed>, name: &str, opts: &ConnectOptions) -> Result<Server> {
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
            client: Client::Sentinel(Arc::new(Sentinels {
                name: name.to_string(),
                sentinels,
                master,
                tls: tls.then(|| opts.tls.clone()),
            })),
            url: label.clone(),
            label,
            timeout: opts.connect_timeout,
            min_replicas: opts.min_replicas,
            index: opts.index.clone(),
        })
    }

    /// Asks every Sentinel of a `--sentinel` server (none for the others)
    /// where its master is, one after the other, each step bounded by the
    /// connect timeout: what `rlock doctor` reports, Sentinel by Sentinel.
    pub(crate) fn ask_sentinels(&self) -> Vec<SentinelAnswer> {
        let Client::Sentinel(s) = &self.client else {
            return Vec::new();
        };
        s.sentinels
            .iter()
            .map(|client| SentinelAnswer {
                at: client.get_connection_info().addr().to_string(),
                reply: ask_master(client, &s.name, self.timeout),
            })
            .collect()
    }
}

/// What one Sentinel said when asked for the master (see
/// [`Server::ask_sentinels`]).
pub(crate) struct SentinelAnswer {
    /// The Sentinel's address: host:port, or a socket path.
    pub(crate) at: String,
    /// What [`ask_master`] returned: the master's address (`None`: this
    /// Sentinel knows no master by that name) and the connection to the
    /// Sentinel, for more questions (SENTINEL CKQUORUM); or why it did not
    /// answer.
    pub(crate) reply: redis::RedisResult<(Option<(String, u16)>, redis::Connection)>,
}

/// Asks one Sentinel where the master `name` is (SENTINEL
/// GET-MASTER-ADDR-BY-NAME), with `timeout` on connecting and on every
/// reply: the master's host and port, or `None` when this Sentinel knows
/// no master by that name. The connection comes back too, with its
/// timeouts set, for more questions.
pub(crate) fn ask_master(
    sentinel: &redis::Client,
    name: &str,
    timeout: Duration,
) -> redis::RedisResult<(Option<(String, u16)>, redis::Connection)> {
    let mut conn = sentinel.get_connection_with_timeout(timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    let reply: redis::Value = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(name)
        .query(&mut conn)?;
    Ok((master_addr(reply)?, conn))
}

/// A GET-MASTER-ADDR-BY-NAME reply: nil for a name the Sentinel does not
/// monitor, else `[host, port]`, the port a string.
fn master_addr(reply: redis::Value) -> redis::RedisResult<Option<(String, u16)>> {
    Ok(FromRedisValue::from_redis_value(reply)?)
}

/// The URL of the master a Sentinel named: an IPv6 address goes in
/// brackets, and the master speaks TLS when the Sentinels do.
fn master_url(host: &str, port: u16, tls: bool) -> String {
    let scheme = if tls { "rediss" } else { "redis" };
    if host.contains(':') {
        format!("{scheme}://[{host}]:{port}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Setting;
    use crate::{Error, msg};

    fn bulk(s: &str) -> redis::Value {
        redis::Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_masters_url() {
        assert_eq!(master_url("10.0.0.7", 6379, false), "redis://10.0.0.7:6379");
        assert_eq!(
            master_url("redis-1.internal", 6380, true),
            "rediss://redis-1.internal:6380"
        );
        assert_eq!(master_url("::1", 6379, false), "redis://[::1]:6379");
        assert_eq!(
            master_url("2001:db8::7", 7000, true),
            "rediss://[2001:db8::7]:7000"
        );
        // What the master is then dialed with.
        let info = master_url("2001:db8::7", 7000, false)
            .into_connection_info()
            .unwrap();
        assert_eq!(info.addr().to_string(), "2001:db8::7:7000");
    }

    #[test]
    fn get_master_addr_by_name_replies() {
        assert_eq!(master_addr(redis::Value::Nil).unwrap(), None);
        // Sentinel sends the port as a string.
        assert_eq!(
            master_addr(redis::Value::Array(vec![bulk("10.0.0.7"), bulk("6380")])).unwrap(),
            Some(("10.0.0.7".to_string(), 6380))
        );
        assert_eq!(
            master_addr(redis::Value::Array(vec![
                bulk("::1"),
                redis::Value::Int(6379)
            ]))
            .unwrap(),
            Some(("::1".to_string(), 6379))
        );
        for bad in [
            redis::Value::Array(vec![bulk("h"), bulk("99999")]),
            redis::Value::Array(vec![bulk("h"), bulk("port")]),
            redis::Value::Array(vec![bulk("h")]),
            redis::Value::Int(1),
        ] {
            assert!(master_addr(bad.clone()).is_err(), "{bad:?}");
        }
    }

    fn sentinels(opts: &ConnectOptions) -> (Server, Arc<Sentinels>) {
        let mut servers = Server::open_all(opts).unwrap();
        assert_eq!(servers.len(), 1);
        let server = servers.remove(0);
        let Client::Sentinel(s) = &server.client else {
            panic!("not a Sentinel server: {}", server.label);
        };
        let s = s.clone();
        (server, s)
    }

    #[test]
    fn one_server_through_all_the_sentinels() {
        let opts = ConnectOptions {
            urls: vec![
                "redis://:sentinel-pw@s1:26379".into(),
                "redis://s2:26379".into(),
            ],
            sentinel: Some("mymaster".into()),
            password: Some("master-pw".into()),
            ..Default::default()
        };
        let (server, s) = sentinels(&opts);
        assert_eq!(server.label, "master \"mymaster\" via Sentinel s1:26379");
        assert_eq!(server.url, server.label);
        assert!(server.follows_failovers() && !server.is_cluster());
        assert_eq!(s.name, "mymaster");
        assert!(s.tls.is_none());
        // RLOCK_PASSWORD is the master's; each Sentinel keeps its URL's.
        assert_eq!(s.master.password(), Some("master-pw"));
        let sentinel_pw: Vec<Option<&str>> = s
            .sentinels
            .iter()
            .map(|c| c.get_connection_info().redis_settings().password())
            .collect();
        assert_eq!(sentinel_pw, [Some("sentinel-pw"), None]);
    }

    #[test]
    fn without_rlock_password_the_master_gets_the_first_urls_credentials() {
        let opts = ConnectOptions {
            urls: vec![
                "redis://alice:pw@s1:26379/2".into(),
                "redis://s2:26379".into(),
            ],
            sentinel: Some("m".into()),
            ..Default::default()
        };
        let (_, s) = sentinels(&opts);
        assert_eq!(s.master.username(), Some("alice"));
        assert_eq!(s.master.password(), Some("pw"));
        assert_eq!(s.master.db(), 2);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_sentinels_mean_a_tls_master() {
        let opts = ConnectOptions {
            urls: vec!["rediss://s1:26379".into()],
            sentinel: Some("m".into()),
            ..Default::default()
        };
        let (_, s) = sentinels(&opts);
        assert!(s.tls.as_ref().is_some_and(|t| !t.is_set()));
    }

    #[test]
    fn only_a_sentinel_server_has_sentinels_to_ask() {
        let opts = ConnectOptions::default();
        let server = Server::open_all(&opts).unwrap().remove(0);
        assert!(server.ask_sentinels().is_empty());
    }

    #[test]
    fn a_sentinel_server_refuses_a_bad_master_name() {
        let opts = ConnectOptions {
            urls: vec!["redis://s1:26379".into()],
            sentinel: Some("my\tmaster".into()),
            ..Default::default()
        };
        match Server::open_all(&opts) {
            Err(Error::Invalid(m)) => assert_eq!(
                m,
                msg![
                    "invalid ",
                    Setting::Sentinel,
                    " master name \"my\\tmaster\""
                ]
            ),
            other => panic!("{:?}", other.map(|s| s.len())),
        }
    }
}
