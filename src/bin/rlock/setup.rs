//! What the flags and the environment make of a connection, a request, a
//! token, and of the wait's display: the one place that turns them into
//! the library's configuration. The RLOCK_* variables that back a flag are
//! read by clap (the flag's `env`); the others are read here, and the
//! library reads none (see the test below).

use std::time::Duration;

use rlock::exec::HELD_ENV;
use rlock::{ConnectOptions, Locker, Mode, Request, Token, Wait};

use crate::cli::{Global, LockOpts};
use crate::progress;

pub(crate) fn connect(g: &Global) -> anyhow::Result<Locker> {
    connect_with(g, options(g))
}

/// [`connect`] for `list`, `top` and `metrics`, which find locks through
/// the index of locks in use, or by a scan when RLOCK_LIST_SCAN=1.
pub(crate) fn connect_listing(g: &Global) -> anyhow::Result<Locker> {
    let mut opts = options(g);
    opts.index.scan = list_scan(std::env::var_os("RLOCK_LIST_SCAN").as_deref())?;
    connect_with(g, opts)
}

fn connect_with(g: &Global, opts: ConnectOptions) -> anyhow::Result<Locker> {
    // Checked before connecting: a bad value writes nothing.
    let limits = history(g)?;
    let mut locker = Locker::connect(&opts, &g.prefix)?;
    locker.set_history(limits);
    Ok(locker)
}

/// RLOCK_LIST_SCAN: `1` scans, `0` or unset (or empty) reads the index.
fn list_scan(v: Option<&std::ffi::OsStr>) -> Result<bool, rlock::Error> {
    match v.map(|v| v.to_str()) {
        None | Some(Some("0" | "")) => Ok(false),
        Some(Some("1")) => Ok(true),
        Some(_) => Err(rlock::Error::invalid(format!(
            "RLOCK_LIST_SCAN is {:?}; use 1 (scan) or 0",
            v.unwrap_or_default()
        ))),
    }
}

/// RLOCK_INDEX_KEEP, milliseconds (at least 100): how long an entry of the
/// index of locks in use outlives its lease, for tests of its refresh; not
/// a setting to use in production. Unset or not a number: an hour.
fn index_keep(v: Option<&str>) -> Duration {
    v.and_then(|v| v.parse::<u64>().ok())
        .map_or(Duration::from_secs(3600), |ms| {
            Duration::from_millis(ms.max(100))
        })
}

/// How much history each lock keeps (--history-events,
/// --history-retention); refused (a usage error) out of range.
pub(crate) fn history(g: &Global) -> Result<rlock::HistoryLimits, rlock::Error> {
    rlock::HistoryLimits::new(g.history_events, g.history_retention.0)
}

pub(crate) fn options(g: &Global) -> ConnectOptions {
    ConnectOptions {
        urls: g
            .url
            .iter()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect(),
        password: std::env::var("RLOCK_PASSWORD")
            .ok()
            .filter(|p| !p.is_empty()),
        connect_timeout: g.connect_timeout.0,
        cluster: g.cluster,
        sentinel: g.sentinel.clone(),
        min_replicas: g.min_replicas,
        tls: rlock::conn::Tls {
            ca: g.tls_ca.clone(),
            cert: g.tls_cert.clone(),
            key: g.tls_key.clone(),
        },
        index: rlock::conn::Index {
            keep: index_keep(std::env::var("RLOCK_INDEX_KEEP").ok().as_deref()),
            scan: false,
        },
    }
}

/// The request for a lock of `mode`, up to `limit` holders at once;
/// refused (a usage error) as [`rlock::RequestBuilder::build`] refuses it.
pub(crate) fn request(lock: &LockOpts, limit: u32, mode: Mode) -> Result<Request, rlock::Error> {
    Request::builder(lock.ttl.0)
        .limit(limit)
        .mode(mode)
        .min_hold(lock.min_hold.map_or(Duration::ZERO, |d| d.0))
        .supersede(lock.supersede)
        .priority(lock.priority)
        .wait(match (lock.no_wait, lock.wait) {
            (true, _) => Wait::No,
            (false, Some(d)) => Wait::For(d.0),
            (false, None) => Wait::Forever,
        })
        .build()
}

/// RLOCK_HELD: the locks enclosing `rlock exec`s hold, and their tokens.
pub(crate) fn held() -> Option<String> {
    std::env::var(HELD_ENV).ok()
}

/// RLOCK_TOKEN: the token the caller exported.
pub(crate) fn exported() -> Option<String> {
    std::env::var("RLOCK_TOKEN").ok()
}

