//! `metrics [PATTERN]`: every lock in use or with history kept, in
//! Prometheus' text exposition format (0.0.4), for node_exporter's textfile
//! collector or a scraper; `--group PATTERN` folds the locks a glob matches
//! into one series per family.

use std::fmt::Write as _;
use std::time::Duration;

use rlock::Locker;
use rlock::exit_code;
use rlock::lock::LockView;
use rlock::lock::overview::glob_matches;

use crate::cli::{Global, Metrics};
use crate::out::print;
use crate::setup::connect_listing;

/// `metrics [PATTERN] [--group G]...`: one sample per lock (or group)
/// and family, on stdout, in a file (`--textfile`) or over HTTP
/// (`--listen`).
pub(crate) fn metrics(g: &Global, m: &Metrics) -> anyhow::Result<u8> {
    // Bad input is refused before connecting.
    rlock::lock::overview::check_pattern(&m.pattern)?;
    for p in &m.groups {
        rlock::lock::overview::check_pattern(p)?;
    }
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
    let views = locker.known(&m.pattern)?;
    Ok(exposition(&fold(rows(&views), &m.groups)))
}

/// One series: its `lock` label and a value per family (in [`FAMILIES`]'
/// order; None: no sample).
pub(crate) struct Series {
    lock: String,
    values: Vec<Option<f64>>,
}

/// How a family's values fold into a group's.
#[derive(Clone, Copy)]
enum Fold {
    Sum,
    Max,
    Min,
}

type Value = fn(&LockView) -> Option<f64>;

fn secs(d: Duration) -> Option<f64> {
    Some(d.as_secs_f64())
}

fn count(n: u64) -> Option<f64> {
    Some(n as f64)
}

/// A family: name, type, help, value, fold, value when none.
type Family = (
    &'static str,
    &'static str,
    &'static str,
    Value,
    Fold,
    Option<f64>,
);

/// The families: name, type, help, the value of one lock, how a group
/// folds them, and the value of a series where none of its locks has one
/// (None: no sample).
const FAMILIES: [Family; 15] = [
    (
        "rlock_lock_holders",
        "gauge",
        "Holders of the lock now.",
        |v| count(v.status.holders.len() as u64),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_waiters",
        "gauge",
        "Acquires queued for the lock now.",
        |v| count(v.status.waiters),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_oldest_wait_seconds",
        "gauge",
        "How long the first waiter still queued has waited (0: nobody waits).",
        |v| secs(v.oldest_wait.unwrap_or_default()),
        Fold::Max,
        None,
    ),
    (
        "rlock_lock_held_seconds",
        "gauge",
        "How long the longest current hold has lasted (0: not held).",
        |v| secs(v.held_for()),
        Fold::Max,
        None,
    ),
    (
        "rlock_lock_lease_left_seconds",
        "gauge",
        "Lease time left of the current hold, the shortest if several (0: not held).",
        |v| (!v.status.holders.is_empty()).then(|| v.lease_left().as_secs_f64()),
        Fold::Min,
        Some(0.0),
    ),
    (
        "rlock_lock_renewed_seconds_ago",
        "gauge",
        "Since the last renewal (or the grant) of the current hold, the stalest if several (no sample: not held).",
        |v| v.renewed_ago().map(|d| d.as_secs_f64()),
        Fold::Max,
        None,
    ),
    (
        "rlock_lock_limit",
        "gauge",
        "Holders the lock allows: 1 for a mutex, N for a semaphore (no sample: idle, or a read-write lock).",
        |v| (v.status.limit > 0).then_some(v.status.limit as f64),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_grants_total",
        "counter",
        "Holds granted, as the lock's history counts them.",
        |v| count(v.counters.grants),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_released_total",
        "counter",
        "Holds released by their holder.",
        |v| count(v.counters.released),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_expired_total",
        "counter",
        "Leases that ran out with nobody releasing them (a crashed or stopped holder).",
        |v| count(v.counters.expired),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_losses_total",
        "counter",
        "Holds an exec or keeper found lost.",
        |v| count(v.counters.losses),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_timeouts_total",
        "counter",
        "Waiters that gave up.",
        |v| count(v.counters.timeouts),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_superseded_total",
        "counter",
        "--supersede waiters replaced by a newer one.",
        |v| count(v.counters.superseded),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_breaks_total",
        "counter",
        "Holds ended by rlock break.",
        |v| count(v.counters.breaks),
        Fold::Sum,
        None,
    ),
    (
        "rlock_lock_overruns_total",
        "counter",
        "Holds stopped by --max-hold.",
        |v| count(v.counters.overruns),
        Fold::Sum,
        None,
    ),
];

/// Each view's series: its name and its value in each family.
pub(crate) fn rows(views: &[LockView]) -> Vec<Series> {
    views
        .iter()
        .map(|v| Series {
            lock: v.status.key.clone(),
            values: FAMILIES.iter().map(|f| (f.3)(v)).collect(),
        })
        .collect()
}

