//! The scripts (lua/), and the transport that runs them on a node.

use std::time::{Duration, Instant};

use redis::{FromRedisValue, Value};

use super::node::Node;
use super::types::backoff;
use crate::Result;
use crate::duration::millis;

/// One server-side operation: its Lua source as sent and its SHA1, both
/// made by build.rs (lua/common.lua goes in at a script's `--@common`
/// line: the fast path before it runs without the prelude's definitions,
/// whose dozen closures per call cost the server more than the fast path
/// itself).
pub(crate) struct Lua {
    pub(super) code: &'static str,
    pub(super) sha: &'static str,
}

impl Lua {
    pub(crate) fn sha(&self) -> &'static str {
        self.sha
    }
}

macro_rules! script {
    ($file:literal) => {
        Lua {
            code: include_str!(concat!(env!("OUT_DIR"), "/lua/", $file)),
            sha: env!(concat!("RLOCK_LUA_SHA_", $file)),
        }
    };
}

pub(super) static ACQUIRE: Lua = script!("acquire.lua");
pub(super) static RELEASE: Lua = script!("release.lua");
pub(super) static RENEW: Lua = script!("renew.lua");
pub(super) static STATUS: Lua = script!("status.lua");
pub(super) static CHECK: Lua = script!("check.lua");
pub(super) static WAIT: Lua = script!("wait.lua");
pub(super) static WAKE: Lua = script!("wake.lua");
pub(super) static HISTORY: Lua = script!("history.lua");
pub(super) static LOST: Lua = script!("lost.lua");
pub(super) static BREAK: Lua = script!("break.lua");
pub(super) static INDEX: Lua = script!("index.lua");
pub(super) static INDEX_DROP: Lua = script!("index_drop.lua");
pub(super) static OVERVIEW: Lua = script!("overview.lua");

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

