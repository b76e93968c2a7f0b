//! The release settings: what rlock sends the guard, and what the
//! releaser reads back from it.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::clock::BootTime;
use crate::conn::Tls;
use crate::{Lease, Token};

fn lease(key: &str, count: u64) -> Lease {
    Lease::granted(
        key,
        Token::generate(),
        7,
        count,
        Duration::from_secs(30),
        BootTime::now(),
    )
}

fn releaser() -> Releaser {
    Releaser {
        opts: ConnectOptions {
            urls: vec!["redis://a:6379".into(), "redis://b:6380".into()],
            password: Some("secret".into()),
            connect_timeout: Duration::from_millis(1500),
            cluster: false,
            sentinel: Some("mymaster".into()),
            min_replicas: 1,
            tls: Tls {
                ca: Some(PathBuf::from("/etc/ca.pem")),
                cert: None,
                key: Some(PathBuf::from("/etc/key.pem")),
            },
            index: Default::default(),
        },
        prefix: "app:".into(),
        history: HistoryLimits::new(50, Duration::from_secs(3600)).unwrap(),
    }
}

/// The holds `s` names, in order: key, token, all.
fn holds(s: &Settings) -> Vec<(&str, &str, bool)> {
    s.holds
        .iter()
        .map(|h| (h.key.as_str(), h.token.as_str(), h.all))
        .collect()
}

#[test]
fn the_settings_round_trip_with_everything_a_connection_needs() {
    let l = lease("k", 1);
    let raw = encode(&releaser(), &[&l]).unwrap();
    let s = Settings::decode(&raw).unwrap();
    let o = s.connect_options();
    assert_eq!(o.urls, ["redis://a:6379", "redis://b:6380"]);
    assert_eq!(o.password.as_deref(), Some("secret"));
    assert_eq!(o.connect_timeout, Duration::from_millis(1500));
    assert_eq!(o.sentinel.as_deref(), Some("mymaster"));
    assert_eq!(o.min_replicas, 1);
    assert!(!o.cluster);
    assert_eq!(o.tls.ca, Some(PathBuf::from("/etc/ca.pem")));
    assert_eq!(o.tls.cert, None);
    assert_eq!(o.tls.key, Some(PathBuf::from("/etc/key.pem")));
    assert_eq!(s.prefix, "app:");
    assert_eq!(s.history, (50, 3_600_000));
    assert_eq!(s.holds.len(), 1);
    assert_eq!(s.holds[0].key, "k");
    assert_eq!(s.holds[0].token, l.token.as_str());
}

#[test]
fn a_first_grant_gives_back_every_hold_a_reentry_only_its_own() {
    let (outer, inner) = (lease("k", 1), lease("k", 3));
    let s = Settings::decode(&encode(&releaser(), &[&outer]).unwrap()).unwrap();
    assert!(s.holds[0].all, "the outermost exec gives back every hold");
    let s = Settings::decode(&encode(&releaser(), &[&inner]).unwrap()).unwrap();
    assert!(!s.holds[0].all, "a re-entered exec gives back its one hold");
}

#[test]
fn a_set_gives_back_every_lock_the_others_first_in_reverse() {
    let (a, b, c) = (lease("a", 1), lease("b", 2), lease("c", 1));
    let s = Settings::decode(&encode(&releaser(), &[&a, &b, &c]).unwrap()).unwrap();
    let order = holds(&s);
    assert_eq!(
        order,
        [
            ("c", c.token.as_str(), true),
            ("b", b.token.as_str(), false),
            ("a", a.token.as_str(), true)
        ]
    );
}

#[test]
fn no_lease_no_settings() {
    assert!(encode(&releaser(), &[]).is_none());
}

#[test]
fn the_connect_wait_is_bounded() {
    let mut r = releaser();
    r.opts.connect_timeout = Duration::from_secs(600);
    let s = Settings::decode(&encode(&r, &[&lease("k", 1)]).unwrap()).unwrap();
    assert_eq!(s.connect_options().connect_timeout, PATIENCE);
}

#[test]
fn garbage_is_no_settings() {
    assert!(Settings::decode(b"").is_none());
    assert!(Settings::decode(b"{\"urls\":[]}").is_none());
    assert!(Settings::decode(&[0xff, 0, 1]).is_none());
}

#[test]
fn the_exec_argument_is_the_public_one() {
    assert_eq!(ARG.to_str(), Ok(RELEASER_ARG));
}

#[test]
fn a_usual_set_of_settings_is_sent() {
    // 64 locks of 100-byte names fit: beyond MAX_RELEASE nothing is sent.
    let leases: Vec<Lease> = (0..64).map(|i| lease(&format!("{i:0>100}"), 1)).collect();
    let all: Vec<&Lease> = leases.iter().collect();
    let raw = encode(&releaser(), &all).unwrap();
    assert!(
        raw.len() < crate::hold::guard::wire::MAX_RELEASE,
        "{}",
        raw.len()
    );
}

#[test]
fn a_waiting_exec_gives_up_its_place_then_what_it_holds_in_reverse() {
    let (a, b) = (lease("a", 1), lease("b", 1));
    let t = Token::generate();
    let raw = encode_waiting(&releaser(), &[a.clone(), b.clone()], Some(("c", &t))).unwrap();
    let s = Settings::decode(&raw).unwrap();
    let order = holds(&s);
    assert_eq!(
        order,
        [
            ("c", t.as_str(), true),
            ("b", b.token.as_str(), true),
            ("a", a.token.as_str(), true)
        ]
    );
}

#[test]
fn a_waiting_exec_never_names_a_reentered_hold() {
    // Its token is the enclosing holder's: releasing it would drop theirs.
    let (outer, reentered) = (lease("a", 1), lease("b", 2));
    let t = Token::generate();
    let raw = encode_waiting(&releaser(), &[outer.clone(), reentered], Some(("c", &t))).unwrap();
    let s = Settings::decode(&raw).unwrap();
    let keys: Vec<&str> = s.holds.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(keys, ["c", "a"]);
    // Nothing of its own (a re-entered hold, no token named: RedLock):
    // nothing to send.
    assert!(encode_waiting(&releaser(), &[lease("b", 2)], None).is_none());
    assert!(encode_waiting(&releaser(), &[], None).is_none());
    let only = encode_waiting(&releaser(), std::slice::from_ref(&outer), None).unwrap();
    let s = Settings::decode(&only).unwrap();
    assert_eq!(s.holds.len(), 1);
    assert!(s.holds[0].all && s.holds[0].token == outer.token.as_str());
}
