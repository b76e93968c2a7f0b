//! `rlock exec`: run a command while holding locks, with flock(1)'s own
//! options.

use std::ffi::OsString;

use clap::Args;

use super::options::{LockOpts, RunOpts, Slots};

pub(crate) const AFTER_HELP: &str = "\
The command runs in its own process group, under a guard process, with
RLOCK_KEY, RLOCK_TOKEN and RLOCK_FENCE in its environment. The lease is
renewed every TTL/3; signals INT TERM HUP QUIT USR1 USR2 are passed on to
every process of the command; the lock is released as soon as the command
and everything it started have exited (--kill-leftovers: when the command
exits). The command never outlives the lease: see `rlock --help`, \"The
guard\". A nested `rlock exec` (or acquire) of the same key inside the
command re-enters instead of waiting for its parent; the outermost exec
releases every hold. So does one given the holder's token in RLOCK_TOKEN
(a script that exported the token of its `rlock acquire --keep`).

Which words are the command: options may stand anywhere before it; the
first `--` ends rlock's words (`rlock exec k -- ssh host -- touch x` runs
`ssh host -- touch x`); without a `--` before it, the command starts at
the first word after the key that is not an option, as after flock's file,
and runs to the end. A line with a `--` after the command's first word
reads two ways (`rlock exec k ssh host -- touch x`: flock runs `ssh host
-- touch x` under k, the lock-set form `touch x` under k, ssh, host) and is
refused (64), naming both and how to write each. Write `--` after the key.

Several locks: `rlock exec KEY --and KEY... -- CMD` (up to 16, each named
once) takes them all, in one order (by name) whatever order they are
named in, so jobs naming them in different orders never deadlock; -n/-w
are for the whole set (busy or timed out: nothing left held or queued). The command starts once all are held;
each is renewed, all are released together, and a loss of any one stops
the command (exit 79, naming it). RLOCK_KEY/TOKEN/FENCE are the first
key's; RLOCK_FENCES lists key=fence for each (\"a=17 b=4\"). `rlock status`
shows the other locks of a holder's set.

Examples:
  rlock exec market -- ./settle.sh
  rlock exec -w 30m staging-db --and staging-app -- ./deploy.sh   # both
  rlock exec -n -E 0 nightly -- ./report.sh     # cron: skip if running elsewhere
  rlock exec --ttl 2m -w 10m deploy -- make deploy
  rlock exec --priority 10 -w 1h deploy -- ./hotfix.sh   # before routine waiters";

#[derive(Debug, Args)]
pub(crate) struct Exec {
    /// Lock name
    pub key: String,
    /// Hold lock KEY too (repeatable): a lock set, taken deadlock-free
    #[arg(long = "and", value_name = "KEY")]
    pub also: Vec<String>,
    #[command(flatten)]
    pub lock: LockOpts,
    #[command(flatten)]
    pub slots: Slots,
    #[command(flatten)]
    pub run: RunOpts,
    #[command(flatten)]
    pub flock: FlockOpts,
    /// The command and its arguments (after `--`, or right after the key
    /// as after flock's file)
    #[arg(
        conflicts_with = "command_string",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

/// flock(1)'s own options, so that `flock` -> `rlock exec` is a one-word
/// change in a crontab line.
#[derive(Debug, Args)]
pub(crate) struct FlockOpts {
    /// Take a shared (read) lock: `rlock exec -s K` is `rlock rw read K`
    #[arg(
        short = 's',
        long,
        conflicts_with = "exclusive",
        help_heading = "flock(1) options"
    )]
    pub shared: bool,
    /// Take an exclusive lock (the default)
    #[arg(
        short = 'x',
        short_alias = 'e',
        long,
        help_heading = "flock(1) options"
    )]
    pub exclusive: bool,
    /// Run CMD through `sh -c`, as flock -c does
    #[arg(
        short = 'c',
        long = "command",
        value_name = "CMD",
        help_heading = "flock(1) options"
    )]
    pub command_string: Option<OsString>,
    /// Accepted: rlock never passes a lock descriptor to the command
    #[arg(short = 'o', long, help_heading = "flock(1) options")]
    pub close: bool,
    /// Refused: rlock must stay alive to renew the lease
    #[arg(short = 'F', long, help_heading = "flock(1) options")]
    pub no_fork: bool,
    /// Refused: rlock locks are released with `rlock release`
    #[arg(short = 'u', long, help_heading = "flock(1) options")]
    pub unlock: bool,
    /// Refused: rlock locks are not file descriptors
    #[arg(long, value_name = "FD", help_heading = "flock(1) options")]
    pub fd: Option<String>,
}

const NO_DESCRIPTORS: &str = "rlock locks are not file descriptors: hold one for the \
     rest of the script with tok=$(rlock acquire KEY --keep), or across some commands with \
     tok=$(rlock acquire KEY) ... rlock release KEY --token \"$tok\"";

impl FlockOpts {
    /// The flock(1) options rlock cannot honour, refused with the reason;
    /// `key` and `command` catch the descriptor form `flock 9`.
    pub(crate) fn refuse(&self, key: &str, command: &[OsString]) -> Result<(), String> {
        if self.no_fork {
            return Err(
                "--no-fork (-F) cannot work: rlock must stay alive while the \
                 command runs, to renew the lease; drop the flag"
                    .into(),
            );
        }
        if self.unlock {
            return Err(format!(
                "--unlock (-u) has no counterpart: {NO_DESCRIPTORS}"
            ));
        }
        if let Some(fd) = &self.fd {
            return Err(format!("--fd {fd}: {NO_DESCRIPTORS}"));
        }
        if command.is_empty() && self.command_string.is_none() {
            if key.chars().all(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "`rlock exec {key}` without a command looks like flock's descriptor \
                     form: {NO_DESCRIPTORS}"
                ));
            }
            return Err("no command given: rlock exec KEY [--] CMD [ARGS...], or -c CMD".into());
        }
        Ok(())
    }

    /// The command to run: `sh -c CMD` for -c, else what followed the key.
    pub(crate) fn command(&self, command: &[OsString]) -> Vec<OsString> {
        match &self.command_string {
            Some(c) => vec!["sh".into(), "-c".into(), c.clone()],
            None => command.to_vec(),
        }
    }
}
