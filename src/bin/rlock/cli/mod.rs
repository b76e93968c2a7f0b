//! The command-line definition (clap's derive), part of the binary: the
//! library does not depend on clap. One file per subcommand or family, as
//! `cmd/` has one per subcommand: each holds its arguments and the help
//! text people read beside them (no logic). `global.rs` has the options
//! every subcommand takes and the top-level help, `options.rs` the groups
//! several share. The man pages and completions are rendered from this
//! same definition by a unit test (`generate.rs`).

use std::ffi::OsString;

use clap::{Parser, Subcommand};

mod acquire;
mod breaking;
mod exec;
mod fast;
#[cfg(test)]
mod generate;
mod global;
mod metrics;
mod options;
mod query;
mod release;
mod rw;
mod top;

pub(crate) use acquire::{Acquire, KeepOpts};
pub(crate) use breaking::Break;
pub(crate) use exec::Exec;
pub(crate) use global::Global;
pub(crate) use metrics::Metrics;
pub(crate) use options::{LockOpts, OnLost, RunOpts};
pub(crate) use query::{Check, Doctor, History, List, Status};
pub(crate) use release::{Release, Renew};
pub(crate) use rw::{Rw, RwMode};
pub(crate) use top::Top;

// `S` is [`Command`] (every subcommand) or one of [`only`]'s (one
// subcommand, see [`parse`]); the program works on `Cli` alone. (Not in
// the doc comment below: that is the long help's text.)
/// Redis-backed distributed locks for shell scripts, cron jobs and CI.
#[derive(Debug, Parser)]
#[command(
    name = "rlock",
    version,
    about,
    after_help = global::short_help(),
    after_long_help = global::concat_help()
)]
pub(crate) struct Cli<S: Subcommand = Command> {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: S,
}

/// The command line as clap reads it: `exec`'s usual line read without
/// clap ([`fast`]: the same value), else with only the subcommand
/// `args[1]` names built when it is exactly a subcommand's name (`rlock
/// exec ...`), else with every subcommand built. clap builds every
/// argument of every subcommand before it parses, a tenth of an `exec`'s
/// CPU. The same declaration, so the same parse, errors and help:
/// `args[1]` cannot be an option's value (nothing precedes it), so clap
/// picks that subcommand in both builds; anything else (global options
/// first, `help`, an unknown word) builds them all. Tested in
/// `tests::partial_build_*` and `fast::tests`.
pub(crate) fn parse(args: &[OsString]) -> Result<Cli, clap::Error> {
    match fast::exec(args) {
        Some(cli) => Ok(cli),
        None => parse_one(args).unwrap_or_else(|| <Cli>::try_parse_from(args)),
    }
}

impl<S: Subcommand + Into<Command>> Cli<S> {
    fn into_full(self) -> Cli {
        Cli {
            global: self.global,
            command: self.command.into(),
        }
    }
}

