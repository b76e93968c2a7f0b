//! The clock that lease validity is measured on.
//!
//! A lease ends on the server after its TTL of *real* time. `std::time::Instant`
//! is CLOCK_MONOTONIC on Linux, which stops while the machine is suspended or
//! a VM is paused: after a resume it would still call a lease valid that
//! expired on the server long ago. [`BootTime`] reads CLOCK_BOOTTIME, which is
//! monotonic too but keeps counting through a suspend, so a deadline passes
//! when it really has. The guard process arms a CLOCK_BOOTTIME timer with
//! the same values (see `hold::guard`), so it fires at once on resume.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A timespec clock_gettime(2) filled: for the clocks read here tv_sec is
/// never negative and tv_nsec is below 10^9, so neither conversion fails
/// (the fallbacks are for the type checker).
fn from_timespec(ts: &libc::timespec) -> Duration {
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// A point on CLOCK_BOOTTIME: time since boot, suspended time included.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BootTime(Duration);

impl BootTime {
    /// Now.
    pub fn now() -> BootTime {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer; CLOCK_BOOTTIME exists on every
        // Linux since 2.6.39, so the call cannot fail.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        BootTime(from_timespec(&ts))
    }

    /// Time since boot, for passing a deadline to another process.
    pub fn since_boot(self) -> Duration {
        self.0
    }

    /// The point `d` after boot (the inverse of [`BootTime::since_boot`]).
    pub fn from_since_boot(d: Duration) -> BootTime {
        BootTime(d)
    }

    /// How long from `earlier` to `self`; zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: BootTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// How long until `self`, from now; zero if it has passed.
    pub fn remaining(self) -> Duration {
        self.saturating_duration_since(BootTime::now())
    }

    /// How long since `self`; zero if it lies ahead.
    pub fn elapsed(self) -> Duration {
        BootTime::now().saturating_duration_since(self)
    }

    /// Has this point passed?
    pub fn passed(self) -> bool {
        BootTime::now() >= self
    }

    /// `self - d`, or boot itself if that would come before it.
    pub fn saturating_sub(self, d: Duration) -> BootTime {
        BootTime(self.0.saturating_sub(d))
    }
}

impl Add<Duration> for BootTime {
    type Output = BootTime;
    fn add(self, d: Duration) -> BootTime {
        BootTime(self.0.saturating_add(d))
    }
}

impl Sub<Duration> for BootTime {
    type Output = BootTime;
    fn sub(self, d: Duration) -> BootTime {
        self.saturating_sub(d)
    }
}

impl Sub for BootTime {
    type Output = Duration;
    fn sub(self, earlier: BootTime) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for BootTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BootTime({:?})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(clock: libc::clockid_t) -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out-pointer.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        from_timespec(&ts)
    }

    #[test]
    fn reads_boottime_not_monotonic() {
        // BOOTTIME >= MONOTONIC always, the difference being the time spent
        // suspended; /proc/uptime is BOOTTIME too, to 10 ms.
        let before = read(libc::CLOCK_BOOTTIME);
        let now = BootTime::now().since_boot();
        let after = read(libc::CLOCK_BOOTTIME);
        assert!(before <= now && now <= after);
        assert!(now >= read(libc::CLOCK_MONOTONIC).saturating_sub(Duration::from_millis(1)));
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let diff = (now.as_secs_f64() - uptime).abs();
        assert!(diff < 0.1, "BootTime {now:?} vs /proc/uptime {uptime}");
    }

    #[test]
    fn arithmetic_saturates() {
        let t = BootTime::from_since_boot(Duration::from_secs(5));
        assert_eq!(
            t - Duration::from_secs(10),
            BootTime::from_since_boot(Duration::ZERO)
        );
        assert_eq!((t + Duration::from_secs(1)) - t, Duration::from_secs(1));
        assert_eq!(t - (t + Duration::from_secs(1)), Duration::ZERO);
    }
}
