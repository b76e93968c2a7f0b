//! One Redis server and a connection to it, with the lock operations. One
//! file per job:
//! - here: the [`Node`] itself and its connection (connecting, reuse after
//!   idling, what a failure does to it), and what several operations share:
//!   the server's identity, the replica WAIT, waking waiters;
//! - `acquire`: one run of the acquire script ([`Node::attempt`], RedLock's
//!   building block too) and the single-Redis acquire around it: re-entry,
//!   late grants, riding out an outage, waiting for a busy lock;
//! - `ops`: giving holds back (release, the give-backs after a failed or
//!   abandoned acquire) and [`Backend`] for one server: renew, check,
//!   status, list.
//!
//! [`Backend`]: super::backend::Backend

mod acquire;
mod index;
mod ops;
mod transport;

pub(super) use index::call_groups;
pub(super) use transport::retry_alone;

use std::time::{Duration, Instant};

use redis::{FromRedisValue, Value};

use super::HistoryLimits;
use super::decode;
use super::keys::{LockName, WAKE_TTL_MS};
use super::script::*;
use crate::conn::{Conn, Server};
use crate::duration::{human, millis};
use crate::error::Setting;
use crate::{Busy, Error, Request, Result, Token, msg};

/// The signal a scout gets on its wake-up list (lua/wake.lua): the waiter
/// ahead of it was woken to take the lock and has a claim of [`CLAIM`]; look
/// again once that ends.
pub(super) const SCOUT: &str = "s";

/// How long a waiter woken to take the lock has to claim it: `CLAIM_MS` in
/// lua/common.lua.
pub(super) const CLAIM: Duration = Duration::from_millis(800);

// One per reply, moved out at once: boxing `Busy` (larger since holder
// info has `set`) would cost an allocation per busy reply for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Outcome {
    Granted {
        fence: u64,
        count: u64,
    },
    /// Busy, the lock's fencing counter on that server, and the first
    /// holder's fingerprint (see lua/wait.lua; "" when nobody holds it).
    Busy(Busy, u64, String),
    NotHeld,
}

/// One run of the acquire script, as asked (see [`Node::attempt`]).
pub(crate) struct Attempt<'a> {
    pub(crate) lock: &'a LockName,
    pub(crate) token: &'a Token,
    pub(crate) req: &'a Request,
    /// Join the wait queue if the lock is busy.
    pub(crate) queue: bool,
    /// Only add a hold to one `token` has: never a new grant.
    pub(crate) reenter_only: bool,
    /// A new grant's fence is at least this + 1 (RedLock; 0 for one Redis).
    pub(crate) floor: u64,
    /// Resend no later than this (a wait's deadline).
    pub(crate) until: Option<Instant>,
    /// This token has called before (it may have queued; see
    /// `--supersede`).
    pub(crate) later: bool,
    /// How long the acquire has waited so far, for the history.
    pub(crate) waited: Duration,
}

impl<'a> Attempt<'a> {
    /// A single non-queueing attempt for a new grant (or, with
    /// `reenter_only` set after, a re-entry) of `lock` with `token`.
    pub(crate) fn new(lock: &'a LockName, token: &'a Token, req: &'a Request) -> Attempt<'a> {
        Attempt {
            lock,
            token,
            req,
            queue: false,
            reenter_only: false,
            floor: 0,
            until: None,
            later: false,
            waited: Duration::ZERO,
        }
    }
}

/// At most this many grants' hints are kept per node (see [`Hints`]): a
/// holder that never releases through this node (its lease ran out, or
/// another locker released it) costs at most this many entries.
const MAX_HINTS: usize = 16;

/// The waiters each grant of this node named next in line
/// (lua/acquire.lua, "Next in line"), per lock and token, until its last
/// hold is released: that release declares their wake-up lists, so that
/// the script wakes them itself (lua/release.lua). Only hints: a missing
/// or stale one costs a `lua/wake.lua` call, never a wrong grant.
#[derive(Default)]
pub(super) struct Hints(Vec<(String, String, decode::NextInLine)>);

impl Hints {
    /// Keep `hint` for `token`'s grant of `lock` (the oldest goes past
    /// [`MAX_HINTS`]).
    fn keep(&mut self, lock: &LockName, token: &Token, hint: decode::NextInLine) {
        self.take(lock, token);
        if self.0.len() >= MAX_HINTS {
            self.0.remove(0);
        }
        let key = lock.redis_key().to_string();
        self.0.push((key, token.as_str().to_string(), hint));
    }