/// The token to try re-entering `key` with (see `reentry_token`); used
/// only if it holds the lock, else the acquire takes a fresh token.
pub(crate) fn inherited(locker: &Locker, key: &str) -> anyhow::Result<Option<Token>> {
    Ok(rlock::exec::reentry_token(
        held().as_deref(),
        exported().as_deref(),
        &locker.name(key)?,
    ))
}

/// The token `release`, `renew` and `check` act with: --token, else the
/// one RLOCK_HELD records for the lock, else RLOCK_TOKEN (see
/// `rlock::exec::owner_token`).
pub(crate) fn owner_token(g: &Global, key: &str, flag: Option<&str>) -> anyhow::Result<Token> {
    Ok(rlock::exec::owner_token(
        flag,
        held().as_deref(),
        exported().as_deref(),
        &rlock::lock::LockName::new(&g.prefix, key)?,
    )?)
}

/// Shows on stderr whom we wait for (unless -q): see progress.rs. With
/// `-E 0` and stderr not a terminal (cron, CI), nothing either, as flock
/// prints nothing while it waits: a wait that then ends busy exits 0, and
/// a line on stderr would turn each such run into a cron mail. (On a
/// terminal the live line is erased when the wait ends.) `-v` still shows
/// it.
pub(crate) fn waiting(g: &Global) -> progress::Progress {
    use std::io::IsTerminal;
    let silent = g.busy_is_success && !g.verbose && !std::io::stderr().is_terminal();
    progress::Progress::new(g.quiet || silent, g.verbose)
}

/// `--max-hold D`: more than zero.
pub(crate) fn max_hold(
    d: Option<rlock::duration::Span>,
) -> Result<Option<std::time::Duration>, rlock::Error> {
    match d {
        Some(d) if d.0.is_zero() => Err(rlock::Error::invalid(
            "--max-hold must be more than 0 (it is how long the lock may be held)",
        )),
        d => Ok(d.map(|d| d.0)),
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::time::Duration;

    #[test]
    fn rlock_list_scan_is_1_or_0() {
        assert!(!super::list_scan(None).unwrap());
        assert!(!super::list_scan(Some(OsStr::new(""))).unwrap());
        assert!(!super::list_scan(Some(OsStr::new("0"))).unwrap());
        assert!(super::list_scan(Some(OsStr::new("1"))).unwrap());
        for bad in ["yes", "2", " 1"] {
            let e = super::list_scan(Some(OsStr::new(bad))).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("RLOCK_LIST_SCAN is {bad:?}; use 1 (scan) or 0")
            );
        }
    }

    #[test]
    fn rlock_index_keep_is_milliseconds_at_least_100() {
        assert_eq!(super::index_keep(None), Duration::from_secs(3600));
        assert_eq!(super::index_keep(Some("x")), Duration::from_secs(3600));
        assert_eq!(super::index_keep(Some("1000")), Duration::from_secs(1));
        assert_eq!(super::index_keep(Some("5")), Duration::from_millis(100));
    }

    /// The library reads no RLOCK_* variable: the binary's setup (this
    /// module) turns them into the configuration it gets. A call such as
    /// `env::var("RLOCK_X")`, or `env::var(C)` with `const C: &str =
    /// "RLOCK_X"`, anywhere in src/ but src/bin/, fails this test.
    #[test]
    fn the_library_reads_no_rlock_variable() {
        fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    if !p.ends_with("src/bin") {
                        files(&p, out);
                    }
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let mut paths = Vec::new();
        files(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut paths,
        );
        assert!(paths.len() > 50, "{paths:?}");
        let sources: Vec<(String, String)> = paths
            .iter()
            .map(|p| (p.display().to_string(), std::fs::read_to_string(p).unwrap()))
            .collect();
        // Constants naming an RLOCK_ variable (HELD_ENV...).
        let mut names: Vec<String> = Vec::new();
        for (_, text) in &sources {
            for line in text.lines() {
                let line = line.trim_start().trim_start_matches("pub ");
                if let Some(rest) = line.strip_prefix("const ")
                    && let Some((name, value)) = rest.split_once(": &str = ")
                    && value.starts_with("\"RLOCK_")
                {
                    names.push(name.to_string());
                }
            }
        }
        let mut reads = Vec::new();
        for (path, text) in &sources {
            for call in ["env::var(", "env::var_os(", "getenv("] {
                for (at, _) in text.match_indices(call) {
                    let arg = &text[at + call.len()..];
                    let arg = arg[..arg.find(')').unwrap_or(arg.len())].trim();
                    if arg.starts_with("\"RLOCK_")
                        || names
                            .iter()
                            .any(|n| arg == n || arg.ends_with(&format!("::{n}")))
                    {
                        reads.push(format!("{path}: {call}{arg})"));
                    }
                }
            }
        }
        assert!(reads.is_empty(), "the library reads {reads:?}");
    }
}
