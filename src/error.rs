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
    /// (authentication, ACL, or a new lock while its memory is above
    /// `maxmemory`).
    #[error("{context}{}", cause_suffix(.cause))]
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

/// ": <what redis-rs reported>", except for a refusal at maxmemory, which
/// the context explains in full (Redis' own text names the script's SHA1
/// and line, and on Redis 6.2 nests the error in another).
fn cause_suffix(cause: &redis::RedisError) -> String {
    if is_oom(cause) {
        String::new()
    } else {
        format!(": {cause}")
    }
}

/// What a Redis at `maxmemory` refuses, and what it still does (see
/// lua/common.lua).
pub(crate) const OUT_OF_MEMORY: &str = "Redis is out of memory (used memory above its maxmemory): \
     it refuses new locks and waiters until memory is freed or maxmemory is raised; held locks \
     still renew and release";

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
        if is_oom(&err) {
            return Error::Unavailable {
                context: format!("{what}: {OUT_OF_MEMORY}"),
                cause: err,
            };
        }
        if text.contains("WRONGTYPE")
            || text.contains("not an integer")
            || text.contains("NOTRLOCK")
        {
            return Error::Conflict(format!(
                "{what}: a key of this lock holds a value that is not an rlock lock \
                 (someone else wrote there; pick another key or prefix)"
            ));
        }
        if code(&err) == Some("MOVED") {
            return Error::Usage(format!(
                "{what}: the server is a Redis Cluster node and another node serves this key; \
                 connect with ConnectOptions::cluster"
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
            code(err),
            Some("NOAUTH" | "WRONGPASS" | "NOPERM" | "LOADING" | "MASTERDOWN" | "READONLY")
        )
        || wants_auth(err)
}

/// Redis refused a write because its used memory is above `maxmemory`:
/// "OOM command not allowed when used memory > 'maxmemory'".
pub(crate) fn is_oom(err: &redis::RedisError) -> bool {
    code(err) == Some("OOM")
}

/// The code of a server's error reply (`READONLY`, `OOM`, `NOPERM`...),
/// also when a command inside a script failed: Redis 7 and Valkey pass
/// that command's code on, but Redis 6.2 wraps it in a script error of its
/// own, `ERR Error running script (call to f_<sha1>): @user_script:12:
/// @user_script: 12: -READONLY You can't write...`, whose code is ERR.
/// Without this, a replica's READONLY or a full Redis' OOM inside a script
/// was an "unexpected reply" (exit 70) on Redis 6.2 alone.
pub(crate) fn code(err: &redis::RedisError) -> Option<&str> {
    let outer = err.code()?;
    if outer == "ERR"
        && let Some(detail) = err.detail()
        && detail.starts_with("Error running script")
        && let Some((_, inner)) = detail.split_once(": -")
    {
        return inner.split_whitespace().next().or(Some(outer));
    }
    Some(outer)
}

/// The server wants a password and none was given: NOAUTH, or, for a
/// command with many arguments (every script call), Redis 7's "Protocol
/// error: unauthenticated multibulk length", which it sends instead of
/// NOAUTH before it closes the connection. Without this the script calls
/// failed as an "unexpected reply" (exit 70) instead of a refusal (69).
pub(crate) fn wants_auth(err: &redis::RedisError) -> bool {
    code(err) == Some("NOAUTH") || err.to_string().contains("Protocol error: unauthenticated")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's error reply, as redis-rs hands it over.
    fn server_error(reply: &str) -> redis::RedisError {
        let v = redis::parse_redis_value(format!("-{reply}\r\n").as_bytes()).unwrap();
        v.extract_error().unwrap_err()
    }

    #[test]
    fn a_refusal_at_maxmemory_reads_the_same_on_every_server() {
        // Redis 7.0 and Valkey 8 (code OOM), and Redis 6.2, which nests it
        // in a script error (code ERR); as seen in tests/integration/oom.rs.
        let seven = "OOM command not allowed when used memory > 'maxmemory'. script: \
                     ff43b13a1533cd1ba173cf0d44368a16cf2b1790, on @user_script:109.";
        let six = "ERR Error running script (call to f_ff43b13a1533cd1ba173cf0d44368a16cf2b1790): \
                   @user_script:109: @user_script: 109: -OOM command not allowed when used \
                   memory > 'maxmemory'.";
        for reply in [seven, six] {
            let e = Error::from_redis(server_error(reply), "acquire \"k\" on Redis at h:1");
            assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
            assert_eq!(
                e.to_string(),
                format!("acquire \"k\" on Redis at h:1: {OUT_OF_MEMORY}")
            );
            assert!(!e.to_string().contains("script"), "{e}");
        }
        let other = Error::from_redis(server_error("ERR something else"), "x");
        assert!(matches!(other, Error::Protocol(_)));
    }

    #[test]
    fn a_command_failing_inside_a_script_gives_its_own_code_on_redis_6_2() {
        let six = "ERR Error running script (call to f_eadaf7f31be273a4a8ca91dff22b5c76e1cc881f): \
                   @user_script:111: @user_script: 111: -READONLY You can't write against a \
                   read only replica.";
        let e = server_error(six);
        assert_eq!(e.code(), Some("ERR"));
        assert_eq!(code(&e), Some("READONLY"));
        assert!(is_unavailable(&e));
        let seven = server_error("READONLY You can't write against a read only replica. script: x");
        assert_eq!(code(&seven), Some("READONLY"));
        // A script error of the script's own making keeps ERR.
        let own = server_error("ERR Error running script (call to f_x): @user_script:3: boom");
        assert_eq!(code(&own), Some("ERR"));
    }

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
