//! The scripts (lua/), their reply codes, and when a call may be resent
//! (the transport that sends them: `node/transport.rs`).

use std::time::Duration;

use crate::duration::millis;

/// One server-side operation: its Lua source as sent and its SHA1, both
/// made by build.rs (lua/common.lua goes in at a script's `--@common`
/// line: the fast path before it runs without the prelude's definitions,
/// whose dozen closures per call cost the server more than the fast path
/// itself).
pub(crate) struct Lua {
    pub(super) code: &'static str,
    pub(super) sha: &'static str,
    /// The script only reads: sent with EVALSHA_RO / EVAL_RO (Redis 7+,
    /// Valkey), which a user with read-only key access (`%R~`) may run and
    /// in which Redis refuses any write (`Node::eval`).
    pub(super) ro: bool,
}

impl Lua {
    pub(crate) fn sha(&self) -> &'static str {
        self.sha
    }
}

macro_rules! script {
    ($file:literal) => {
        script!($file, false)
    };
    ($file:literal, $ro:literal) => {
        Lua {
            code: include_str!(concat!(env!("OUT_DIR"), "/lua/", $file)),
            sha: env!(concat!("RLOCK_LUA_SHA_", $file)),
            ro: $ro,
        }
    };
}

pub(super) static ACQUIRE: Lua = script!("acquire.lua");
pub(super) static RELEASE: Lua = script!("release.lua");
pub(super) static RENEW: Lua = script!("renew.lua");
// The reads (`status`, `list`, `history`, `top`, `metrics`): read-only.
pub(super) static STATUS: Lua = script!("status.lua", true);
pub(super) static CHECK: Lua = script!("check.lua");
pub(super) static WAIT: Lua = script!("wait.lua");
pub(super) static WAKE: Lua = script!("wake.lua");
pub(super) static HISTORY: Lua = script!("history.lua", true);
pub(super) static SETTLE: Lua = script!("settle.lua");
pub(super) static LOST: Lua = script!("lost.lua");
pub(super) static BREAK: Lua = script!("break.lua");
pub(super) static INDEX: Lua = script!("index.lua");
pub(super) static INDEX_DROP: Lua = script!("index_drop.lua");
pub(super) static OVERVIEW: Lua = script!("overview.lua", true);
pub(super) static REDLOCK_WAIT: Lua = script!("redlock_wait.lua");

/// The scripts' reply codes, named as in lua/common.lua.
pub(super) mod reply {
    pub(crate) const GRANTED: i64 = 1;
    pub(crate) const BUSY: i64 = 0;
    /// The token holds nothing (released, expired, or never).
    pub(crate) const NOT_HELD: i64 = -1;
    /// An exclusive lock (or a writer) is held by another token.
    pub(crate) const OTHER_OWNER: i64 = -2;
    /// The lock is in use with another `--limit`.
    pub(crate) const OTHER_LIMIT: i64 = -3;
    /// The lock is in use as another kind (exclusive/semaphore vs rw).
    pub(crate) const OTHER_KIND: i64 = -4;
    /// A reader asked to re-enter as a writer.
    pub(crate) const NO_UPGRADE: i64 = -5;
    /// A newer `--supersede` waiter replaced this one.
    pub(crate) const SUPERSEDED: i64 = -6;
    /// The token's hold was broken (`rlock break`): a release's reply
    /// then carries the break notice.
    pub(crate) const BROKEN: i64 = -7;
}

/// How long a script call is sent again after a failure that leaves it
/// unknown whether it ran (a timeout, a dropped connection) or that says it
/// did not run yet (a refused connection, a cluster redirect, TRYAGAIN,
/// CLUSTERDOWN, LOADING, READONLY after a failover). Every script is
/// idempotent per request (see lua/acquire.lua, "Resends"), so sending
/// again is safe; the request records outlive this window (see `record_ms`).
pub const RESEND_WINDOW: Duration = Duration::from_secs(5);
/// May a call that failed this way be sent again? Yes if it may not have
/// run, or ran with its reply lost; no for refusals and bad data. READONLY
/// and MASTERDOWN pass with a failover only where a new connection follows
/// it (`failover`: Sentinel, Cluster); to one URL they mean a replica was
/// named, which no resend fixes.
pub(crate) fn resendable(err: &redis::RedisError, cluster: bool, failover: bool) -> bool {
    if err.is_io_error()
        || err.is_timeout()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
    {
        return true;
    }
    match crate::error::code(err) {
        Some("TRYAGAIN" | "CLUSTERDOWN" | "LOADING") => true,
        Some("MASTERDOWN" | "READONLY") => failover,
        Some("MOVED" | "ASK") => cluster,
        _ => false,
    }
}

