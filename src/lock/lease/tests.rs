//! The lease arithmetic: validity, renewals, waiting on time.

use super::*;
use crate::lock::request::{MAX_TTL, MIN_TTL};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn at(s: u64) -> BootTime {
    BootTime::from_since_boot(Duration::from_secs(s))
}

#[test]
fn drift_is_one_percent_plus_two_ms() {
    assert_eq!(drift(Duration::from_secs(30)), ms(302));
    assert_eq!(drift(Duration::from_secs(1)), ms(12));
    assert_eq!(drift(MIN_TTL), Duration::from_micros(2500));
    assert_eq!(drift(MAX_TTL), Duration::from_secs(6048) + ms(2));
}

#[test]
fn a_lease_is_valid_until_its_ttl_less_drift_after_the_send() {
    assert_eq!(
        valid_until(at(100), Duration::from_secs(30)),
        at(100) + ms(29_698)
    );
    assert_eq!(
        valid_until(at(100), MIN_TTL),
        at(100) + Duration::from_micros(47_500)
    );
    // Shorter than its drift: not valid at all (saturates at the send).
    assert_eq!(valid_until(at(100), ms(1)), at(100));
}

#[test]
fn a_grant_counts_its_validity_from_the_send() {
    let token = Token::generate();
    let lease = Lease::granted("k", token.clone(), 7, 2, Duration::from_secs(10), at(50));
    assert_eq!((lease.key.as_str(), lease.fence, lease.count), ("k", 7, 2));
    assert_eq!(lease.token, token);
    assert_eq!(lease.ttl, Duration::from_secs(10));
    assert_eq!(lease.valid_until, at(50) + ms(9898));
}

#[test]
fn renewals_come_every_third_of_the_ttl_from_the_send() {
    let ttl = Duration::from_secs(30);
    let s = RenewalSchedule::new(valid_until(at(100), ttl), ttl);
    assert_eq!((s.every, s.first), (Duration::from_secs(10), at(110)));
    assert_eq!(s.retry, ms(500));
    // A short lease: retries no faster than every 20 ms.
    let s = RenewalSchedule::new(valid_until(at(100), MIN_TTL), MIN_TTL);
    assert_eq!(
        (s.every, s.retry),
        (Duration::from_nanos(16_666_666), ms(20))
    );
    assert_eq!(s.first, at(100) + Duration::from_nanos(16_666_666));
}

#[test]
fn backoff_doubles_from_100_to_800_ms() {
    let b: Vec<Duration> = (0..6).map(backoff).collect();
    assert_eq!(b, [ms(100), ms(100), ms(200), ms(400), ms(800), ms(800)]);
}

#[test]
fn waiters_check_in_well_within_their_lease() {
    assert_eq!(waiter_lease(Duration::from_secs(30)), WAITER_LEASE);
    assert_eq!(waiter_lease(Duration::from_secs(1)), Duration::from_secs(1));
    // HEARTBEAT (5 s) comes before 2/5 of the 15 s waiter lease (6 s).
    assert_eq!(heartbeat(Duration::from_secs(30)), HEARTBEAT);
    assert_eq!(heartbeat(MAX_TTL), HEARTBEAT);
    assert_eq!(heartbeat(Duration::from_secs(10)), ms(4000));
    assert_eq!(heartbeat(Duration::from_secs(1)), ms(400));
    assert_eq!(heartbeat(MIN_TTL), ms(20));
}
