//! `rlock rw`: read-write locks, with a command (as exec) or without (as
//! acquire).

use std::ffi::OsString;

use clap::Args;

use super::options::{LockOpts, RunOpts};

pub(crate) const AFTER_HELP: &str = "\
Readers share the lock; a writer excludes readers and other writers. Each
reader has its own token, lease and renewal: a crashed reader frees only its
own share. Once a writer waits, new readers queue behind it, so a stream of
readers cannot starve writers (a reader at a higher --priority than the
waiting writer goes first). With CMD, behaves like `rlock exec`; without,
prints a token like `rlock acquire` (release and renew it as usual).
A nested read inside a read, or read/write inside a write, re-enters; a read
that tries to re-enter as a write is refused (exit 64) instead of deadlocking.

Examples:
  rlock rw read catalog -- ./export.sh       # many exporters at once
  rlock rw write catalog -- ./import.sh      # one importer, alone
  tok=$(rlock rw write catalog --ttl 5m)";

#[derive(Debug, Args)]
pub(crate) struct Rw {
    /// read (shared) or write (exclusive)
    #[arg(value_enum)]
    pub mode: RwMode,
    /// Lock name
    pub key: String,
    /// With a command, hold lock KEY too (repeatable), as exec does
    #[arg(long = "and", value_name = "KEY")]
    pub also: Vec<String>,
    #[command(flatten)]
    pub lock: LockOpts,
    #[command(flatten)]
    pub run: RunOpts,
    /// Command to run under the lock (best after `--`); without one,
    /// print a token like `rlock acquire`
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RwMode {
    /// Shared: many readers at once
    Read,
    /// Exclusive: one writer, no readers
    Write,
}
