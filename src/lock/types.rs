//! The public types: tokens, requests, leases, status, and their bounds.

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::clock::BootTime;
use crate::duration::human;
use crate::{Error, Result};

mod history;
mod holder;

pub use history::*;
pub use holder::*;

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
/// Shortest lease TTL accepted.
pub const MIN_TTL: Duration = Duration::from_millis(50);
/// Longest lease TTL accepted.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Highest [`Request::priority`]; the lowest is its negative.
pub const MAX_PRIORITY: i32 = 1000;
/// An owner token: a UUIDv4, 122 random bits. Its Debug output hides it so
/// it cannot end up in logs by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh random token.
    pub fn generate() -> Token {
        Token(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    /// Parse a token given by a user (flag or RLOCK_TOKEN).
    pub fn parse(s: &str) -> Result<Token> {
        let u = uuid::Uuid::try_parse(s.trim()).map_err(|_| {
            Error::Usage("malformed token: expected a UUID as printed by `rlock acquire`".into())
        })?;
        Ok(Token(u.hyphenated().to_string()))
    }

    /// The token as text (a hyphenated UUID): a secret, print with care.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

/// How long to wait for a busy lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Try once.
    No,
    /// Wait at most this long.
    For(Duration),
    /// Wait until granted (the default, like flock).
    Forever,
}

/// What kind of hold to ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// An exclusive lock, or a counting semaphore with `limit` > 1.
    Exclusive,
    /// A shared hold of a read-write lock.
    Read,
    /// The exclusive hold of a read-write lock.
    Write,
}

impl Mode {
    pub(super) fn arg(self) -> &'static str {
        match self {
            Mode::Exclusive => "x",
            Mode::Read => "r",
            Mode::Write => "w",
        }
    }
}

/// What to ask for.
#[derive(Clone, Debug)]
pub struct Request {
    /// How long a lease lasts unless renewed.
    pub ttl: Duration,
    /// Exclusive (or semaphore), read, or write.
    pub mode: Mode,
    /// Holders allowed at once (1: exclusive lock). Only for
    /// [`Mode::Exclusive`]; read-write locks need 1.
    pub limit: u32,
    /// Whether and how long to wait while the lock is busy.
    pub wait: Wait,
    /// Re-enter with this token if it holds the lock (a parent `rlock
    /// exec`, say); if it does not, acquire with a fresh token as usual.
    pub reenter: Option<Token>,
    /// Who asks, stored beside the grant for `status` to show.
    pub info: HolderInfo,
    /// A new grant's lease lasts at least this long after the grant, even
    /// if it is released sooner (zero: no minimum).
    pub min_hold: Duration,
    /// "Newest wins" (a CI queue that runs only the latest job): when this
    /// acquire joins the wait queue, the `supersede` waiter queued before
    /// it leaves the queue and its acquire fails with
    /// [`Error::Superseded`]; a later one replaces this one the same way.
    /// Holders are never touched. Needs a wait (not [`Wait::No`]) and one
    /// Redis (or Sentinel, or Cluster): RedLock refuses it.
    pub supersede: bool,
    /// Waiters with a higher priority are served before lower ones; equal
    /// priorities in arrival order. From -[`MAX_PRIORITY`] to
    /// [`MAX_PRIORITY`], default 0. It orders the wait queue only: a holder
    /// is never pre-empted, and a steady stream of higher priorities can
    /// keep a lower one waiting for as long as it waits (bound it with
    /// [`Wait::For`]). Needs one Redis (or Sentinel, or Cluster): RedLock,
    /// which keeps no wait queue, refuses a priority other than 0.
    pub priority: i32,
}

impl Request {
    /// Refuse what no server could grant: a TTL out of range, no slots, a
    /// read-write lock with slots.
    pub fn check(&self) -> Result<()> {
        check_ttl(self.ttl)?;
        if self.limit == 0 {
            return Err(Error::Usage("Request::limit must be at least 1".into()));
        }
        if self.limit != 1 && self.mode != Mode::Exclusive {
            return Err(Error::Usage(
                "read-write locks take no Request::limit (it must be 1)".into(),
            ));
        }
        if self.supersede && matches!(self.wait, Wait::No | Wait::For(Duration::ZERO)) {
            return Err(Error::Usage(
                "Request::supersede needs a wait: it replaces older waiters when it joins \
                 the queue, which Wait::No and Wait::For(0) never do"
                    .into(),
            ));
        }
        if !(-MAX_PRIORITY..=MAX_PRIORITY).contains(&self.priority) {
            return Err(Error::Usage(format!(
                "Request::priority {} is out of range: from {} to {}",
                self.priority, -MAX_PRIORITY, MAX_PRIORITY
            )));
        }
        if self.min_hold > MAX_TTL {
            return Err(Error::Usage(format!(
                "Request::min_hold {} is too long: at most {}",
                human(self.min_hold),
                human(MAX_TTL)
            )));
        }
        Ok(())
    }

    /// An exclusive lock for `ttl`, waiting as long as it takes, for this
    /// process.
    pub fn new(ttl: Duration) -> Request {
        Request {
            ttl,
            mode: Mode::Exclusive,
            limit: 1,
            wait: Wait::Forever,
            reenter: None,
            info: HolderInfo::current(None),
            min_hold: Duration::ZERO,
            supersede: false,
            priority: 0,
        }
    }
}

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
    Error::Unavailable {
        context: format!(
            "acquire {key:?}: the grant arrived after its lease had expired \
             (Redis answered in {}, TTL {})",
            show(took),
            show(ttl)
        ),
        cause: redis::RedisError::from((redis::ErrorKind::Io, "stale grant")),
    }
}

