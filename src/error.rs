//! Typed errors of the library. The binary maps them to exit codes
//! (see [`crate::exit_code`]); nothing in the library prints or exits.

use std::time::Duration;

/// Everything that can go wrong while taking, keeping or giving back a lock.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the caller: a flag, a key, a token, a URL.
    #[error("{0}")]
    Usage(String),

    /// Redis could not be reached, did not answer in time, or refused us
    /// (authentication, ACL).
    #[error("{context}: {cause}")]
    Unavailable {
        /// What rlock was doing (`acquire "key"`, `connect to host:port`).
        context: String,
        // Not a #[source]: redis' message already includes its own cause.
        /// What redis-rs reported.
        cause: redis::RedisError,
    },

    /// The lock is held and the caller asked not to wait.
    #[error("lock {key:?} is busy{}", holder_suffix(.holder))]
    Busy {
        /// The lock's name.
        key: String,
        /// Who holds it, if known.
        holder: Option<String>,
    },

    /// Waiting for the lock took longer than the caller allowed.
    #[error("timed out after {} waiting for lock {key:?}{}", crate::duration::human(*.waited), holder_suffix(.holder))]
    Timeout {
        /// The lock's name.
        key: String,
        /// How long the acquire waited.
        waited: Duration,
        /// Who held the lock last, if known.
        holder: Option<String>,
    },

    /// The token given does not own the lock (someone else holds it).
    #[error("token does not own lock {key:?}: it is held by another owner")]
    NotOwner {
        /// The lock's name.
        key: String,
    },

    /// The lock is gone: it expired or was deleted while we thought we held it.
    #[error("lock {key:?} was lost: {why}")]
    Lost {
        /// The lock's name.
        key: String,
        /// What was seen.
        why: String,
    },

    /// The Redis key exists but is not an rlock lock, or the lock is in use
    /// in an incompatible way (another --limit).
    #[error("{0}")]
    Conflict(String),

    /// `--supersede`: a newer waiter of the same lock that also asked to
    /// supersede replaced this one in the queue; nothing is held.
    #[error("superseded by {by}: a newer --supersede waiter for lock {key:?}; nothing is held")]
    Superseded {
        /// The lock's name.
        key: String,
        /// The newer waiter (`host H pid P`).
        by: String,
    },

    /// A signal stopped us while waiting; nothing is held.
    #[error("interrupted by signal {0} while waiting; nothing is held")]
    Interrupted(i32),

    /// exec: the command could not be started (exit 127 or 126).
    #[error("cannot run {program:?}")]
    Spawn {
        /// The command as given.
        program: String,
        #[source]
        /// Why it could not be started.
        source: std::io::Error,
        /// The exit code to report, as a shell would: 127 (not found) or 126.
        code: u8,
    },

    /// Redis answered something we do not understand.
    #[error("unexpected reply from Redis: {0}")]
    Protocol(String),
}

fn holder_suffix(holder: &Option<String>) -> String {
    holder
        .as_ref()
        .map(|h| format!(" (held by {h})"))
        .unwrap_or_default()
}

/// A result with rlock's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Classify an error from a Redis command on key `key`.
    pub(crate) fn from_redis(err: redis::RedisError, what: &str) -> Self {
        let text = err.to_string();
        if text.contains("WRONGTYPE")
            || text.contains("not an integer")
            || text.contains("NOTRLOCK")
        {
            return Error::Conflict(format!(
                "{what}: a key of this lock holds a value that is not an rlock lock \
                 (someone else wrote there; pick another key or --prefix)"
            ));
        }
        if err.code() == Some("MOVED") {
            return Error::Usage(format!(
                "{what}: the server is a Redis Cluster node and another node serves this key; \
                 give --cluster (RLOCK_CLUSTER=1)"
            ));
        }
        if wants_auth(&err) {
            return Error::Unavailable {
                context: format!(
                    "{what}: the server requires a password: give it in RLOCK_PASSWORD, or in \
                     the URL as redis://[user]:PASSWORD@host:port"
                ),
                cause: err,
            };
        }
        if is_unavailable(&err) {
            return Error::Unavailable {
                context: what.to_string(),
                cause: err,
            };
        }
        Error::Protocol(format!("{what}: {err}"))
    }
}

/// `err`, said plainly if it is a timeout: redis-rs reports a reply that
/// did not come in time as the socket's "Resource temporarily unavailable
/// (os error 11)", which names neither the server nor the wait. A timeout
/// becomes "Redis at LABEL did not answer within TIMEOUT" (still a timeout
/// to `is_timeout`); anything else is returned as it is.
pub(crate) fn no_answer(
    err: redis::RedisError,
    label: &str,
    timeout: Duration,
) -> redis::RedisError {
    if !err.is_timeout() {
        return err;
    }
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "Redis at {label} did not answer within {}",
            crate::duration::human(timeout)
        ),
    )
    .into()
}

/// Connection trouble, timeouts and refusals (auth, ACL) all mean
/// "Redis is not usable for us right now".
pub(crate) fn is_unavailable(err: &redis::RedisError) -> bool {
    use redis::ErrorKind;
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || matches!(
            err.kind(),
            ErrorKind::AuthenticationFailed | ErrorKind::Io | ErrorKind::InvalidClientConfig
        )
        || matches!(
            err.code(),
            Some("NOAUTH" | "WRONGPASS" | "NOPERM" | "LOADING" | "MASTERDOWN" | "READONLY")
        )
        || wants_auth(err)
}

/// The server wants a password and none was given: NOAUTH, or, for a
/// command with many arguments (every script call), Redis 7's "Protocol
/// error: unauthenticated multibulk length", which it sends instead of
/// NOAUTH before it closes the connection. Without this the script calls
/// failed as an "unexpected reply" (exit 70) instead of a refusal (69).
pub(crate) fn wants_auth(err: &redis::RedisError) -> bool {
    err.code() == Some("NOAUTH") || err.to_string().contains("Protocol error: unauthenticated")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_reads_like_a_person_wrote_it() {
        let e = Error::Timeout {
            key: "k".into(),
            waited: Duration::from_nanos(6_666_666_667),
            holder: Some("host h pid 1".into()),
        };
        assert_eq!(
            e.to_string(),
            "timed out after 6.7s waiting for lock \"k\" (held by host h pid 1)"
        );
    }
}