/// How long a request's record (lua/acquire.lua, "Resends") must outlive
/// its first send: longer than any resend of it can come, connect
/// included.
pub(super) fn record_ms(timeout: Duration) -> String {
    millis((RESEND_WINDOW + timeout) * 2).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_rs_hashes_each_script_as_sent() {
        for s in [
            &ACQUIRE,
            &RELEASE,
            &RENEW,
            &STATUS,
            &CHECK,
            &WAIT,
            &WAKE,
            &HISTORY,
            &SETTLE,
            &LOST,
            &BREAK,
            &INDEX,
            &INDEX_DROP,
            &OVERVIEW,
            &REDLOCK_WAIT,
        ] {
            assert_eq!(s.sha, redis::Script::new(s.code).get_hash());
        }
        // The prelude is in where a script asks for it, and only there.
        assert!(ACQUIRE.code.contains("local function tidy"));
        assert!(!ACQUIRE.code.lines().any(|l| l == "--@common"));
        assert!(!WAKE.code.contains("local function tidy"));
    }

    /// The commands a script's code runs (`call('X'`, `pcall('X'`),
    /// upper case, each once.
    fn commands(code: &str) -> Vec<String> {
        let mut out: Vec<String> = code
            .split("call('")
            .skip(1)
            .map(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_alphabetic)
                    .collect::<String>()
                    .to_uppercase()
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// What Redis lets a read-only script (EVALSHA_RO) and a monitor user
    /// run: the reads docs/deployments.md's monitor ACL line allows.
    const READS: &[&str] = &[
        "EXISTS",
        "GET",
        "HGET",
        "HGETALL",
        "HMGET",
        "LRANGE",
        "PTTL",
        "TIME",
        "TYPE",
        "ZCOUNT",
        "ZRANGE",
        "ZRANGEBYSCORE",
        "ZSCORE",
    ];

    /// The body of `local function name` in lua/common.lua.
    fn prelude_fn(name: &str) -> &'static str {
        let common = include_str!("../../lua/common.lua");
        let start = common
            .find(&format!("local function {name}("))
            .unwrap_or_else(|| panic!("{name} in lua/common.lua"));
        let len = common[start..].find("\nend\n").expect("its end");
        &common[start..start + len]
    }

    /// A read-only script (sent with EVALSHA_RO: Redis refuses its writes,
    /// and a monitor user may run it) runs reads only: its own code, and
    /// the prelude's functions it calls, which are these and no writer.
    #[test]
    fn read_only_scripts_call_only_reads() {
        let own = [
            include_str!("../../lua/status.lua"),
            include_str!("../../lua/history.lua"),
            include_str!("../../lua/overview.lua"),
        ];
        let readers = ["lock_kind", "no_ttl", "not_ours", "open_entries"];
        let writers = [
            "prune",
            "settle",
            "tidy",
            "log_event",
            "forget_holder",
            "leave_queue",
            "clear_remains",
            "forget_remains",
            "writes_at_maxmemory",
            "refuse_at_maxmemory",
            "to_wake",
            "check_types",
            "gone_grants",
        ];
        for code in own {
            // (Comments name the writers a script stands in for.)
            let code: String = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            for c in commands(&code) {
                assert!(READS.contains(&c.as_str()), "{c} in a read-only script");
            }
            for w in writers {
                assert!(
                    !code.contains(&format!("{w}(")),
                    "a read-only script calls {w}"
                );
            }
        }
        for f in readers {
            for c in commands(prelude_fn(f)) {
                assert!(READS.contains(&c.as_str()), "{c} in {f} (lua/common.lua)");
            }
        }
        assert!(STATUS.ro && HISTORY.ro && OVERVIEW.ro);
        // The writers are not sent read-only.
        for s in [
            &ACQUIRE,
            &RELEASE,
            &RENEW,
            &SETTLE,
            &INDEX_DROP,
            &BREAK,
            &REDLOCK_WAIT,
        ] {
            assert!(!s.ro);
        }
    }
}
