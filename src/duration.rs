//! Duration flags: humantime strings that must carry a unit (`30s`, `5m`,
//! `1h30m`). A bare `30` is refused: seconds or milliseconds is a guess
//! nobody should have to make in a cron line.

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
                "duration {t:?} has no unit; write e.g. {t}s or {t}ms"
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

#[cfg(test)]
mod tests {
    use super::*;

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
