//! What a lock looks like from outside: its state (`status`), one holder
//! as `status` shows it, and the holder a waiter waits for.

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::request::HolderInfo;

/// The holder a waiter is waiting for.
#[derive(Clone, Debug)]
pub struct Busy {
    /// The lock waited for: of a set (see [`crate::lock::set`]), the one that
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

/// A lock's state.
#[derive(Clone, Debug, Default, Serialize)]
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
    /// Acquires queued for it (`waiting` in JSON, where `waiters` lists
    /// them: [`Status::queue`]).
    #[serde(rename = "waiting")]
    pub waiters: u64,
    /// Writers among the waiters (read-write locks).
    pub waiting_writers: u64,
    /// Who holds it, one entry per holder.
    pub holders: Vec<HolderStatus>,
    /// Who waits, in queue order (priority, then arrival): the first
    /// [`QUEUE_SHOWN`] live waiters (`waiters` in JSON; their count is
    /// [`Status::waiters`]).
    #[serde(rename = "waiters")]
    pub queue: Vec<WaiterStatus>,
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

#[derive(Clone, Debug, Default, Serialize)]
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
    /// The login name of the holder's process ("" when its rlock did not
    /// record one).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// The CI job the holder runs in, when its environment named one (see
    /// [`crate::lock::ci_job`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci: Option<String>,
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

/// How many waiters a status read lists (lua/status.lua, lua/overview.lua);
/// [`Status::waiters`] counts them all.
pub const QUEUE_SHOWN: usize = 100;

/// One waiter of a lock, as `status` shows it (lua/status.lua: the info
/// its acquire sent, kept in the lock's state hash while it waits).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct WaiterStatus {
    /// The waiter's host name ("" for a waiter queued by an rlock that
    /// did not record who waits).
    pub host: String,
    /// The waiter's process id (0: unknown, as for `host`).
    pub pid: u32,
    /// The login name of the waiter's process ("" if not recorded).
    pub user: String,
    /// Its `--priority` (higher is served first).
    pub priority: i64,
    /// When it joined the queue, RFC 3339, server clock ("" if unknown).
    pub since: String,
    /// The same moment in ms since 1970 (0 if unknown).
    pub since_ms: u64,
    /// Its command line, redacted as a holder's (`rlock exec`), if given.
    pub cmd: Option<String>,
    /// The CI job it runs in, when its environment named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci: Option<String>,
    /// "read" or "write" for a read-write lock, "" otherwise.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// The SHA-1 of its token, in hex (never the token), as for holders:
    /// tells one waiter's places on the RedLock masters apart.
    #[serde(skip)]
    pub token_digest: String,
}

/// A waiter's priority from its score in the queue: -P * 1e10 + its
/// arrival (1 and up, below 1e10; lua/acquire.lua, "Priority").
pub fn priority_of_score(score: f64) -> i64 {
    let band = (score / 1e10).floor();
    if !band.is_finite() || band.abs() > 1e6 {
        return 0;
    }
    // (|band| <= 1e6: the cast is exact)
    #[allow(clippy::cast_possible_truncation)]
    let band = band as i64;
    -band
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