/// Declares the subcommands once: [`Command`], every one of them, and per
/// subcommand a one-variant enum in [`only`] with the same attributes,
/// for [`parse`] to build alone; `$name` is the name clap derives from
/// the variant (checked by `tests::subcommand_names`).
macro_rules! subcommands {
    ($($(#[$attr:meta])* $name:literal $variant:ident($args:ident),)*) => {
        #[derive(Debug, Subcommand)]
        pub(crate) enum Command {
            $($(#[$attr])* $variant($args),)*
        }

        /// One enum per subcommand: [`Command`]'s variant of that name, alone.
        mod only {
            use super::*;
            $(
                #[derive(Debug, Subcommand)]
                pub(crate) enum $variant {
                    $(#[$attr])* $variant(super::$args),
                }

                impl From<$variant> for Command {
                    fn from(c: $variant) -> Command {
                        let $variant::$variant(a) = c;
                        Command::$variant(a)
                    }
                }
            )*
        }

        /// Every subcommand's name, in [`Command`]'s order.
        #[cfg(test)]
        const NAMES: &[&str] = &[$($name),*];

        /// The root with only subcommand `name` ([`parse`]'s partial build).
        #[cfg(test)]
        fn command_of(name: &str) -> Option<clap::Command> {
            use clap::CommandFactory;
            $(
                if name == $name {
                    return Some(<Cli<only::$variant>>::command());
                }
            )*
            None
        }

        /// [`parse`] with one subcommand built, when `args[1]` names one.
        fn parse_one(args: &[OsString]) -> Option<Result<Cli, clap::Error>> {
            let first = args.get(1)?.to_str()?;
            $(
                if first == $name {
                    return Some(<Cli<only::$variant>>::try_parse_from(args).map(Cli::into_full));
                }
            )*
            None
        }
    };
}

subcommands! {
    /// Take the lock and print its owner token on stdout (and nothing else)
    #[command(after_help = acquire::AFTER_HELP)]
    "acquire" Acquire(Acquire),

    /// Run a command while holding the lock, and exit with its status
    #[command(after_help = exec::AFTER_HELP)]
    "exec" Exec(Exec),

    /// Read-write lock: many readers at once, or one writer
    #[command(after_help = rw::AFTER_HELP)]
    "rw" Rw(Rw),

    /// Release a lock held by a token; releasing a free lock is harmless
    "release" Release(Release),

    /// Extend a held lock's TTL; fails if the token no longer owns it
    "renew" Renew(Renew),

    /// Exit 0 if a token still holds the lock, 79 if it holds it no more, 77
    /// if another owner holds it: for scripts about to do something
    /// irreversible
    #[command(after_help = query::CHECK_AFTER)]
    "check" Check(Check),

    /// Show who holds a lock, since when, TTL left, fencing counter, waiters
    "status" Status(Status),

    /// Show a lock's history: who got it, for how long, how each hold ended
    #[command(after_help = query::HISTORY_AFTER)]
    "history" History(History),

    /// End a stuck lock's hold(s) by force; the next waiter gets it once they stopped
    #[command(after_help = breaking::AFTER_HELP)]
    "break" Break(Break),

    /// Check the Redis deployment for settings that silently break locks
    #[command(after_help = query::DOCTOR_AFTER)]
    "doctor" Doctor(Doctor),

    /// List the locks that are held or waited for
    "list" List(List),

    /// A live view of the locks in use, most contended first (like top)
    #[command(after_help = top::AFTER_HELP)]
    "top" Top(Top),

    /// Print Prometheus metrics for the locks in use (text format 0.0.4)
    #[command(after_help = metrics::AFTER_HELP)]
    "metrics" Metrics(Metrics),
}

impl Command {
    /// The lock name the command works on, if it has one.
    pub(crate) fn key(&self) -> Option<&str> {
        match self {
            Command::Acquire(Acquire { key, .. })
            | Command::Exec(Exec { key, .. })
            | Command::Rw(Rw { key, .. })
            | Command::Release(Release { key, .. })
            | Command::Renew(Renew { key, .. })
            | Command::Check(Check { key, .. })
            | Command::Status(Status { key, .. })
            | Command::Break(Break { key, .. }) => Some(key),
            Command::History(History { key, .. }) => key.as_deref(),
            Command::List(_) | Command::Doctor(_) | Command::Top(_) | Command::Metrics(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use clap::{CommandFactory, Parser};

    use super::{Cli, NAMES, command_of, parse};

    #[test]
    fn cli_definition_is_consistent() {
        <Cli>::command().debug_assert();
        for name in NAMES {
            command_of(name).unwrap().debug_assert();
        }
    }

    /// The names `parse` matches are the ones clap derives, all of them.
    #[test]
    fn subcommand_names() {
        let full = <Cli>::command();
        let derived: Vec<&str> = full.get_subcommands().map(|s| s.get_name()).collect();
        assert_eq!(derived, NAMES);
        assert!(command_of("help").is_none() && command_of("Exec").is_none());
    }

    /// Each subcommand built alone is the one built among all: the same
    /// arguments, settings and texts (clap's Debug of the built command
    /// shows them all), so the same help, usage and man page.
    #[test]
    fn partial_build_is_the_full_one() {
        let mut full = <Cli>::command();
        full.build();
        for name in NAMES {
            let mut part = command_of(name).unwrap();
            part.build();
            // Its place in the list of subcommands (the top help's
            // order, which a partial build never shows) is all that differs.
            let place = |c: &clap::Command| c.clone().display_order(0);
            let (mut a, mut b) = (
                place(full.find_subcommand(name).unwrap()),
                place(part.find_subcommand(name).unwrap()),
            );
            let (da, db) = (format!("{a:#?}"), format!("{b:#?}"));
            let diff: Vec<(&str, &str)> =
                da.lines().zip(db.lines()).filter(|(x, y)| x != y).collect();
            assert_eq!(diff, [], "{name}");
            assert_eq!(da, db, "{name}");
            assert_eq!(a.render_help().to_string(), b.render_help().to_string());
            assert_eq!(
                a.render_long_help().to_string(),
                b.render_long_help().to_string()
            );
            assert_eq!(a.render_usage().to_string(), b.render_usage().to_string());
        }
    }

    /// What clap makes of a command line, comparable: the parsed value,
    /// or the error's kind, exit code and text.
    pub(super) fn outcome(r: Result<Cli, clap::Error>) -> String {
        match r {
            Ok(cli) => format!("ok {cli:?}"),
            Err(e) => format!("err {:?} {} {}", e.kind(), e.exit_code(), e.render()),
        }
    }

    /// Lines that name a subcommand first parse (or fail) exactly as with
    /// every subcommand built: the same command, options and operands, the
    /// same error text and exit code; `parse` never runs another command
    /// than the full build would.
    #[test]
    fn partial_build_parses_as_the_full_one() {
        let tails: &[&str] = &[
            "",
            "--help",
            "-h",
            "-V",
            "--version",
            "k",
            "k -- true",
            "k true",
            "k -- true -- x",
            "k --and j -- true",
            "-n -E 0 k -- ./report.sh",
            "--ttl 5s k -- true",
            "--tll 5s k -- true",
            "k --tll 5s -- true",
            "--url redis://h:1 -v k -- true",
            "--bogus",
            "-x",
            "k --token",
            "k --token t",
            "read k -- true",
            "write k",
            "mode k -- true",
            "--json k",
            "--limit 0 k",
            "--holder",
            "--yes k",
            "--listen 127.0.0.1:0",
            "--interval 0s",
            "help",
            "exec k",
            "-- k true",
            "k -- --",
            "--timeout=1s k -- true",
            "--max-hold 1x k -- true",
        ];
        let mut lines: Vec<Vec<OsString>> = Vec::new();
        for name in NAMES {
            for tail in tails {
                let line = format!("rlock {name} {tail}");
                lines.push(line.split_whitespace().map(OsString::from).collect());
            }
        }
        // args[1] is exactly a name only: these build every subcommand.
        for odd in [
            "rlock",
            "rlock EXEC k",
            "rlock exe k",
            "rlock -v exec k -- true",
        ] {
            lines.push(odd.split_whitespace().map(OsString::from).collect());
        }
        lines.push(vec!["rlock".into(), "exec ".into(), "k".into()]);
        for args in &lines {
            assert_eq!(
                outcome(parse(args)),
                outcome(<Cli>::try_parse_from(args)),
                "{args:?}"
            );
        }
    }
}