impl Node {
    /// Run `script` with EVALSHA, or EVAL when the server lacks it (a
    /// restart, a failover, SCRIPT FLUSH). Done by hand rather than with
    /// redis-rs' Script, whose fallback SCRIPT LOAD goes to every node of a
    /// cluster and fails when any is down; EVAL goes to the key's node only.
    ///
    /// A failure that leaves it unknown whether the script ran, or that
    /// says it could not run yet, is followed by a resend of the very same
    /// call (same token, same request id) on a new connection, with
    /// backoff, for up to `resend_for`: the scripts are idempotent per
    /// request, so a resend never counts twice.
    pub(super) fn eval<T: FromRedisValue>(
        &mut self,
        script: &Lua,
        keys: &[String],
        args: &[&str],
        what: impl FnOnce() -> String,
        resend_for: Duration,
    ) -> Result<T> {
        let call = |verb: &str, body: &str| {
            let mut c = redis::cmd(verb);
            c.arg(body).arg(keys.len()).arg(keys).arg(args);
            c
        };
        let until = Instant::now() + resend_for.min(self.resend_cap);
        let (cluster, failover) = (self.server.is_cluster(), self.server.follows_failovers());
        // Sleep the next backoff and say to go on, if that stays in time.
        let pause = |tries: &mut u32| {
            let ok = Instant::now() + backoff(*tries + 1) < until;
            if ok {
                *tries += 1;
                std::thread::sleep(backoff(*tries));
            }
            ok
        };
        let mut tries = 0;
        self.resent = false;
        self.sent = false;
        self.silent = None;
        // An index touch to run right after this script (see
        // src/lock/node/index.rs): in the same pipeline on one server.
        let touch = self.then.take();
        let touch_sent = Instant::now();
        loop {
            match self.conn() {
                Ok(_) => {}
                // Reconnecting during an outage: keep trying. A first
                // connect fails at once.
                Err(_) if tries > 0 && pause(&mut tries) => continue,
                Err(e) => return Err(e),
            }
            self.sent = true;
            let conn = self.conn.as_mut().expect("just connected");
            let mut touched = None;
            let mut out_of_step = false;
            let mut res = match (&touch, &mut *conn) {
                (Some(t), crate::conn::Conn::One(c)) => with_touch(
                    c,
                    &call("EVALSHA", script.sha),
                    &t.cmd("EVALSHA"),
                    &mut touched,
                    &mut out_of_step,
                ),
                _ => call("EVALSHA", script.sha).query(conn),
            };

            if matches!(&res, Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
            {
                // The touch went in the pipeline before the script ran (and
                // was refused too, or ran first): send both again, the
                // script first, again in one write, so that they land
                // together even if this process is gone by the script's
                // reply (a RedLock master that answers last).
                res = match (&touch, &mut *conn) {
                    (Some(t), crate::conn::Conn::One(c)) if !out_of_step => with_touch(
                        c,
                        &call("EVAL", script.code),
                        &t.cmd("EVAL"),
                        &mut touched,
                        &mut out_of_step,
                    ),
                    _ => {
                        touched = None;
                        call("EVAL", script.code).query(conn)
                    }
                };
            }
            if out_of_step {
                // Never reuse it: its replies may be out of step.
                self.conn = None;
            }
            self.used();
            // Only a real answer counts: a replica's READONLY does not.
            self.answered |= res.is_ok();
            match res {
                Ok(v) => {
                    if let Some(t) = touch {
                        self.finish_touch(t, touch_sent, touched);
                    }
                    return Ok(v);
                }
                Err(e) if self.answered && resendable(&e, cluster, failover) => {
                    // Never reuse the connection: its replies may be out of
                    // step, and a cluster one has a stale slot map.
                    self.conn = None;
                    self.resent = true;
                    if !pause(&mut tries) {
                        return Err(self.fail(e, what()));
                    }
                }
                Err(e) => {
                    // The script refused (data rlock did not write, a bad
                    // request): nothing may be left written, and the touch
                    // pipelined behind it added an entry. Take it back.
                    if let (Some(t), Some(Value::Int(score))) = (&touch, &touched)
                        && !crate::error::is_unavailable(&e)
                    {
                        self.untouch(t, *score);
                    }
                    if e.is_timeout() {
                        // Kept for a give-back queued behind this call
                        // (see `Node::abandon_unanswered`).
                        self.silent = self.conn.take();
                    }
                    return Err(self.fail(e, what()));
                }
            }
        }
    }
}

/// `script`, then an index `touch`, in one write; the script's reply is
/// returned, the touch's put in `touched`. The touch's reply is read only
/// after a reply Redis made (an answer or an error reply): after anything
/// else (a timeout, a peer that is not Redis) it may never come, and
/// `out_of_step` says not to use the connection again.
fn with_touch<T: FromRedisValue>(
    c: &mut redis::Connection,
    script: &redis::Cmd,
    touch: &redis::Cmd,
    touched: &mut Option<Value>,
    out_of_step: &mut bool,
) -> redis::RedisResult<T> {
    let mut packed = script.get_packed_command();
    touch.write_packed_command(&mut packed);
    match c
        .send_packed_command(&packed)
        .and_then(|()| c.recv_response())
    {
        Ok(first) => {
            match c.recv_response() {
                Ok(v) => *touched = Some(v),
                Err(_) => *out_of_step = true,
            }
            first
                .extract_error()
                .and_then(|v| Ok(T::from_redis_value(v)?))
        }
        Err(e) => {
            *out_of_step = !e.is_timeout();
            Err(e)
        }
    }
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
            &LOST,
            &BREAK,
            &INDEX,
            &INDEX_DROP,
            &OVERVIEW,
        ] {
            assert_eq!(s.sha, redis::Script::new(s.code).get_hash());
        }
        // The prelude is in where a script asks for it, and only there.
        assert!(ACQUIRE.code.contains("local function tidy"));
        assert!(!ACQUIRE.code.lines().any(|l| l == "--@common"));
        assert!(!WAKE.code.contains("local function tidy"));
    }
}
