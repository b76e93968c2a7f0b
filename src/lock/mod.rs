//! The lock itself: acquire (with FIFO waiting), release, renew, status.
//!
//! Every operation is one Lua script (see lua/), so each is atomic and one
//! round trip; keys and tokens travel only as KEYS and ARGV. One file per
//! job:
//! - `backend`: the operations one Redis and RedLock both provide (the
//!   contract [`crate::Locker`] forwards to);
//! - [`types`]: the public types (tokens, requests, leases, status) and
//!   the bounds on them;
//! - `keys`: the Redis keys of one lock, and the shards of the index of
//!   locks in use;
//! - `script`: the scripts, their reply codes, and the transport that runs
//!   them (EVALSHA, NOSCRIPT, resends);
//! - `decode`: the scripts' replies, decoded (pure);
//! - `node`: one Redis server and the lock operations on it (`list`
//!   through the index of locks in use: `node/index.rs`);
//! - [`breaking`]: `rlock break`, an operator ending holds by force;
//! - [`overview`]: every lock in use with its history's figures, for
//!   `top` and `metrics`;
//! - `wait`: waiting for a busy lock, shared with RedLock (`crate::quorum`).

mod backend;
pub mod breaking;
mod decode;
mod keys;
mod node;
pub mod overview;
mod script;
pub mod types;
mod wait;

pub(crate) use backend::Backend;
pub use breaking::{Broken, Holders};
pub(crate) use keys::index_shard_key;
pub use keys::{LockName, MAX_KEY_LEN};
pub(crate) use node::{Attempt, Node};
pub use overview::{Counters, LockView};
pub use script::RESEND_WINDOW;
pub(crate) use script::resendable;
pub use types::*;
pub use wait::{Cancel, OUTAGE_LIMIT};
pub(crate) use wait::{Outage, Waiting};
