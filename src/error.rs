//! Typed errors of the library. The binary maps them to exit codes
//! (see [`crate::exit_code`]); nothing in the library prints or exits.

use std::time::{Duration, SystemTime};

use crate::msg;

mod message;

pub use message::{Message, Part, Setting};

/// Everything that can go wrong while taking, keeping or giving back a lock.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the caller: a flag, a key, a token, a URL.
    #[error("{0}")]
    Invalid(Message),

    /// Redis could not be reached, did not answer in time, or refused us
    /// (authentication, ACL, or a new lock while its memory is above
    /// `maxmemory`).
    #[error("{context}{}", cause_suffix(.cause))]
    Unavailable {
        /// What rlock was doing (`acquire "key"`, `connect to host:port`).
        context: Message,
        // Not a #[source]: redis' message already includes its own cause.
        /// What redis-rs reported; [`Error::replicas_short`] tells the
        /// shortfall of [`Setting::MinReplicas`] from an outage.
        cause: redis::RedisError,
        /// When Redis last answered, if a wait rode out an outage that
        /// then outlasted it (`context` says so).
        since: Option<SystemTime>,
    },

    /// Redis refused a command, or a command inside a script, because this
    /// user's ACL does not allow it (NOPERM): a permission the request
    /// needs is missing (the roles of docs/deployments.md). Nothing was
    /// changed: Redis checks a script call's keys before the script runs.
    #[error("{what} ({refused}){}", needs_suffix(.needs))]
    NoPermission {
        /// What was refused (`status "k" on Redis at h:1: refused by this
        /// Redis user's ACL`; for a break, [`crate::lock::breaking::MAY_NOT_BREAK`]).
        what: String,
        /// Redis' words: `NOPERM this user has no permissions to ...`.
        refused: String,
        /// What would allow it (the role a break needs), if rlock knows.
        needs: Option<String>,
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
    /// in a way this request cannot share.
    #[error("{0}")]
    Conflict(String),

    /// The lock is in use with another [`Setting::Limit`]; every holder
    /// must give the same.
    #[error("{}", other_limit(.key, *.held, *.asked))]
    OtherLimit {
        /// The lock's name.
        key: String,
        /// The limit its holders took it with.
        held: u32,
        /// The limit asked for.
        asked: u32,
    },

    /// The lock is in use as a read-write lock and was asked for as a
    /// semaphore, or the other way round: the two do not mix.
    #[error("{}", other_kind(.key, *.key_is_rw))]
    OtherKind {
        /// The lock's name.
        key: String,
        /// Whether it is in use as a read-write lock (else as a semaphore).
        key_is_rw: bool,
    },

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

    /// What answered is not Redis: its reply could not be parsed at all.
    #[error("{}", not_redis(.what))]
    NotRedis {
        /// What rlock was doing.
        what: String,
        /// What redis-rs reported.
        cause: redis::RedisError,
    },
}

impl Error {
    /// The error's one line, with each [`Setting`] named by `name` (Display
    /// uses [`Setting::name`]).
    pub fn render(&self, name: &dyn Fn(Setting) -> String) -> String {
        self.message().render(name)
    }

    /// The error's one line as a [`Message`].
    pub fn message(&self) -> Message {
        match self {
            Error::Invalid(m) => m.clone(),
            Error::Unavailable { context, cause, .. } => context.clone().and(cause_suffix(cause)),
            Error::OtherLimit { key, held, asked } => other_limit(key, *held, *asked),
            Error::OtherKind { key, key_is_rw } => other_kind(key, *key_is_rw),
            Error::NotRedis { what, .. } => not_redis(what),
            e => e.to_string().into(),
        }
    }

    /// A plain [`Error::Invalid`], naming no setting.
    pub fn invalid(text: impl Into<String>) -> Error {
        Error::Invalid(Message::from(text.into()))
    }

    /// An [`Error::Unavailable`] outside a wait's outage.
    pub(crate) fn unavailable(context: impl Into<Message>, cause: redis::RedisError) -> Error {
        Error::Unavailable {
            context: context.into(),
            cause,
            since: None,
        }
    }

    /// Whether it is the shortfall of [`Setting::MinReplicas`]: the write
    /// did not reach that many replicas in time (not an outage).
    pub fn replicas_short(&self) -> bool {
        matches!(self, Error::Unavailable { cause, .. } if cause.kind() == redis::ErrorKind::Client)
    }
}

fn other_limit(key: &str, held: u32, asked: u32) -> Message {
    msg![
        format!("lock {key:?} is in use with "),
        Setting::Limit,
        format!(" {held}, not {asked}; every holder must agree")
    ]
}

