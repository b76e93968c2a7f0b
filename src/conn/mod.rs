//! Connecting to Redis: one server, several for RedLock, a Redis Cluster
//! through its seed nodes, or the master a set of Sentinels names; over
//! TCP, TLS or a unix socket, with RLOCK_PASSWORD, a timeout on every step,
//! and error messages that never contain a password.
//!
//! - `options`: [`ConnectOptions`], the TLS files ([`Tls`]) and the use of
//!   the index of locks in use ([`Index`]);
//! - `url`: one URL checked and turned into connection settings;
//! - `server`: the servers the options name, and opening a connection to
//!   one;
//! - `sentinel`: finding the master the Sentinels name;
//! - `cluster`: a Redis Cluster and the seed nodes it is reached through;
//!   `cluster/slots.rs` reads its CLUSTER SLOTS reply;
//! - `handle`: the connection handle (one Redis or a cluster) and how long
//!   an idle one may be reused.
//!
//! Redacting secrets is not about connecting and lives in its own module;
//! [`redact`], [`redact_text`] and [`redact_command`] are re-exported here,
//! where callers have always found them.

#[cfg(feature = "cluster")]
mod cluster;
mod handle;
mod options;
mod sentinel;
mod server;
mod url;

pub(crate) use handle::{Conn, IDLE_RECONNECT};
pub use options::{ConnectOptions, Index, Tls};
pub(crate) use server::Server;

pub use crate::redact::{redact, redact_command, redact_text};