/// The locks' series `rows`, sorted by label: a lock whose name one of
/// `groups` matches (the first that does) folds into that pattern's series
/// (counters and holders, waiters, limits summed; the oldest wait, held
/// time and renewal age the largest; the lease left the shortest among
/// the held); the others stay a series each.
pub(crate) fn fold(rows: Vec<Series>, groups: &[String]) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    let mut folded: Vec<Option<usize>> = vec![None; groups.len()];
    for Series { lock, values } in rows {
        let Some(gi) = groups.iter().position(|p| glob_matches(p, &lock)) else {
            out.push(Series { lock, values });
            continue;
        };
        let Some(at) = folded[gi] else {
            folded[gi] = Some(out.len());
            out.push(Series {
                lock: groups[gi].clone(),
                values,
            });
            continue;
        };
        for ((acc, x), f) in out[at].values.iter_mut().zip(values).zip(FAMILIES.iter()) {
            *acc = match (*acc, x) {
                (Some(a), Some(b)) => Some(match f.4 {
                    Fold::Sum => a + b,
                    Fold::Max => a.max(b),
                    Fold::Min => a.min(b),
                }),
                (a, b) => a.or(b),
            };
        }
    }
    out.sort_by(|a, b| a.lock.cmp(&b.lock));
    out
}

/// The exposition of `series`: each family once, HELP and TYPE first, then
/// one sample per series that has a value.
pub(crate) fn exposition(series: &[Series]) -> String {
    let mut out = String::new();
    for (i, (name, kind, help, _, _, none)) in FAMILIES.iter().enumerate() {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for s in series {
            let Some(x) = s.values[i].or(*none) else {
                continue;
            };
            let value = if name.contains("_seconds") {
                format!("{x:.3}")
            } else {
                format!("{x}")
            };
            let _ = writeln!(out, "{name}{{lock=\"{}\"}} {value}", label(&s.lock));
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

    /// A series with the given values by family name (others None).
    fn series(lock: &str, values: &[(&str, f64)]) -> Series {
        Series {
            lock: lock.into(),
            values: FAMILIES
                .iter()
                .map(|f| values.iter().find(|(n, _)| *n == f.0).map(|(_, x)| *x))
                .collect(),
        }
    }

    fn sample<'a>(out: &'a str, family: &str, lock: &str) -> Option<&'a str> {
        let head = format!("{family}{{lock=\"{lock}\"}} ");
        out.lines().find_map(|l| l.strip_prefix(head.as_str()))
    }

    #[test]
    fn groups_fold_counters_summed_gauges_by_kind() {
        let held = |lock, grants, waiters, held, left| {
            series(
                lock,
                &[
                    ("rlock_lock_holders", 1.0),
                    ("rlock_lock_waiters", waiters),
                    ("rlock_lock_grants_total", grants),
                    ("rlock_lock_held_seconds", held),
                    ("rlock_lock_renewed_seconds_ago", held),
                    ("rlock_lock_lease_left_seconds", left),
                    ("rlock_lock_limit", 1.0),
                ],
            )
        };
        let idle = |lock, grants| {
            series(
                lock,
                &[
                    ("rlock_lock_holders", 0.0),
                    ("rlock_lock_grants_total", grants),
                    ("rlock_lock_held_seconds", 0.0),
                ],
            )
        };
        let views = || {
            vec![
                held("job:1", 5.0, 2.0, 10.0, 20.0),
                held("job:2", 7.0, 1.0, 30.0, 5.0),
                idle("job:3", 4.0),
                idle("deploy", 3.0),
            ]
        };
        let out = exposition(&fold(views(), &["job:*".to_string()]));
        assert_eq!(sample(&out, "rlock_lock_grants_total", "job:*"), Some("16"));
        assert_eq!(sample(&out, "rlock_lock_holders", "job:*"), Some("2"));
        assert_eq!(sample(&out, "rlock_lock_waiters", "job:*"), Some("3"));
        assert_eq!(
            sample(&out, "rlock_lock_held_seconds", "job:*"),
            Some("30.000")
        );
        // The shortest lease left among the held, not the idle member's 0.
        assert_eq!(
            sample(&out, "rlock_lock_lease_left_seconds", "job:*"),
            Some("5.000")
        );
        assert_eq!(
            sample(&out, "rlock_lock_renewed_seconds_ago", "job:*"),
            Some("30.000")
        );
        assert_eq!(sample(&out, "rlock_lock_grants_total", "job:1"), None);
        // Unmatched locks keep their own series; an idle one has counters,
        // a zero lease left, and no renewal age or limit.
        assert_eq!(sample(&out, "rlock_lock_grants_total", "deploy"), Some("3"));
        assert_eq!(
            sample(&out, "rlock_lock_lease_left_seconds", "deploy"),
            Some("0.000")
        );
        assert_eq!(
            sample(&out, "rlock_lock_renewed_seconds_ago", "deploy"),
            None
        );
        assert_eq!(sample(&out, "rlock_lock_limit", "deploy"), None);
        // Without groups, one series per lock.
        let out = exposition(&fold(views(), &[]));
        assert_eq!(sample(&out, "rlock_lock_grants_total", "job:2"), Some("7"));
        assert_eq!(sample(&out, "rlock_lock_limit", "job:2"), Some("1"));
    }
}