fn other_kind(key: &str, key_is_rw: bool) -> Message {
    let rw = || msg!["a read-write lock (", Setting::ReadWrite, ")"];
    let sem = || msg!["a semaphore (", Setting::Limit, " above 1)"];
    let (is, asked) = if key_is_rw {
        (rw(), sem())
    } else {
        (sem(), rw())
    };
    msg![format!("lock {key:?} is in use as ")]
        .and(is)
        .and("; it cannot be taken as ")
        .and(asked)
}

fn not_redis(what: &str) -> Message {
    msg![
        format!(
            "{what}: the server did not answer as Redis does (the URL may point at another \
             service's port; check "
        ),
        Setting::Urls,
        ")"
    ]
}

/// ": <what redis-rs reported>", except for a refusal at maxmemory, which
/// the context explains in full (Redis' own text names the script's SHA1
/// and line, and on Redis 6.2 nests the error in another).
fn cause_suffix(cause: &redis::RedisError) -> String {
    if is_oom(cause) {
        String::new()
    } else if cause.kind() == redis::ErrorKind::Client {
        // The one cause of rlock's making, [`too_few_replicas`]: its words
        // without redis-rs' " - Client".
        format!(": {TOO_FEW_REPLICAS}")
    } else {
        format!(": {cause}")
    }
}

/// The cause of [`Error::replicas_short`]: not an outage, nothing to ride
/// out or resend for.
pub(crate) fn too_few_replicas() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, TOO_FEW_REPLICAS))
}

const TOO_FEW_REPLICAS: &str = "too few replicas";

/// What a Redis at `maxmemory` refuses, and what it still does (see
/// lua/common.lua).
pub(crate) const OUT_OF_MEMORY: &str = "Redis is out of memory (used memory above its maxmemory): \
     it refuses new locks and waiters until memory is freed or maxmemory is raised; held locks \
     still renew and release";

fn needs_suffix(needs: &Option<String>) -> String {
    needs.as_ref().map(|n| format!(": {n}")).unwrap_or_default()
}

/// Whether the ACL refused the call: NOPERM, or a command inside a script
/// refused, which each server words its own way under code ERR: Redis 7.0
/// and 6.2 "The user executing the script can't run this command or
/// subcommand" (or "can't access at least one of the keys"; 6.2 inside
/// its "Error running script"), Valkey 8 "ACL failure in script: ..."
/// (as each of them answered a refused HLEN and key).
pub(crate) fn is_refused_by_acl(err: &redis::RedisError) -> bool {
    if code(err) == Some("NOPERM") {
        return true;
    }
    let detail = err.detail().unwrap_or_default();
    err.code() == Some("ERR")
        && (detail.contains("The user executing the script can't")
            || detail.starts_with("ACL failure in script"))
}