    /// The hint kept for `token`'s grant of `lock`, no longer kept.
    pub(super) fn take(&mut self, lock: &LockName, token: &Token) -> Option<decode::NextInLine> {
        let at = self
            .0
            .iter()
            .position(|(k, t, _)| k == lock.redis_key() && t == token.as_str())?;
        Some(self.0.remove(at).2)
    }
}

/// One Redis server and a connection to it, with the lock operations.
pub(crate) struct Node {
    pub(super) server: Server,
    pub(super) conn: Option<Conn>,
    pub(super) last_used: Instant,
    pub(super) prefix: String,
    /// Upper bound on any call's resend window.
    pub(super) resend_cap: Duration,
    /// The server has answered this process before: only then is a failure
    /// an outage worth riding out (a wrong or silent address fails at once).
    pub(super) answered: bool,
    /// An index touch to send right after the next script call (see
    /// `index.rs`).
    pub(super) then: Option<index::Touch>,
    /// When this process last touched each lock's index entry.
    pub(super) touched: index::Touched,
    /// The hints of the grants made here, for their releases.
    pub(super) hints: Hints,
    /// How much history the scripts keep per lock (ARGV of each).
    pub(super) history: HistoryLimits,
    /// The server on this connection does not know EVALSHA_RO (Redis
    /// 6.2), or the user may not run it: read-only scripts go with EVALSHA
    /// (see [`Node::verbs`]).
    pub(super) no_ro: bool,
    /// Redis refused this user a write (NOPERM: a monitor user): the
    /// optional writes of the reads (a history read's settling, `list`'s
    /// clean-up of the index) are not tried again.
    pub(super) read_only: bool,
}

impl Node {
    /// A node for `server`; it connects on first use.
    pub(crate) fn new(server: Server, prefix: &str) -> Node {
        Node {
            server,
            conn: None,
            last_used: Instant::now(),
            prefix: prefix.to_string(),
            resend_cap: RESEND_WINDOW,
            answered: false,
            then: None,
            touched: index::Touched::default(),
            hints: Hints::default(),
            history: HistoryLimits::default(),
            no_ro: false,
            read_only: false,
        }
    }

    /// Send each call once, never again after a failure: for RedLock, whose
    /// masters each get one short attempt and whose retries are its own.
    pub(crate) fn without_resends(mut self) -> Node {
        self.resend_cap = Duration::ZERO;
        self
    }

    /// The server's `run_id` (INFO server): two URLs that reach one server
    /// give the same. `None` when the server does not say (an ACL without
    /// +info, a server that is no redis-server).
    pub(crate) fn run_id(&mut self) -> Result<Option<String>> {
        let res: redis::RedisResult<String> = redis::cmd("INFO").arg("server").query(self.conn()?);
        self.used();
        match res {
            Ok(info) => Ok(info
                .lines()
                .find_map(|l| l.strip_prefix("run_id:"))
                .map(|id| id.trim().to_string())
                .filter(|id| !id.is_empty())),
            Err(e)
                if crate::error::code(&e) == Some("NOPERM")
                    || !crate::error::is_unavailable(&e) =>
            {
                Ok(None)
            }
            Err(e) => Err(self.fail(e, "INFO server".into())),
        }
    }

    /// Note a write Redis refused this user (NOPERM), so that the reads'
    /// optional writes are not tried again (`read_only`).
    pub(super) fn note_refused<T>(&mut self, res: &Result<T>) {
        if let Err(Error::NoPermission { .. }) = res {
            self.read_only = true;
        }
    }

    /// WAIT until `min_replicas` replicas have every write this connection
    /// made (the grant or renewal just done), within 4/5 of the timeout.
    /// WAIT is not consensus: it says the replicas received the write, not
    /// that a failover will promote one of them, nor that they keep it.
    fn wait_replicas(&mut self, what: &str, write: &str) -> Result<()> {
        let want = self.server.min_replicas;
        let within = self.server.timeout * 4 / 5;
        let res: redis::RedisResult<i64> = redis::cmd("WAIT")
            .arg(want)
            .arg(millis(within))
            .query(self.conn()?);
        self.used();
        let acked = res.map_err(|e| self.fail(e, format!("{what}: WAIT")))?;
        if acked >= i64::from(want) {
            return Ok(());
        }
        Err(Error::unavailable(
            msg![
                format!("{what}: the {write} reached {acked} of the {want} replicas "),
                Setting::MinReplicas,
                format!(" asks for within {}", human(within))
            ],
            crate::error::too_few_replicas(),
        ))
    }

    /// Wake the waiters a script named (see lua/common.lua): push to each
    /// one's wake-up list, in one round trip (lua/wake.lua, so that every
    /// key is declared and a cluster routes it). Best effort, sent once: a
    /// waiter that is not woken finds out at its next heartbeat. A token
    /// named `~<token>` is a scout's (see `to_wake` in lua/common.lua): it
    /// gets the signal [`SCOUT`], not a wake-up. A grant's hints
    /// (`^<token>`, lua/acquire.lua "Next in line") are not tokens to wake.
    fn wake(&mut self, lock: &LockName, tokens: &[Value]) {
        let mut keys = Vec::with_capacity(tokens.len());
        let mut args = vec![WAKE_TTL_MS.to_string()];
        for t in tokens {
            let Ok(t) = String::from_redis_value(t.clone()) else {
                continue;
            };
            if decode::is_hint(&t) {
                continue;
            }
            let (t, signal) = match t.strip_prefix('~') {
                Some(scout) => (scout, SCOUT),
                None => (&*t, "1"),
            };
            keys.push(lock.wake_key_of(t));
            args.push(signal.to_string());
        }
        if !keys.is_empty() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let _: Result<i64> = self.eval(
                &WAKE,
                &keys,
                &args,
                || format!("wake the waiters for {:?}", lock.name()),
                Duration::ZERO,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CLAIM;

    #[test]
    fn the_claim_is_the_scripts() {
        let common = include_str!("../../../lua/common.lua");
        let want = format!("local CLAIM_MS = {}\n", CLAIM.as_millis());
        assert!(common.contains(&want), "lua/common.lua lacks {want:?}");
    }
}
