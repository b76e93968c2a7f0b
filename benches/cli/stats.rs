//! Statistics over samples and the table printing every section uses.

use std::time::Duration;

pub(crate) fn sample(n: usize, mut f: impl FnMut() -> Duration) -> Vec<Duration> {
    (0..n).map(|_| f()).collect()
}

pub(crate) fn sorted_u64(s: &[u64]) -> Vec<u64> {
    let mut v = s.to_vec();
    v.sort_unstable();
    v
}

pub(crate) fn sorted(s: &[Duration]) -> Vec<Duration> {
    let mut v = s.to_vec();
    v.sort_unstable();
    v
}

pub(crate) fn median(s: &[Duration]) -> Duration {
    let v = sorted(s);
    match v.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

/// Nearest-rank 99th percentile.
pub(crate) fn p99(s: &[Duration]) -> Duration {
    let v = sorted(s);
    if v.is_empty() {
        return Duration::ZERO;
    }
    v[(v.len() * 99).div_ceil(100) - 1]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `["143", "143", "x"]` as `143 x2, x`.
pub(crate) fn dedup_counts(items: &[String]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for i in items {
        match counts.iter_mut().find(|(k, _)| k == i) {
            Some((_, n)) => *n += 1,
            None => counts.push((i, 1)),
        }
    }
    counts
        .iter()
        .map(|(k, n)| {
            if *n > 1 {
                format!("{k} x{n}")
            } else {
                k.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn section(title: &str) {
    println!();
    println!("{title}");
}
