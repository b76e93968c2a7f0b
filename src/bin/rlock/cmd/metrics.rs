//! `metrics [PATTERN]`: the locks in use in Prometheus' text exposition
//! format (0.0.4), for node_exporter's textfile collector or a scraper.

use std::fmt::Write as _;
use std::time::Duration;

use rlock::Locker;
use rlock::exit_code;
use rlock::lock::LockView;

use crate::cli::{Global, Metrics};
use crate::out::print;
use crate::setup::connect_listing;

/// `metrics [PATTERN]`: one sample per lock in use and family, on stdout,
/// in a file (`--textfile`) or over HTTP (`--listen`).
pub(crate) fn metrics(g: &Global, m: &Metrics) -> anyhow::Result<u8> {
    // Bad input is refused before connecting.
    rlock::lock::overview::check_pattern(&m.pattern)?;
    if let Some(addr) = &m.listen {
        return super::exporter::listen(g, m, addr);
    }
    let temp = m
        .textfile
        .as_deref()
        .map(super::exporter::textfile_temp)
        .transpose()?;
    let mut locker = connect_listing(g)?;
    let text = render(&mut locker, m)?;
    match (&m.textfile, temp) {
        (Some(path), Some(temp)) => super::exporter::write_textfile(path, &temp, &text)?,
        _ => print(&text)?,
    }
    Ok(exit_code::OK)
}

/// The exposition of the locks `m` selects, read from Redis now: what
/// stdout, `--textfile` and each `--listen` scrape carry.
pub(crate) fn render(locker: &mut Locker, m: &Metrics) -> rlock::Result<String> {
    let mut views = locker.overview(&m.pattern)?;
    views.sort_by(|a, b| a.status.key.cmp(&b.status.key));
    Ok(exposition(&views))
}

type Value = fn(&LockView) -> String;

/// The families: name, type, help, the value of one lock.
const FAMILIES: [(&str, &str, &str, Value); 9] = [
    (
        "rlock_lock_holders",
        "gauge",
        "Holders of the lock now.",
        |v| v.status.holders.len().to_string(),
    ),
    (
        "rlock_lock_waiters",
        "gauge",
        "Acquires queued for the lock now.",
        |v| v.status.waiters.to_string(),
    ),
    (
        "rlock_lock_oldest_wait_seconds",
        "gauge",
        "How long the first waiter still queued has waited (0: nobody waits).",
        |v| seconds(v.oldest_wait.unwrap_or_default()),
    ),
    (
        "rlock_lock_held_seconds",
        "gauge",
        "How long the longest current hold has lasted (0: not held).",
        |v| seconds(v.held_for()),
    ),
    (
        "rlock_lock_grants_total",
        "counter",
        "Holds granted, as the lock's history counts them.",
        |v| v.counters.grants.to_string(),
    ),
    (
        "rlock_lock_losses_total",
        "counter",
        "Holds an exec or keeper found lost.",
        |v| v.counters.losses.to_string(),
    ),
    (
        "rlock_lock_timeouts_total",
        "counter",
        "Waiters that gave up.",
        |v| v.counters.timeouts.to_string(),
    ),
    (
        "rlock_lock_breaks_total",
        "counter",
        "Holds ended by rlock break.",
        |v| v.counters.breaks.to_string(),
    ),
    (
        "rlock_lock_overruns_total",
        "counter",
        "Holds stopped by --max-hold.",
        |v| v.counters.overruns.to_string(),
    ),
];

/// The exposition of `views`: each family once, HELP and TYPE first, then
/// one sample per lock.
pub(crate) fn exposition(views: &[LockView]) -> String {
    let mut out = String::new();
    for (name, kind, help, value) in FAMILIES {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for v in views {
            let _ = writeln!(
                out,
                "{name}{{lock=\"{}\"}} {}",
                label(&v.status.key),
                value(v)
            );
        }
    }
    out
}

/// A label value as the text format escapes it: backslash, double quote
/// and line feed.
pub(crate) fn label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(label("plain-name.1"), "plain-name.1");
    }

    #[test]
    fn every_family_has_help_and_type_once_without_locks() {
        let out = exposition(&[]);
        for (name, ..) in FAMILIES {
            assert_eq!(out.matches(&format!("# TYPE {name} ")).count(), 1);
            assert_eq!(out.matches(&format!("# HELP {name} ")).count(), 1);
        }
    }
}
