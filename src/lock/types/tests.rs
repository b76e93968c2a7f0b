//! The public types' bounds and the lease arithmetic.

use super::*;

#[test]
fn tokens_are_uuids_and_hidden_in_debug() {
    let t = Token::generate();
    assert_eq!(
        uuid::Uuid::parse_str(t.as_str()).unwrap().get_version_num(),
        4
    );
    assert_eq!(format!("{t:?}"), "Token(***)");
    assert!(Token::parse("nope").is_err());
    assert_eq!(Token::parse(t.as_str()).unwrap(), t);
}

#[test]
fn ttl_bounds() {
    assert!(check_ttl(Duration::ZERO).is_err());
    assert!(check_ttl(Duration::from_secs(30)).is_ok());
    assert!(check_ttl(MAX_TTL + Duration::from_secs(1)).is_err());
    assert_eq!(
        check_ttl(Duration::from_micros(49_900))
            .unwrap_err()
            .to_string(),
        "TTL 49ms is out of range: use 50ms to 7days"
    );
}

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

#[test]
fn a_request_is_refused_in_the_librarys_terms() {
    let refused = |r: &Request| match r.check() {
        Err(Error::Usage(msg)) => msg,
        other => panic!("not refused: {other:?}"),
    };
    let mut r = Request::new(Duration::from_secs(30));
    assert!(r.check().is_ok());
    r.limit = 0;
    assert_eq!(refused(&r), "Request::limit must be at least 1");
    r.limit = 2;
    r.mode = Mode::Read;
    assert_eq!(
        refused(&r),
        "read-write locks take no Request::limit (it must be 1)"
    );
    r.limit = 1;
    r.supersede = true;
    for wait in [Wait::No, Wait::For(Duration::ZERO)] {
        r.wait = wait;
        assert!(
            refused(&r).starts_with("Request::supersede needs a wait:"),
            "{wait:?}"
        );
    }
    r.wait = Wait::For(Duration::from_secs(1));
    assert!(r.check().is_ok());
    r.min_hold = MAX_TTL + Duration::from_secs(1);
    assert_eq!(
        refused(&r),
        "Request::min_hold 7days 1s is too long: at most 7days"
    );
    r.min_hold = Duration::ZERO;
    for p in [-MAX_PRIORITY, 0, MAX_PRIORITY] {
        r.priority = p;
        assert!(r.check().is_ok(), "{p}");
    }
    for p in [-MAX_PRIORITY - 1, MAX_PRIORITY + 1, i32::MIN] {
        r.priority = p;
        assert!(
            refused(&r).starts_with(&format!("Request::priority {p} is out of range")),
            "{p}"
        );
    }
}

#[test]
fn ci_job_names_the_job_the_environment_names() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(ci_job(&env(&[])), None);
    assert_eq!(
        ci_job(&env(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_REPOSITORY", "acme/site"),
            ("GITHUB_RUN_ID", "42"),
            ("GITHUB_JOB", "deploy"),
        ])),
        Some("github acme/site run 42 job deploy".into())
    );
    assert_eq!(
        ci_job(&env(&[
            ("GITLAB_CI", "true"),
            ("CI_PROJECT_PATH", "g/p"),
            ("CI_JOB_ID", "7"),
        ])),
        Some("gitlab g/p job 7".into())
    );
    assert_eq!(
        ci_job(&env(&[
            ("JENKINS_URL", "https://ci/"),
            ("JOB_NAME", "nightly"),
            ("BUILD_NUMBER", "3"),
        ])),
        Some("jenkins nightly build 3".into())
    );
    assert_eq!(
        ci_job(&env(&[
            ("BUILDKITE", "true"),
            ("BUILDKITE_PIPELINE_SLUG", "app"),
            ("BUILDKITE_BUILD_NUMBER", "9"),
            ("BUILDKITE_JOB_ID", "j"),
        ])),
        Some("buildkite app build 9 job j".into())
    );
    // Missing parts are left out; a URL's password and control characters
    // never show.
    assert_eq!(
        ci_job(&env(&[
            ("JENKINS_URL", "x"),
            ("JOB_NAME", "a\nhttps://u:pw@h/x"),
        ])),
        Some("jenkins a https://***@h/x".into())
    );
}

#[test]
fn holder_info_without_user_or_ci_still_decodes() {
    let h: HolderInfo = serde_json::from_str(r#"{"host":"h","pid":1}"#).unwrap();
    assert_eq!((h.user.as_str(), h.ci.as_deref()), ("", None));
    let s = serde_json::to_string(&HolderInfo {
        user: "u".into(),
        ..h
    })
    .unwrap();
    assert_eq!(s, r#"{"host":"h","pid":1,"user":"u"}"#);
}

#[test]
fn history_limits_are_checked() {
    assert!(HistoryLimits::default().check().is_ok());
    let bad = |events, secs| HistoryLimits {
        events,
        retention: Duration::from_secs(secs),
    };
    assert!(bad(0, 1).check().is_ok());
    assert!(bad(MAX_HISTORY_EVENTS + 1, 60).check().is_err());
    assert!(bad(1, 0).check().is_err());
    assert!(bad(1, 367 * 86_400).check().is_err());
}
