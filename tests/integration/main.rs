//! Integration tests: the real `rlock` binary and library against real
//! redis-server processes started on free ports.

// A test or bench binary: its `pub` items only share helpers between its
// own modules (tests/support is a crate of its own), so the lint has nothing
// to say here.
#![allow(unreachable_pub)]

mod util;

mod alerts;
mod algo;
mod break_lock;
mod cli;
mod cluster;
mod dead_waiter;
mod deb;
mod deleted_keys;
mod docs;
mod doctor;
mod exec;
mod exporter;
mod failover;
mod flock;
mod handoff;
mod history;
mod index;
mod install;
mod keep;
mod keep_safety;
mod library;
mod max_hold;
mod metrics;
mod monitor;
mod multi;
mod new_user;
mod oom;
mod paths;
mod priority;
mod redaction;
mod redlock;
mod roles;
mod roles_deployments;
mod rw;
mod sentinel;
mod server;
mod shipped;
mod tls_acl;
mod top;
mod wait_outage;
mod waiting;
