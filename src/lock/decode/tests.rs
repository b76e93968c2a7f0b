//! Every reply code of every script (lua/*.lua headers), decoded.

use super::*;
use crate::lock::LostRecord;

fn i(n: i64) -> Value {
    Value::Int(n)
}

fn s(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

fn texts(values: &[Value]) -> Vec<String> {
    (0..values.len()).map(|n| text(values, n)).collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The outcome of an acquire of "k" with limit `limit`.
fn acquired(reply: &[Value], limit: u32) -> (Result<Outcome>, Vec<String>) {
    let (outcome, wake) = acquire(reply, "k", limit);
    (outcome, texts(wake))
}

fn conflict(r: Result<Outcome>) -> String {
    match r {
        Err(Error::Conflict(msg)) => msg,
        Err(e) => panic!("not a conflict: {e}"),
        Ok(_) => panic!("not a conflict: Ok"),
    }
}

fn protocol<T>(r: Result<T>) -> String {
    match r {
        Err(Error::Protocol(msg)) => msg,
        Err(e) => panic!("not a protocol error: {e}"),
        Ok(_) => panic!("not a protocol error: Ok"),
    }
}

#[test]
fn a_grant_gives_its_fence_and_depth_then_the_waiters_to_wake() {
    let (a, wake) = acquired(&[i(1), i(42), i(1), s("w1"), s("w2")], 1);
    assert!(matches!(
        a,
        Ok(Outcome::Granted {
            fence: 42,
            count: 1
        })
    ));
    assert_eq!(wake, ["w1", "w2"]);
    let (a, wake) = acquired(&[i(1), i(42), i(3)], 1);
    assert!(matches!(
        a,
        Ok(Outcome::Granted {
            fence: 42,
            count: 3
        })
    ));
    assert!(wake.is_empty());
}

/// A grant made while others wait ends with its hints (lua/acquire.lua,
/// "Next in line"): told apart from the tokens to wake, which never start
/// with '^'.
#[test]
fn a_grant_names_the_next_in_line_after_the_waiters_to_wake() {
    let reply = [i(1), i(42), i(1), s("w1"), s("~w2"), s("^n1"), s("^~n2")];
    let (a, wake) = acquire(&reply, "k", 2);
    assert!(matches!(a, Ok(Outcome::Granted { count: 1, .. })));
    let hint = next_in_line(wake).expect("a hint");
    assert!(hint.next == "n1" && hint.scout.as_deref() == Some("n2"));
    let plain: Vec<String> = texts(wake).into_iter().filter(|t| !is_hint(t)).collect();
    assert_eq!(plain, ["w1", "~w2"]);
    // The head alone (nobody behind it), and none at all.
    let hint = next_in_line(&[s("^n1")]).expect("a hint");
    assert!(hint.next == "n1" && hint.scout.is_none());
    assert!(next_in_line(&[s("w1"), s("~w2")]).is_none());
    // A scout without a head, or an empty token, is no hint.
    assert!(next_in_line(&[s("^~n2"), s("^")]).is_none());
}

#[test]
fn a_busy_answer_says_who_holds_it_and_how_long() {
    let reply = [
        i(0),
        i(1500),
        i(2),
        s(r#"{"host":"h1","pid":7,"cmd":"make"}"#),
        i(1_700_000_000_000),
        i(2),
        i(41),
        i(900),
        s("ab12"),
        s("w9"),
    ];
    let (a, wake) = acquired(&reply, 1);
    let Ok(Outcome::Busy(b, fence, id)) = a else {
        panic!("not busy");
    };
    let holder = b.holder.unwrap();
    assert_eq!((holder.host.as_str(), holder.pid), ("h1", 7));
    assert_eq!(holder.cmd.as_deref(), Some("make"));
    assert_eq!(b.expires_in, ms(1500));
    assert_eq!(
        (b.position, b.since_ms, b.holders),
        (2, 1_700_000_000_000, 2)
    );
    assert_eq!((b.holder_ttl, b.waited), (ms(900), Duration::ZERO));
    assert_eq!((fence, id.as_str()), (41, "ab12"));
    assert_eq!(wake, ["w9"]);
}

#[test]
fn a_busy_answer_with_nobody_holding_clamps_and_leaves_the_holder_out() {
    let reply = [i(0), i(-5), i(-1), s(""), i(-1), i(0), i(0), i(-3), s("")];
    let Ok(Outcome::Busy(b, fence, id)) = acquired(&reply, 1).0 else {
        panic!("not busy");
    };
    assert!(b.holder.is_none());
    assert_eq!(
        (b.expires_in, b.holder_ttl),
        (Duration::ZERO, Duration::ZERO)
    );
    assert_eq!((b.position, b.since_ms, b.holders, fence), (0, 0, 0, 0));
    assert_eq!(id, "");
}

#[test]
fn a_truncated_answer_is_a_protocol_error_that_wakes_nobody() {
    let (a, wake) = acquired(&[i(0), i(1500)], 1);
    assert!(protocol(a).starts_with("acquire returned"));
    assert!(wake.is_empty());
    let (a, wake) = acquired(&[i(1), i(42)], 1);
    protocol(a);
    assert!(wake.is_empty());
}

#[test]
fn a_superseded_waiter_is_told_by_whom() {
    let (a, wake) = acquired(&[i(-6), s(r#"{"host":"ci-2","pid":99}"#)], 1);
    let Err(e @ Error::Superseded { .. }) = a else {
        panic!("not superseded");
    };
    assert!(
        e.to_string().starts_with(
            "superseded by host ci-2 pid 99: a newer --supersede waiter for lock \"k\""
        ),
        "{e}"
    );
    assert!(wake.is_empty());
    let Err(Error::Superseded { by, key }) = acquired(&[i(-6), s("")], 1).0 else {
        panic!("not superseded");
    };
    assert_eq!((by.as_str(), key.as_str()), ("a newer waiter", "k"));
}

#[test]
fn another_limit_names_both() {
    let e = acquired(&[i(-3), i(3)], 2).0.err().unwrap();
    assert!(
        matches!(&e, Error::OtherLimit { key, held: 3, asked: 2 } if key == "k"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "lock \"k\" is in use with Request::limit 3, not 2; every holder must agree"
    );
    protocol(acquired(&[i(-3)], 2).0);
}

#[test]
fn a_reentry_of_a_token_that_holds_nothing_is_not_held() {
    let (a, wake) = acquired(&[i(-1)], 1);
    assert!(matches!(a, Ok(Outcome::NotHeld)));
    assert!(wake.is_empty());
}

#[test]
fn another_kind_says_what_the_lock_is_and_what_was_asked() {
    let kind = |r: Result<Outcome>| match r {
        Err(e @ Error::OtherKind { .. }) => e,
        other => panic!("not another kind: {:?}", other.err()),
    };
    let rw = kind(acquired(&[i(-4), s("rw")], 3).0);
    assert!(matches!(
        &rw,
        Error::OtherKind {
            key_is_rw: true,
            ..
        }
    ));
    assert_eq!(
        rw.to_string(),
        "lock \"k\" is in use as a read-write lock (Mode::Read or Mode::Write); it cannot be taken \
         as a semaphore (Request::limit above 1)"
    );
    let sem = kind(acquired(&[i(-4), s("x")], 1).0);
    assert!(matches!(
        &sem,
        Error::OtherKind {
            key_is_rw: false,
            ..
        }
    ));
    assert_eq!(
        sem.to_string(),
        "lock \"k\" is in use as a semaphore (Request::limit above 1); it cannot be taken as a \
         read-write lock (Mode::Read or Mode::Write)"
    );
}

#[test]
fn a_reader_cannot_upgrade() {
    let msg = conflict(acquired(&[i(-5)], 1).0);
    assert!(
        msg.starts_with(
            "lock \"k\": this owner holds it for reading and cannot upgrade to writing"
        )
    );
}

#[test]
fn an_unknown_acquire_answer_is_a_protocol_error() {
    for reply in [vec![i(7)], vec![], vec![s("granted")], vec![i(-7), i(1)]] {
        let (a, wake) = acquired(&reply, 1);
        assert!(protocol(a).starts_with("acquire returned"), "{reply:?}");
        assert!(wake.is_empty(), "{reply:?}");
    }
}

#[test]
fn a_release_reply_is_a_count_then_the_waiters_to_wake() {
    let reply = [i(2), s("a"), s("b")];
    let (n, notice, wake) = release(&reply).unwrap();
    assert_eq!(
        (n, notice, texts(wake)),
        (2, None, vec!["a".to_string(), "b".to_string()])
    );
    let reply = [i(-2)];
    let (n, _, wake) = release(&reply).unwrap();
    assert_eq!((n, wake.len()), (-2, 0));
    // A broken hold: the notice, then the waiters.
    let reply = [i(-7), s(r#"{"by":"ann@h","reason":"storm"}"#), s("a")];
    let (n, notice, wake) = release(&reply).unwrap();
    assert_eq!((n, texts(wake)), (-7, vec!["a".to_string()]));
    let e = released(n, notice.as_deref(), true, "k").unwrap_err();
    assert!(
        matches!(&e, Error::Lost { why, .. } if why == "it was broken by ann@h (reason: storm)"),
        "{e}"
    );
    assert!(protocol(release(&[])).starts_with("release returned"));
    protocol(release(&[s("x")]));
}

#[test]
fn a_release_counts_what_is_left() {
    assert_eq!(released(0, None, false, "k").unwrap(), Released::Released);
    assert_eq!(
        released(3, None, false, "k").unwrap(),
        Released::StillHeld(3)
    );
    assert_eq!(released(-1, None, false, "k").unwrap(), Released::NotHeld);
    let e = released(-2, None, false, "k").unwrap_err();
    assert!(
        matches!(e, Error::NotOwner { ref key } if key == "k"),
        "{e}"
    );
    assert_eq!(
        protocol(released(-3, None, false, "k")),
        "release returned -3"
    );
}

#[test]
fn a_resent_release_that_finds_nothing_had_released() {
    assert_eq!(released(-1, None, true, "k").unwrap(), Released::Released);
    assert_eq!(released(-2, None, true, "k").unwrap(), Released::Released);
    assert_eq!(
        released(2, None, true, "k").unwrap(),
        Released::StillHeld(2)
    );
    assert_eq!(released(0, None, true, "k").unwrap(), Released::Released);
}

#[test]
fn a_renewal_gives_the_time_left_or_why_not() {
    let renewed = |n: i64, key: &str| super::renewed(&Value::Int(n), key);
    assert_eq!(renewed(1500, "k").unwrap(), ms(1500));
    let e = renewed(-1, "k").unwrap_err();
    assert_eq!(
        e.to_string(),
        "lock \"k\" was lost: this token holds it no more (it expired or was released)"
    );
    assert!(matches!(renewed(-2, "k"), Err(Error::NotOwner { .. })));
    assert_eq!(protocol(renewed(0, "k")), "renew returned 0");
    protocol(renewed(-4, "k"));
    // A broken hold: who broke it and why.
    let notice = Value::BulkString(br#"{"by":"ann@h","reason":"hung"}"#.to_vec());
    let e = super::renewed(&Value::Array(vec![Value::Int(-1), notice]), "k").unwrap_err();
    assert_eq!(
        e.to_string(),
        "lock \"k\" was lost: it was broken by ann@h (reason: hung)"
    );
}

#[test]
fn a_break_says_what_it_ended_and_whom_to_wake() {
    let reply = [
        Value::Int(2),
        Value::Int(7),
        Value::Int(9),
        Value::BulkString(b"t1".to_vec()),
    ];
    let (b, wake) = broken(&reply).unwrap();
    assert_eq!(b.fences, vec![7, 9]);
    assert_eq!(b.woken, 1);
    assert_eq!(wake.len(), 1);
    let (b, wake) = broken(&[Value::Int(0)]).unwrap();
    assert!(b.fences.is_empty() && wake.is_empty());
    assert!(broken(&[Value::Int(3), Value::Int(1)]).is_err());
}

#[test]
fn a_check_gives_the_hold_or_why_not() {
    assert_eq!(
        held(&[i(2500), i(17)], "k").unwrap(),
        Held {
            ttl: ms(2500),
            fence: 17
        }
    );
    assert_eq!(held(&[i(0), i(3)], "k").unwrap().ttl, Duration::ZERO);
    assert!(matches!(held(&[i(-1)], "k"), Err(Error::Lost { .. })));
    assert!(matches!(held(&[i(-2)], "k"), Err(Error::NotOwner { .. })));
    let ints = |v: &[i64]| v.iter().map(|&n| i(n)).collect::<Vec<_>>();
    for reply in [&[][..], &[-1, 5], &[1, 2, 3], &[-3]] {
        assert!(
            protocol(held(&ints(reply), "k")).starts_with("check returned"),
            "{reply:?}"
        );
    }
    assert!(protocol(held(&[i(-2), s("{}")], "k")).starts_with("check returned"));
}

#[test]
fn a_check_of_a_broken_hold_says_who_broke_it() {
    let notice = s(r#"{"by":"ops@h","reason":"stuck","at":5}"#);
    match held(&[i(-1), notice], "k") {
        Err(Error::Lost { why, .. }) => {
            assert_eq!(why, "it was broken by ops@h (reason: stuck)");
            assert_eq!(
                crate::lock::breaking::breaker(&why),
                Some(("ops@h", "stuck"))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_heartbeat_that_must_look_again_says_so() {
    assert_eq!(beat(&[i(0), i(800), s("abc")]).unwrap(), None);
    assert_eq!(beat(&[i(-1)]).unwrap(), None);
}

#[test]
fn a_heartbeat_without_a_new_holder_keeps_the_one_known() {
    assert_eq!(
        beat(&[i(1200), i(800), s("abc")]).unwrap(),
        Some(Beat {
            quiet: ms(1200),
            holder_ttl: ms(800),
            holder_id: "abc".into(),
            changed: None,
        })
    );
    // A holder_ttl below zero (nobody holds it) is zero.
    assert_eq!(
        beat(&[i(1200), i(-2), s("")]).unwrap().unwrap().holder_ttl,
        Duration::ZERO
    );
}

#[test]
fn a_heartbeat_that_sees_a_new_holder_says_who_and_where_we_stand() {
    let reply = [
        i(1200),
        i(800),
        s("def"),
        s(r#"{"host":"h2","pid":8}"#),
        i(1_700_000_000_123),
        i(1),
        i(2),
    ];
    let b = beat(&reply).unwrap().unwrap();
    let (holder, since, position, holders) = b.changed.unwrap();
    assert_eq!(holder.map(|h| (h.host, h.pid)), Some(("h2".into(), 8)));
    assert_eq!((since, position, holders), (1_700_000_000_123, 1, 2));
    assert_eq!(b.holder_id, "def");
}

#[test]
fn a_malformed_heartbeat_is_a_protocol_error() {
    assert!(protocol(beat(&[])).starts_with("wait returned"));
    protocol(beat(&[i(1200)]));
    protocol(beat(&[i(1200), i(800), s("x"), s(""), i(1), s("no"), i(1)]));
}

mod status;
