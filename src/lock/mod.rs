//! The lock itself: acquire (with FIFO waiting), release, renew, status.
//!
//! Every operation is one Lua script (see lua/), so each is atomic and one
//! round trip; keys and tokens travel only as KEYS and ARGV. One file per
//! job:
//! - `backend`: the lock contract, which one Redis (`node`) and RedLock
//!   (`quorum`) implement and [`crate::Locker`] holds;
//! - the types, by meaning: `request` (what a caller asks for: token,
//!   request, who asks, and their bounds), `lease` (what a grant gives and
//!   how long it is safe to rely on), `status` (a lock seen from outside),
//!   `history` (how much is kept, how a hold ended, one event);
//! - `keys`: the Redis keys of one lock, and the shards of the index of
//!   locks in use;
//! - `script`: the scripts, their reply codes, and when a call may be
//!   resent;
//! - `decode`: the scripts' replies, decoded (pure);
//! - `node`: one Redis server and the lock operations on it (its
//!   transport: `node/transport.rs`; `list` through the index of locks in
//!   use: `node/index.rs`);
//! - `quorum`: RedLock over several independent masters;
//! - [`reentry`]: the RLOCK_HELD codec, the token a nested exec, acquire,
//!   release, renew or check acts with;
//! - [`set`]: several locks at once, without deadlock;
//! - [`breaking`]: `rlock break`, an operator ending holds by force;
//! - [`overview`]: every lock in use with its history's figures, for
//!   `top` and `metrics`;
//! - `wait`: waiting for a busy lock, shared with RedLock.

mod backend;
pub mod breaking;
mod decode;
mod history;
mod keys;
mod lease;
mod node;
pub mod overview;
pub(crate) mod quorum;
pub mod reentry;
mod request;
mod script;
pub mod set;
mod status;
mod wait;

pub use backend::{Backend, First, Watch};
pub use breaking::{Break, Broken, Holders};
pub use history::{
    Event, HistoryLimits, Loss, MAX_HISTORY_EVENTS, MAX_HISTORY_RETENTION, ReleaseNote,
};
pub(crate) use keys::index_shard_key;
pub use keys::{LockName, MAX_KEY_LEN};
pub use lease::{
    HEARTBEAT, Held, Lease, Released, WAITER_LEASE, drift, heartbeat, valid_until, waiter_lease,
};
pub(crate) use lease::{LOST_GONE, LOST_TAKEN, RenewalSchedule, backoff};
pub(crate) use node::{Attempt, Node, Outcome};
pub use overview::{Counters, LockView};
pub use request::{
    HolderInfo, MAX_PRIORITY, MAX_TTL, MIN_TTL, Mode, Release, Renewal, Request, RequestBuilder,
    Token, Wait, check_ttl, ci_job,
};
pub(crate) use request::{hostname, login_name};
pub use script::RESEND_WINDOW;
pub(crate) use script::resendable;
pub use status::{
    Breaking, Busy, HolderStatus, LostRecord, QUEUE_SHOWN, Status, WaiterStatus, format_ms,
    priority_of_score,
};
pub use wait::{Cancel, OUTAGE_LIMIT};
pub(crate) use wait::{Outage, Waiting};
