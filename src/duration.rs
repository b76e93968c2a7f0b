//! Duration flags: humantime strings that must carry a unit (`30s`, `5m`,
//! `1h30m`). A bare `30` is refused: seconds or milliseconds is a guess
//! nobody should have to make in a cron line. [`human`] writes durations
//! back in messages.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Longest duration accepted anywhere, so deadlines computed from it never
/// overflow.
pub const MAX: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A duration parsed from a humantime string with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span(pub Duration);

impl FromStr for Span {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() {
            return Err("empty duration; use e.g. 30s, 5m or 1h30m".into());
        }
        if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(format!(
                "duration {t:?} has no unit (seconds or milliseconds? the PX/EX trap); \
                 write e.g. {t}s or {t}ms"
            ));
        }
        let d = humantime::parse_duration(t)
            .map_err(|e| format!("invalid duration {t:?}: {e}; use e.g. 30s, 5m or 1h30m"))?;
        if d > MAX {
            return Err(format!("duration {t:?} is too long; at most 100 years"));
        }
        Ok(Span(d))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

/// Whole milliseconds in `d`, for Redis arguments and JSON fields, which
/// take integers: saturates at `u64::MAX` (585 million years) instead of
/// wrapping, where `d.as_millis() as u64` would wrap.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whole nanoseconds in `d`, saturating at `u64::MAX` (584 years).
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A timeout for poll(2): whole milliseconds, rounded up (waking a moment
/// early would only spin), saturating at `i32::MAX` (24.8 days; the
/// caller's loop looks again).
pub(crate) fn poll_ms(d: Duration) -> libc::c_int {
    libc::c_int::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(libc::c_int::MAX)
}

/// A duration as people read it in a message: under a second in whole
/// milliseconds (`250ms`, `0ms`; truncated, so `49.9ms` is `49ms` and never
/// looks like a bound it is under), under a minute in seconds with one
/// decimal, rounded (`6.7s`; a whole number drops the `.0`: `1s`, `30s`),
/// and from a minute on in whole seconds, rounded, as humantime writes them
/// (`1m 5s`, `2h`, `7days`). Not [`humantime::format_duration`], whose
/// `6s 666ms 666us 667ns` is more than anyone wants to read.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let tenths = (d.as_nanos() + 50_000_000) / 100_000_000;
    if tenths < 600 {
        return match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        };
    }
    let secs = d
        .as_secs()
        .saturating_add(u64::from(d.subsec_nanos() >= 500_000_000));
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// A wait, as flock(1), sleep(1) and timeout(1) read it: a bare number
/// (fractions allowed) is seconds, `0` means do not wait; a value with a
/// unit (`30s`, `5m`) works too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seconds(pub Duration);

impl FromStr for Seconds {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        // A number as strtod(3) reads it for flock (`5`, `0.5`, `.5`,
        // `1e3`), but no sign, infinity or NaN; anything else needs a unit.
        let numeric = t.starts_with(|c: char| c.is_ascii_digit() || c == '.')
            && t.chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E'));
        if !numeric {
            return t.parse::<Span>().map(|s| Seconds(s.0));
        }
        let secs: f64 = t
            .parse()
            .map_err(|_| format!("invalid number of seconds {t:?}"))?;
        if !secs.is_finite() || secs > MAX.as_secs_f64() {
            return Err(format!("wait {t:?} is too long; at most 100 years"));
        }
        Ok(Seconds(Duration::from_secs_f64(secs)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        let ms = Duration::from_millis;
        let ns = Duration::from_nanos;
        assert_eq!(human(Duration::ZERO), "0ms");
        assert_eq!(human(ns(999_999)), "0ms");
        assert_eq!(human(ms(250)), "250ms");
        assert_eq!(human(ns(49_900_000)), "49ms");
        assert_eq!(human(ns(999_999_999)), "999ms");
        assert_eq!(human(ms(1000)), "1s");
        assert_eq!(human(ms(1040)), "1s");
        assert_eq!(human(ms(1050)), "1.1s");
        assert_eq!(human(ns(6_666_666_667)), "6.7s");
        assert_eq!(human(ms(30_000)), "30s");
        assert_eq!(human(ms(59_940)), "59.9s");
        // Rounds up to a minute: written as one, not as 60s.
        assert_eq!(human(ms(59_950)), "1m");
        assert_eq!(human(ms(60_000)), "1m");
        assert_eq!(human(ms(65_499)), "1m 5s");
        assert_eq!(human(ms(65_500)), "1m 6s");
        assert_eq!(human(Duration::from_secs(7200)), "2h");
        assert_eq!(human(Duration::from_secs(7 * 24 * 3600)), "7days");
        assert_eq!(human(MAX), humantime::format_duration(MAX).to_string());
        assert!(!human(Duration::MAX).is_empty());
    }

    #[test]
    fn waits_take_bare_seconds_like_flock() {
        let w = |s: &str| s.parse::<Seconds>().map(|w| w.0);
        assert_eq!(w("5"), Ok(Duration::from_secs(5)));
        assert_eq!(w("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(w("0"), Ok(Duration::ZERO));
        assert_eq!(w("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(w("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(w(".5"), Ok(Duration::from_millis(500)));
        assert_eq!(w("1e3"), Ok(Duration::from_secs(1000)));
        for bad in [
            "",
            ".",
            "1.2.3",
            "-1",
            "soon",
            "99999999999999",
            "1e400",
            "e3",
        ] {
            assert!(w(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn needs_a_unit() {
        assert!("30".parse::<Span>().is_err());
        assert!("".parse::<Span>().is_err());
        assert!("soon".parse::<Span>().is_err());
        assert_eq!("30s".parse::<Span>().unwrap().0, Duration::from_secs(30));
        assert_eq!(
            "1h30m".parse::<Span>().unwrap().0,
            Duration::from_secs(5400)
        );
        assert_eq!(
            "250ms".parse::<Span>().unwrap().0,
            Duration::from_millis(250)
        );
    }
}
