//! The connection handle, [`Conn`]: one Redis or a Redis Cluster behind
//! one `redis::ConnectionLike`, and how long an idle one may be reused.

use std::time::Duration;

#[cfg(feature = "cluster")]
use super::cluster::ClusterConn;

/// A node that never resends (RedLock) replaces a connection idle for
/// longer than this before use: servers, proxies and NATs close idle
/// connections, and a command sent into a dead one would fail. Other nodes
/// keep their connection (no reconnect, no TLS handshake per renewal): a
/// dead one fails the call with an I/O error, and the call is resent on a
/// fresh one (see `Node::eval` in src/lock/node/transport.rs).
pub(crate) const IDLE_RECONNECT: Duration = Duration::from_secs(1);

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
            Conn::Cluster(c) => c.set_read_timeout(d),
        }
    }

    pub(crate) fn set_write_timeout(&mut self, d: Option<Duration>) -> redis::RedisResult<()> {
        match self {
            Conn::One(c) => c.set_write_timeout(d),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.set_write_timeout(d),
        }
    }

    /// Every key matching `glob` of type `ty`, on every master.
    pub(crate) fn scan(&mut self, glob: &str, ty: &str) -> redis::RedisResult<Vec<String>> {
        match self {
            Conn::One(c) => {
                let mut keys = Vec::new();
                let mut cursor = 0;
                loop {
                    let (next, mut batch): (u64, Vec<String>) =
                        scan_cmd(cursor, glob, ty).query(c)?;
                    keys.append(&mut batch);
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
                Ok(keys)
            }
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.scan(glob, ty),
        }
    }
}

/// One SCAN step: up to about 1000 keys matching `glob` of type `ty` from
/// `cursor` on.
pub(super) fn scan_cmd(cursor: u64, glob: &str, ty: &str) -> redis::Cmd {
    let mut c = redis::cmd("SCAN");
    c.arg(cursor)
        .arg("MATCH")
        .arg(glob)
        .arg("COUNT")
        .arg(1000)
        .arg("TYPE")
        .arg(ty);
    c
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_step() {
        let args: Vec<String> = scan_cmd(42, "rlock:*", "hash")
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            args,
            [
                "SCAN", "42", "MATCH", "rlock:*", "COUNT", "1000", "TYPE", "hash"
            ]
        );
    }
}