/// Clock drift allowance for a lease of `ttl` (as in the RedLock paper:
/// 1% plus 2 ms for timer granularity).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The holder a waiter is waiting for.
#[derive(Clone, Debug)]
pub struct Busy {
    /// The lock waited for: of a set (see [`crate::multi`]), the one that
    /// is busy now.
    pub key: String,
    /// Who holds the lock; `None` when only waiters queued ahead keep this
    /// one waiting.
    pub holder: Option<HolderInfo>,
    /// When the holder got it (server clock, ms since 1970; 0 if unknown).
    pub since_ms: u64,
    /// When the first lease of a holder or of another waiter runs out, if
    /// nobody renews it: the longest a waiter need sleep without a wake-up.
    pub expires_in: Duration,
    /// Place in the wait queue (0 = next in line). Refreshed at every
    /// attempt and whenever a heartbeat sees another holder; a waiter ahead
    /// that gives up meanwhile shows only then.
    pub position: u64,
    /// How many hold it now.
    pub holders: u64,
    /// The first holder's lease time left (zero when nobody holds it), as
    /// of this observation.
    pub holder_ttl: Duration,
    /// How long this acquire has waited so far.
    pub waited: Duration,
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.holder {
            Some(h) => {
                write!(f, "host {} pid {}", h.host, h.pid)?;
                if self.since_ms > 0 {
                    write!(f, " since {}", format_ms(self.since_ms))?;
                }
                if self.holders > 1 {
                    write!(f, " and {} more", self.holders - 1)?;
                }
                Ok(())
            }
            None => write!(f, "waiters queued ahead"),
        }
    }
}

/// Server-clock milliseconds as an RFC 3339 UTC time.
pub fn format_ms(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
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

/// A lock's state.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// The lock's name.
    pub key: String,
    /// "exclusive", "semaphore" or "rw"; "" when nobody holds or waits.
    pub kind: String,
    /// Whether anyone holds it.
    pub held: bool,
    /// Slots of an exclusive lock or semaphore (1 = exclusive); 0 for a
    /// read-write lock, and when nobody holds or waits.
    pub limit: u64,
    /// Last fencing value granted (0: never granted).
    pub fence: u64,
    /// Acquires queued for it.
    pub waiters: u64,
    /// Writers among the waiters (read-write locks).
    pub waiting_writers: u64,
    /// Who holds it, one entry per holder.
    pub holders: Vec<HolderStatus>,
    /// The last loss an `acquire --keep` keeper recorded, within its hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_lost: Option<LostRecord>,
    /// When the waiter still queued that joined first joined the queue
    /// (server clock, ms since 1970), wherever its priority puts it;
    /// `None` when nobody waits (or the waiters joined before rlock kept
    /// that).
    #[serde(skip)]
    pub oldest_wait_since_ms: Option<u64>,
    /// The keys left of a damaged lock: its state hash was deleted by hand
    /// (`DEL`) while these remained. It has no holders or waiters; the
    /// next acquire, or `rlock break`, deletes them. Empty for a sound lock.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<String>,
}

/// The last loss a keeper recorded for a lock (`P{K}:lost`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LostRecord {
    /// The host the keeper ran on.
    pub host: String,
    /// The watched process.
    pub pid: u32,
    /// RFC 3339, the keeper's clock.
    pub when: String,
    /// The same moment, in milliseconds since 1970.
    pub when_ms: u64,
    /// Why the lock was lost.
    pub why: String,
    /// What the keeper did to the watched process.
    pub action: String,
}

impl std::fmt::Display for LostRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} host {} pid {}: {}; {}",
            self.when, self.host, self.pid, self.why, self.action
        )
    }
}

#[derive(Clone, Debug, Serialize)]
/// One holder of a lock, as `status` sees it.
pub struct HolderStatus {
    /// "exclusive", "read" or "write".
    pub mode: String,
    /// The holder's host name.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The holder's command line, if given (`rlock` stores it redacted).
    pub cmd: Option<String>,
    /// The pid of the command the holder runs (exec, rw), on the holder's
    /// host, once its first renewal noted it; `pid` is rlock's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmd_pid: Option<u32>,
    /// RFC 3339, server clock.
    pub since: String,
    /// The same moment, server clock, in ms since 1970.
    pub since_ms: u64,
    /// Lease time left, by the server's clock.
    pub ttl_ms: u64,
    /// Re-entry depth.
    pub count: u64,
    /// The fencing value of this hold.
    pub fence: u64,
    /// The other locks taken together with this one (`rlock exec a b`),
    /// sorted; empty for a lock taken alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<String>,
    /// Set while an operator's `rlock break` of this hold is under way:
    /// the hold stays until its holder has stopped and released it, or
    /// its lease ends (nothing extends it meanwhile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaking: Option<Breaking>,
    /// The SHA-1 of the holder's token, in hex (never the token): the same
    /// on every RedLock master, so that reads tell one holder's holds from
    /// another's there. Not printed, not in `--json`.
    #[serde(skip)]
    pub token_digest: String,
}

/// A break under way (`rlock break`, lua/break.lua): who, why, since when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Breaking {
    /// user@host of the operator.
    pub by: String,
    /// The operator's `--reason`.
    pub reason: String,
    /// When the break was made (server clock, ms since 1970).
    #[serde(alias = "at")]
    pub since_ms: u64,
}

/// Reject TTLs that are zero, too short to renew, or absurdly long.
pub fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::Usage(format!(
            "TTL {} is out of range: use {} to {}",
            human(ttl),
            human(MIN_TTL),
            human(MAX_TTL)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
