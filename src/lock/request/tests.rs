//! The bounds a request is checked against, and who asks.

use super::*;
use crate::error::Part;

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

#[test]
fn a_renewal_is_made_only_with_a_ttl_in_range() {
    assert!(Renewal::new(MIN_TTL - Duration::from_millis(1)).is_err());
    assert!(Renewal::new(MAX_TTL + Duration::from_secs(1)).is_err());
    let r = Renewal::new(Duration::from_secs(30)).unwrap();
    assert_eq!((r.ttl(), r.cmd_pid()), (Duration::from_secs(30), None));
    assert_eq!(r.noted(Some(7)).cmd_pid(), Some(7));
    assert_eq!(r.noted(Some(7)).ttl(), r.ttl());
}

#[test]
fn a_request_is_refused_in_the_librarys_terms() {
    let refused = |b: RequestBuilder| match b.build() {
        Err(Error::Invalid(msg)) => msg,
        other => panic!("not refused: {other:?}"),
    };
    let b = Request::builder(Duration::from_secs(30));
    assert!(b.clone().build().is_ok());
    assert!(Request::new(Duration::from_secs(30)).is_ok());
    for ttl in [
        Duration::ZERO,
        MIN_TTL - Duration::from_millis(1),
        MAX_TTL + Duration::from_secs(1),
    ] {
        let m = refused(b.clone().ttl(ttl)).to_string();
        assert!(m.starts_with("TTL ") && m.contains("out of range"), "{m}");
        assert!(Request::new(ttl).is_err(), "{ttl:?}");
    }
    assert!(b.clone().ttl(MIN_TTL).build().is_ok());
    assert!(b.clone().ttl(MAX_TTL).build().is_ok());
    assert_eq!(
        refused(b.clone().limit(0)),
        msg![Setting::Limit, " must be at least 1"]
    );
    assert_eq!(
        refused(b.clone().limit(0)).to_string(),
        "Request::limit must be at least 1"
    );
    for mode in [Mode::Read, Mode::Write] {
        assert_eq!(
            refused(b.clone().limit(2).mode(mode)),
            msg![
                "read-write locks take no ",
                Setting::Limit,
                " (it must be 1)"
            ]
        );
        assert!(b.clone().mode(mode).build().is_ok());
    }
    assert!(b.clone().limit(2).build().is_ok());
    for wait in [Wait::No, Wait::For(Duration::ZERO)] {
        let m = refused(b.clone().supersede(true).wait(wait));
        assert_eq!(m.0[0], Part::Setting(Setting::Supersede), "{wait:?}");
        assert!(m.0.contains(&Part::Setting(Setting::WaitNo)), "{m:?}");
        assert!(m.0.contains(&Part::Setting(Setting::WaitZero)), "{m:?}");
    }
    for wait in [Wait::For(Duration::from_secs(1)), Wait::Forever] {
        assert!(b.clone().supersede(true).wait(wait).build().is_ok());
    }
    assert_eq!(
        refused(b.clone().min_hold(MAX_TTL + Duration::from_secs(1))),
        msg![Setting::MinHold, " 7days 1s is too long: at most 7days"]
    );
    assert!(b.clone().min_hold(MAX_TTL).build().is_ok());
    for p in [-MAX_PRIORITY, 0, MAX_PRIORITY] {
        assert!(b.clone().priority(p).build().is_ok(), "{p}");
    }
    for p in [-MAX_PRIORITY - 1, MAX_PRIORITY + 1, i32::MIN] {
        let m = refused(b.clone().priority(p)).to_string();
        assert!(
            m.starts_with(&format!("Request::priority {p} is out of range")),
            "{m}"
        );
    }
}

#[test]
fn a_built_request_reads_back_what_was_set() {
    let token = Token::generate();
    let info = HolderInfo {
        host: "h".into(),
        pid: 7,
        ..HolderInfo::default()
    };
    let r = Request::builder(Duration::from_secs(1))
        .ttl(Duration::from_secs(30))
        .mode(Mode::Exclusive)
        .limit(3)
        .wait(Wait::For(Duration::from_secs(5)))
        .reenter(Some(token.clone()))
        .info(info.clone())
        .min_hold(Duration::from_secs(2))
        .supersede(true)
        .priority(-4)
        .build()
        .unwrap();
    assert_eq!(r.ttl(), Duration::from_secs(30));
    assert_eq!((r.mode(), r.limit()), (Mode::Exclusive, 3));
    assert_eq!(r.wait(), Wait::For(Duration::from_secs(5)));
    assert_eq!(r.reenter(), Some(&token));
    assert_eq!(r.info(), &info);
    assert_eq!(r.min_hold(), Duration::from_secs(2));
    assert_eq!((r.supersede(), r.priority()), (true, -4));
    // Built again from its settings, it is the same request.
    let again = r.to_builder().build().unwrap();
    assert_eq!(format!("{again:?}"), format!("{r:?}"));
    // The defaults: exclusive, one holder, waiting, this process.
    let d = Request::new(Duration::from_secs(30)).unwrap();
    assert_eq!(
        (d.mode(), d.limit(), d.wait()),
        (Mode::Exclusive, 1, Wait::Forever)
    );
    assert_eq!((d.reenter(), d.min_hold()), (None, Duration::ZERO));
    assert_eq!((d.supersede(), d.priority()), (false, 0));
    assert_eq!(d.info().pid, std::process::id());
}

#[test]
fn a_request_with_no_wait_left_stays_valid() {
    let r = Request::builder(Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(5)))
        .supersede(true)
        .build()
        .unwrap();
    let later = r.waiting(Wait::For(Duration::from_secs(2)));
    assert_eq!(later.wait(), Wait::For(Duration::from_secs(2)));
    assert!(later.supersede());
    // No wait left: it never queues, where supersede acts, so it goes.
    for wait in [Wait::No, Wait::For(Duration::ZERO)] {
        let last = r.waiting(wait);
        assert_eq!((last.wait(), last.supersede()), (wait, false));
        assert!(last.to_builder().build().is_ok(), "{wait:?}");
    }
}

#[test]
fn a_release_takes_a_min_hold_no_longer_than_a_ttl() {
    let over = MAX_TTL + Duration::from_secs(1);
    match Release::holds(false, Some(over)) {
        Err(Error::Invalid(m)) => assert_eq!(
            m,
            msg![Setting::ReleaseMinHold, " is too long: at most 7days"]
        ),
        other => panic!("not refused: {other:?}"),
    }
    let r = Release::holds(true, Some(MAX_TTL)).unwrap();
    assert_eq!((r.all(), r.min_hold()), (true, Some(MAX_TTL)));
    assert_eq!(Release::holds(false, None).unwrap(), Release::at_once());
    assert_eq!(
        Release::holds(false, Some(Duration::ZERO)).unwrap(),
        Release::default()
    );
    let note = ReleaseNote {
        exit_code: Some(3),
        overran: false,
    };
    let r = Release::at_once()
        .all_holds(true)
        .noted(note)
        .sent_once(Duration::from_secs(2));
    assert_eq!((r.all(), r.min_hold()), (true, None));
    assert_eq!((r.note(), r.within()), (note, Some(Duration::from_secs(2))));
    assert_eq!(Release::default().within(), None);
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
