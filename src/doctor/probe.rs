//! How doctor talks to a server: one connection each, read-only commands, routed in a Cluster.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) struct Ctx<'a> {
    pub(super) opts: &'a ConnectOptions,
    pub(super) ttl: Duration,
    /// A lock's main key nobody uses, for permission checks.
    pub(super) probe: String,
    pub(super) prefix: String,
    /// `--role`: check the user against that role, not every command.
    pub(super) role: Option<Role>,
}

impl Ctx<'_> {
    pub(super) fn redlock(&self) -> bool {
        self.opts.urls.len() > 1 && !self.opts.cluster && self.opts.sentinel.is_none()
    }
}

/// Where a server's commands go: a connection of its own, or one node of a
/// cluster connection.
pub(super) enum Probe<'a> {
    Direct(&'a mut Conn),
    #[cfg(feature = "cluster")]
    Node {
        conn: &'a mut redis::cluster::ClusterConnection,
        host: String,
        port: u16,
    },
}

impl Probe<'_> {
    pub(super) fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        match self {
            Probe::Direct(c) => cmd.query(&mut **c),
            #[cfg(feature = "cluster")]
            Probe::Node { conn, host, port } => {
                let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                routed(conn, cmd, at)
            }
        }
    }

    /// One parameter (CONFIG GET), or why it cannot be read.
    pub(super) fn config(&mut self, name: &str) -> std::result::Result<String, String> {
        let reply: redis::RedisResult<Vec<String>> =
            self.query(redis::cmd("CONFIG").arg("GET").arg(name));
        match reply {
            Ok(kv) => kv
                .get(1)
                .cloned()
                .ok_or_else(|| format!("CONFIG GET {name} gave nothing")),
            Err(e) => Err(short(&e)),
        }
    }
}

/// A command sent to the cluster node `at` chooses, its reply converted.
#[cfg(feature = "cluster")]
pub(super) fn routed<T: FromRedisValue>(
    conn: &mut redis::cluster::ClusterConnection,
    cmd: &redis::Cmd,
    at: RoutingInfo,
) -> redis::RedisResult<T> {
    let reply = conn.route_command(cmd, at)?.extract_error()?;
    Ok(redis::from_redis_value(reply)?)
}

/// An error in a few words, for a finding.
pub(super) fn short(e: &redis::RedisError) -> String {
    let text = e.to_string();
    let text = text.split(" - ").next().unwrap_or(&text).trim();
    crate::conn::redact_text(text)
}

/// INFO, parsed into field -> value.
pub(super) type Info = HashMap<String, String>;

pub(super) fn parse_info(text: &str) -> Info {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// `conn` if its server answers a PING. One that accepted the connection
/// but sends nothing back in time (frozen, SIGSTOP, a hung host) is down:
/// without this, every check's timeout read as "INFO refused", "TIME
/// refused", and the report said nothing unsafe. An error reply (an ACL
/// without +ping) is an answer, but for a missing password.
pub(super) fn answering(server: &Server, mut conn: Conn) -> Result<Conn> {
    let what = || format!("cannot use Redis at {}", server.label);
    match redis::cmd("PING").query::<redis::Value>(&mut conn) {
        Err(e) if e.is_timeout() => Err(crate::Error::unavailable(
            "PING",
            crate::error::no_answer(e, &server.label, server.timeout),
        )),
        Err(e) if e.is_io_error() || e.is_connection_dropped() => {
            Err(crate::Error::unavailable(what(), e))
        }
        // A server that wants a password we did not give accepts the
        // connection and refuses every command: for rlock it is as good as
        // down (exit 69), not a server with a few unreadable settings.
        Err(e) if crate::error::wants_auth(&e) => Err(crate::Error::from_redis(e, &what())),
        _ => Ok(conn),
    }
}
