//! What the integration tests (tests/integration) and the bench programs
//! (benches/cli, benches/market) share: a throwaway redis-server on a free
//! loopback port and Redis Clusters of them ([`Redis`], at the crate
//! root), and for the benches a watchdog that knows every server they
//! started ([`bench`]); and scratch directories that do not pile up in
//! `$TMPDIR` ([`scratch_dir`]).

mod redis_server;
mod scratch;

pub mod bench;

pub use redis_server::*;
pub use scratch::{scratch_dir, scratch_path};
