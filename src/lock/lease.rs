//! What a grant gives: the lease and how long it is safe to rely on,
//! renewing and waiting on time (heartbeats, backoff, drift), and what a
//! check or release of it answers.

use std::time::Duration;

use serde::Serialize;

use super::request::Token;
use crate::Error;
use crate::clock::BootTime;

/// A waiter checks in with Redis at least this often, even if nothing
/// wakes it: one blocking pop and one heartbeat script (lua/wait.lua) per
/// period, 7 server commands counted (the script's 5 included), so an idle
/// waiter costs the server about 1.4 commands and 0.4 requests a second.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A queued waiter that has not checked in for this long is presumed dead
/// and dropped from the queue (server clock; the TTL if shorter). A dead
/// waiter does not hold up the queue that long once the lock is free: the
/// waiter woken to take it has a claim of 800 ms (see `to_wake` in
/// lua/common.lua), after which the one behind it goes ahead.
pub const WAITER_LEASE: Duration = Duration::from_secs(15);

/// A granted lock.
#[derive(Clone, Debug)]
pub struct Lease {
    /// The lock's name.
    pub key: String,
    /// The owner token: release, renew and check with it.
    pub token: Token,
    /// Fencing value: strictly increases with every grant of this lock.
    pub fence: u64,
    /// Re-entry depth after this grant (1 for a fresh grant).
    pub count: u64,
    /// The lease's TTL, as granted.
    pub ttl: Duration,
    /// The lease is safe to rely on until this point (CLOCK_BOOTTIME, which
    /// keeps counting through a suspend): request sent + TTL − drift.
    pub valid_until: BootTime,
}

impl Lease {
    /// The lease a grant of `key` to `token` gives, at `fence` and re-entry
    /// depth `count`, for a request of `ttl` sent at `sent`: safe to rely
    /// on until [`valid_until`]`(sent, ttl)`.
    pub(crate) fn granted(
        key: &str,
        token: Token,
        fence: u64,
        count: u64,
        ttl: Duration,
        sent: BootTime,
    ) -> Lease {
        Lease {
            key: key.to_string(),
            token,
            fence,
            count,
            ttl,
            valid_until: valid_until(sent, ttl),
        }
    }
}

/// How long a waiter for a lease of `ttl` keeps its place in the queue
/// without checking in.
pub fn waiter_lease(ttl: Duration) -> Duration {
    WAITER_LEASE.min(ttl)
}

/// How often a waiter checks in: well within its waiter lease.
pub fn heartbeat(ttl: Duration) -> Duration {
    HEARTBEAT.min(waiter_lease(ttl) * 2 / 5)
}

/// 100 ms, 200 ms, ... up to 800 ms.
pub(crate) fn backoff(failures: u32) -> Duration {
    Duration::from_millis(50 << failures.clamp(1, 4))
}

/// Until when a lease of `ttl` asked for at `sent` is safe to rely on:
/// sent + TTL − drift, on CLOCK_BOOTTIME (see [`crate::clock`]).
pub fn valid_until(sent: BootTime, ttl: Duration) -> BootTime {
    sent + ttl.saturating_sub(drift(ttl))
}

/// Why a held lock is lost, as a renewal finds it: the words exec and the
/// keeper both report.
pub(crate) const LOST_GONE: &str = "it expired or was deleted";
/// See [`LOST_GONE`].
pub(crate) const LOST_TAKEN: &str = "another owner holds it now";

/// When a holder renews a lease of `ttl` (exec's renewer, the keeper):
/// every TTL/3, the first TTL/3 after the grant's request (as `valid_until`
/// counts, from the lease's validity deadline), and `retry` after a
/// renewal that failed without saying the lock is gone.
pub(crate) struct RenewalSchedule {
    /// Between confirmed renewals.
    pub every: Duration,
    /// After a failed one.
    pub retry: Duration,
    /// The first renewal.
    pub first: BootTime,
}

impl RenewalSchedule {
    pub(crate) fn new(valid: BootTime, ttl: Duration) -> RenewalSchedule {
        let every = ttl / 3;
        let sent = valid - ttl.saturating_sub(drift(ttl));
        RenewalSchedule {
            every,
            retry: (every / 4).clamp(Duration::from_millis(20), Duration::from_millis(500)),
            first: sent + every,
        }
    }
}

/// A grant whose reply came after its lease's validity deadline, `took`
/// after the request was sent.
pub(super) fn late_grant(key: &str, took: Duration, ttl: Duration) -> Error {
    let show =
        |d: Duration| humantime::format_duration(Duration::from_millis(crate::duration::millis(d)));
    Error::unavailable(
        format!(
            "acquire {key:?}: the grant arrived after its lease had expired \
             (Redis answered in {}, TTL {})",
            show(took),
            show(ttl)
        ),
        redis::RedisError::from((redis::ErrorKind::Io, "stale grant")),
    )
}

/// Clock drift allowance for a lease of `ttl` (as in the RedLock paper:
/// 1% plus 2 ms for timer granularity).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// A token's hold, as `check` sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Held {
    /// Lease time left, by the server's clock.
    #[serde(rename = "ttl_ms", serialize_with = "as_ms")]
    pub ttl: Duration,
    /// The fencing value of the hold.
    pub fence: u64,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(crate::duration::millis(*d))
}

/// What a release did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// The lock is free (for this token).
    Released,
    /// Re-entered holds remain; the lock is still held.
    StillHeld(u64),
    /// Nobody held it: already released, or expired. Harmless.
    NotHeld,
}

#[cfg(test)]
mod tests;
