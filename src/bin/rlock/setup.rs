//! What the flags and the environment make of a connection, a request, a
//! token, and of the wait's display.

use rlock::exec::HELD_ENV;
use rlock::{ConnectOptions, Locker, Request, Token, Wait};

use crate::cli::{Global, LockOpts};
use crate::progress;

pub(crate) fn connect(g: &Global) -> anyhow::Result<Locker> {
    let limits = history(g);
    // Checked before connecting: a bad value writes nothing.
    limits.check()?;
    let mut locker = Locker::connect(&options(g), &g.prefix)?;
    locker.set_history(limits)?;
    Ok(locker)
}

/// How much history each lock keeps (--history-events, --history-retention).
pub(crate) fn history(g: &Global) -> rlock::HistoryLimits {
    rlock::HistoryLimits {
        events: g.history_events,
        retention: g.history_retention.0,
    }
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
    }
}

pub(crate) fn request(lock: &LockOpts) -> Request {
    let mut req = Request::new(lock.ttl.0);
    req.min_hold = lock.min_hold.map_or(std::time::Duration::ZERO, |d| d.0);
    req.supersede = lock.supersede;
    req.priority = lock.priority;
    req.wait = match (lock.no_wait, lock.wait) {
        (true, _) => Wait::No,
        (false, Some(d)) => Wait::For(d.0),
        (false, None) => Wait::Forever,
    };
    req
}

/// The token to try re-entering `key` with (see `reentry_token`); used
/// only if it holds the lock, else the acquire takes a fresh token.
pub(crate) fn inherited(locker: &Locker, key: &str) -> anyhow::Result<Option<Token>> {
    Ok(rlock::exec::reentry_token(
        std::env::var(HELD_ENV).ok().as_deref(),
        std::env::var("RLOCK_TOKEN").ok().as_deref(),
        &locker.name(key)?,
    ))
}

/// The token `release`, `renew` and `check` act with: --token, else the
/// one RLOCK_HELD records for the lock, else RLOCK_TOKEN (see
/// `rlock::exec::owner_token`).
pub(crate) fn owner_token(g: &Global, key: &str, flag: Option<&str>) -> anyhow::Result<Token> {
    Ok(rlock::exec::owner_token(
        flag,
        std::env::var(HELD_ENV).ok().as_deref(),
        std::env::var("RLOCK_TOKEN").ok().as_deref(),
        &rlock::lock::LockName::new(&g.prefix, key)?,
    )?)
}

/// `-E 0` was given (see `main`).
pub(crate) static BUSY_IS_SUCCESS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Shows on stderr whom we wait for (unless -q): see progress.rs. With
/// `-E 0` and stderr not a terminal (cron, CI), nothing either, as flock
/// prints nothing while it waits: a wait that then ends busy exits 0, and
/// a line on stderr would turn each such run into a cron mail. (On a
/// terminal the live line is erased when the wait ends.) `-v` still shows
/// it.
pub(crate) fn waiting(g: &Global) -> progress::Progress {
    use std::io::IsTerminal;
    let silent = BUSY_IS_SUCCESS.load(std::sync::atomic::Ordering::Relaxed)
        && !g.verbose
        && !std::io::stderr().is_terminal();
    progress::Progress::new(g.quiet || silent, g.verbose)
}

/// `--max-hold D`: more than zero.
pub(crate) fn max_hold(
    d: Option<rlock::duration::Span>,
) -> Result<Option<std::time::Duration>, rlock::Error> {
    match d {
        Some(d) if d.0.is_zero() => Err(rlock::Error::Usage(
            "--max-hold must be more than 0 (it is how long the lock may be held)".into(),
        )),
        d => Ok(d.map(|d| d.0)),
    }
}
