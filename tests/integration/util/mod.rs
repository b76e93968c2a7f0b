//! Test harness: real redis-server processes on free ports, and a builder
//! that runs the real `rlock` binary and checks its exit code and output.
//! One file per concern; everything is re-exported here, so tests say
//! `use crate::util::*;`.

pub use rlock_test_support::{
    CLUSTER_NODE, CLUSTER_NODE_FAST, free_port, redis_version, server_bin, server_version,
};

mod cluster;
mod lua;
mod process;
mod proxy;
mod redis;
mod run;
mod sentinel;

pub use self::redis::*;
pub use cluster::*;
pub use lua::*;
pub use process::*;
pub use proxy::*;
pub use run::*;
pub use sentinel::*;
