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
        })
    }

    /// The Sentinels a `--sentinel` server asks (none for the others), for
    /// `rlock doctor`. Superseded by [`Server::ask_sentinels`]: remove it
    /// once doctor.rs no longer calls it.
    pub(crate) fn sentinel_clients(&self) -> &[redis::Client] {
        match &self.client {
            Client::Sentinel(s) => &s.sentinels,
            _ => &[],
        }
    }

    /// Asks every Sentinel of a `--sentinel` server (none for the others)
    /// where its master is, one after the other, each step bounded by the
    /// connect timeout: what `rlock doctor` reports, Sentinel by Sentinel.
    #[allow(
        dead_code,
        reason = "for doctor.rs, which another change moves to it (#22); drop this allow then"
    )]
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
#[allow(
    dead_code,
    reason = "for doctor.rs, which another change moves to it (#22); drop this allow then"
)]
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
