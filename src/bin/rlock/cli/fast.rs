//! `rlock exec`'s usual line, read without clap: `rlock exec [OPTION]...
//! KEY -- CMD [ARG]...`, where OPTION is one of `-n`/`--no-wait`, `-w
//! D`/`--wait D`, `--ttl D`, `-E N`, `-q`/`--quiet`, `-v`/`--verbose`,
//! each at most once, before the key.
//!
//! Why: clap builds exec's ~40 arguments, matches and converts them on
//! every run, about 0.2-0.4 ms and 50 page faults of an `exec` that takes
//! 2.5 ms in all, the largest step rlock adds before its first request
//! (BENCHMARKS.md, "Issue 32"). The line cron and CI scripts write is
//! this simple one.
//!
//! Never another reading than clap's: [`exec`] answers only for a line
//! it reads exactly as clap does, and declines (None, clap reads it)
//! anything else: another option or form (`-w5`, `--ttl=5s`, `--timeout`,
//! an option after the key), a value its own parser refuses (clap reports
//! it), a repeated option, `-q` with `-v`, a key that is empty or starts
//! with `-`, no `--` right after the key, no command after it, and any
//! environment variable clap reads other than RLOCK_URL and RLOCK_PREFIX
//! (or those two empty, not UTF-8, or with an empty URL in the list). The
//! values go through the parsers clap uses (`FromStr` of Span and
//! Seconds; for `-E`, u8's, which takes a subset of what clap's u8 parser
//! takes, an i64 in range: `+7` and `007` alike, `-0` left to clap) and
//! the defaults are the constants clap's declarations name.
//! Tested against clap on generated lines in each environment
//! (`tests::agrees_with_clap_in_every_environment`).

use std::ffi::OsString;
use std::str::FromStr;

use super::exec::FlockOpts;
use super::global::{self, Global};
use super::options::{self, LockOpts, RunOpts, Slots};
use super::{Cli, Command, Exec};

/// The environment variables clap reads for `exec` that [`exec`] takes.
const TAKEN_ENV: [&str; 2] = ["RLOCK_URL", "RLOCK_PREFIX"];

/// The other ones: any of them set, even empty, sends the line to clap.
const DECLINED_ENV: [&str; 8] = [
    "RLOCK_CLUSTER",
    "RLOCK_SENTINEL",
    "RLOCK_MIN_REPLICAS",
    "RLOCK_TLS_CA",
    "RLOCK_TLS_CERT",
    "RLOCK_TLS_KEY",
    "RLOCK_HISTORY_EVENTS",
    "RLOCK_HISTORY_RETENTION",
];

/// `args` as clap would read it, if it is the usual `exec` line (see the
/// module's documentation); None: let clap read it.
pub(super) fn exec(args: &[OsString]) -> Option<Cli> {
    if args.get(1)? != "exec" || DECLINED_ENV.iter().any(|v| std::env::var_os(v).is_some()) {
        return None;
    }
    let [url_var, prefix_var] = TAKEN_ENV;
    let url = match env(url_var)? {
        None => vec![global::DEFAULT_URL.to_owned()],
        Some(list) => {
            let urls: Vec<String> = list.split(',').map(str::to_owned).collect();
            if urls.iter().any(String::is_empty) {
                return None;
            }
            urls
        }
    };
    let prefix = env(prefix_var)?.unwrap_or_else(|| global::DEFAULT_PREFIX.to_owned());

    let (mut no_wait, mut quiet, mut verbose) = (false, false, false);
    let (mut wait, mut ttl, mut conflict_exit_code) = (None, None, None);
    let mut words = args[2..].iter();
    let key = loop {
        let word = words.next()?.to_str()?;
        match word {
            "-n" | "--no-wait" if !no_wait => no_wait = true,
            "-q" | "--quiet" if !quiet => quiet = true,
            "-v" | "--verbose" if !verbose => verbose = true,
            "-w" | "--wait" if wait.is_none() => wait = Some(value(words.next()?)?),
            "--ttl" if ttl.is_none() => ttl = Some(value(words.next()?)?),
            "-E" if conflict_exit_code.is_none() => {
                conflict_exit_code = Some(value::<u8>(words.next()?)?);
            }
            _ if word.is_empty() || word.starts_with('-') => return None,
            key => break key.to_owned(),
        }
    };
    if words.next()? != "--" || (quiet && verbose) {
        return None;
    }
    let command: Vec<OsString> = words.cloned().collect();
    if command.is_empty() {
        return None;
    }

    let global = Global {
        url,
        cluster: false,
        sentinel: None,
        min_replicas: global::DEFAULT_MIN_REPLICAS,
        tls_ca: None,
        tls_cert: None,
        tls_key: None,
        prefix,
        connect_timeout: value(global::DEFAULT_CONNECT_TIMEOUT)?,
        history_events: global::DEFAULT_HISTORY_EVENTS,
        history_retention: value(global::DEFAULT_HISTORY_RETENTION)?,
        quiet,
        verbose,
        busy_is_success: false,
    };
    let lock = LockOpts {
        ttl: match ttl {
            Some(ttl) => ttl,
            None => value(options::DEFAULT_TTL)?,
        },
        wait,
        no_wait,
        min_hold: None,
        supersede: false,
        priority: options::DEFAULT_PRIORITY,
        conflict_exit_code: conflict_exit_code.unwrap_or(options::DEFAULT_CONFLICT_EXIT_CODE),
    };
    let run = RunOpts {
        on_lost: options::DEFAULT_ON_LOST,
        kill_leftovers: false,
        grace: value(options::DEFAULT_GRACE)?,
        max_hold: None,
    };
    let flock = FlockOpts {
        shared: false,
        exclusive: false,
        command_string: None,
        close: false,
        no_fork: false,
        unlock: false,
        fd: None,
    };
    Some(Cli {
        global,
        command: Command::Exec(Exec {
            key,
            also: Vec::new(),
            lock,
            slots: Slots {
                limit: options::DEFAULT_LIMIT,
            },
            run,
            flock,
            command,
        }),
    })
}

/// An option's value through the parser clap uses for its type.
fn value<T: FromStr>(word: impl AsRef<std::ffi::OsStr>) -> Option<T> {
    word.as_ref().to_str()?.parse().ok()
}

/// Environment variable `name`: Some(None) when unset, Some(value) when
/// set to a non-empty UTF-8 value; None (decline) otherwise.
fn env(name: &str) -> Option<Option<String>> {
    match std::env::var_os(name) {
        None => Some(None),
        Some(v) => v.into_string().ok().filter(|v| !v.is_empty()).map(Some),
    }
}

#[cfg(test)]
mod tests;