/// Redis' words for a refusal by the ACL ([`is_refused_by_acl`]), on one
/// line, as `NOPERM ...`, without the script error around them or the
/// script's SHA1 and line (`... script: <sha1>, on @user_script:12.`).
fn refusal_text(err: &redis::RedisError) -> String {
    let detail = err.detail().unwrap_or_default();
    let inner = if err.code() == Some("NOPERM") {
        detail
    } else if let Some((_, rest)) = detail.split_once(": -NOPERM") {
        rest
    } else if let Some(i) = detail.find("The user executing the script") {
        &detail[i..]
    } else if let Some((_, rest)) = detail.split_once("ACL failure in script: ") {
        rest
    } else {
        detail
    };
    let inner = inner.split(" script: ").next().unwrap_or_default();
    let inner = inner.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("NOPERM {}", inner.trim_end_matches('.'))
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
        if is_oom(&err) {
            return Error::unavailable(format!("{what}: {OUT_OF_MEMORY}"), err);
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
        if is_refused_by_acl(&err) {
            return Error::NoPermission {
                what: format!("{what}: refused by this Redis user's ACL"),
                refused: refusal_text(&err),
                needs: None,
            };
        }
        if code(&err) == Some("MOVED") {
            return Error::Invalid(msg![
                format!(
                    "{what}: the server is a Redis Cluster node and another node serves this \
                     key; give "
                ),
                Setting::Cluster
            ]);
        }
        // Only a Cluster node refuses a call's keys for their slots (the
        // acquire's index touch is in its call off a Cluster).
        if code(&err) == Some("CROSSSLOT") {
            return Error::Invalid(msg![
                format!("{what}: the server is a Redis Cluster node; give "),
                Setting::Cluster
            ]);
        }
        if wants_auth(&err) {
            return Error::unavailable(
                format!(
                    "{what}: the server requires a password: give it in RLOCK_PASSWORD, or in \
                     the URL as redis://[user]:PASSWORD@host:port"
                ),
                err,
            );
        }
        if is_unavailable(&err) {
            return Error::unavailable(what, err);
        }
        // The parser's, not a conversion's (the same kind): the bytes were
        // not RESP. redis-rs tells them apart only by its words.
        if err.kind() == redis::ErrorKind::Parse
            && err.detail().is_some_and(|d| d.starts_with("Parse error"))
        {
            return Error::NotRedis {
                what: what.to_string(),
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
    // Redis 6.2's ACL refusal of a command inside a script has no code of
    // its own: "ERR Error running script (...): @user_script:219:
    // @user_script: 219: The user executing the script can't run this
    // command or subcommand". Redis 7 and Valkey say NOPERM.
    if outer == "ERR"
        && let Some(detail) = err.detail()
        && detail.starts_with("Error running script")
        && detail.contains("The user executing the script can't run this command")
    {
        return Some("NOPERM");
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
        // An ACL refusal inside a script: no code on 6.2, NOPERM after.
        let acl = server_error(
            "ERR Error running script (call to f_4d27): @user_script:219: @user_script: 219: \
             The user executing the script can't run this command or subcommand",
        );
        assert_eq!(code(&acl), Some("NOPERM"));
        assert!(is_unavailable(&acl));
    }

    #[test]
    fn a_refusal_by_the_acl_is_no_permission_on_every_server() {
        // A script call's keys refused (Redis 7.0 and 6.2; Valkey 8 says
        // "No permissions to access a key"), and a command inside a script
        // refused: Redis 7.0, Valkey 8, Redis 6.2 (as seen on each).
        let keys =
            "NOPERM this user has no permissions to access one of the keys used as arguments";
        let inner7 = "ERR The user executing the script can't run this command or subcommand \
                      script: 1239783d90d636080ef69bd2f2516b79f0800aba, on @user_script:1.";
        let valkey = "ERR ACL failure in script: User j has no permissions to run the 'hlen' \
                      command script: 1239783d90d636080ef69bd2f2516b79f0800aba, on @user_script:1.";
        let inner6 = "ERR Error running script (call to f_fa5bb24550b00590be4c1531d78d915291e4a9dc): \
                      @user_script:1: @user_script: 1: The user executing the script can't \
                      access at least one of the keys mentioned in the command arguments";
        let want = [
            keys,
            "NOPERM The user executing the script can't run this command or subcommand",
            "NOPERM User j has no permissions to run the 'hlen' command",
            "NOPERM The user executing the script can't access at least one of the keys \
             mentioned in the command arguments",
        ];
        for (reply, want) in [keys, inner7, valkey, inner6].into_iter().zip(want) {
            let e = Error::from_redis(server_error(reply), "break \"k\" on Redis at h:1");
            let Error::NoPermission {
                what,
                refused,
                needs,
            } = &e
            else {
                panic!("{e:?}");
            };
            assert_eq!(
                what,
                "break \"k\" on Redis at h:1: refused by this Redis user's ACL"
            );
            assert_eq!(refused, want);
            assert!(needs.is_none());
        }
        let e = Error::NoPermission {
            what: "w".into(),
            refused: "NOPERM x".into(),
            needs: Some("n".into()),
        };
        assert_eq!(e.to_string(), "w (NOPERM x): n");
    }

    #[test]
    fn bytes_that_are_not_resp_are_not_redis_and_a_setting_keeps_its_place() {
        let html = redis::parse_redis_value(b"<!DOCTYPE HTML>\r\n").unwrap_err();
        let e = Error::from_redis(html, "acquire \"k\"");
        assert!(matches!(e, Error::NotRedis { .. }), "{e:?}");
        assert!(
            e.to_string().ends_with("check ConnectOptions::urls)"),
            "{e}"
        );
        let flag = |s: Setting| format!("<{s:?}>");
        assert!(e.render(&flag).ends_with("check <Urls>)"), "{e}");
        let short = Error::unavailable(msg!["w: ", Setting::MinReplicas], too_few_replicas());
        assert!(short.replicas_short());
        assert_eq!(short.render(&flag), "w: <MinReplicas>: too few replicas");
        let other = Error::unavailable("w", redis::RedisError::from((redis::ErrorKind::Io, "x")));
        assert!(!other.replicas_short());
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
