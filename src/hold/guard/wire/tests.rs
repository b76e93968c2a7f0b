//! The wire format: every message both ways survives a round trip, and
//! what is cut, too long or garbage decodes as it always has.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use super::*;

#[test]
fn every_request_round_trips() {
    let env = b"RLOCK_KEY=k\0RLOCK_HELD=x=y\0";
    for msg in [
        ToGuard::Deadline(None),
        ToGuard::Deadline(Some(Duration::from_nanos(1))),
        ToGuard::Deadline(Some(Duration::new(123_456, 789))),
        ToGuard::Deadline(Some(Duration::from_nanos(u64::MAX))),
        ToGuard::Signal(libc::SIGTERM),
        ToGuard::Signal(libc::SIGKILL),
        ToGuard::Signal(-1),
        ToGuard::Spawn(b""),
        ToGuard::Spawn(env),
        ToGuard::Release(b""),
        ToGuard::Release(br#"{"holds":[]}"#),
    ] {
        let bytes = msg.encode();
        assert_eq!(ToGuard::decode(&bytes), Ok(msg));
    }
}

#[test]
fn requests_on_the_wire() {
    let d = ToGuard::Deadline(Some(Duration::from_nanos(0x0102))).encode();
    assert_eq!(d, [b'D', 2, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        ToGuard::Deadline(None).encode(),
        [b'D', 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(ToGuard::Signal(9).encode(), [b'K', 9, 0, 0, 0]);
    assert_eq!(ToGuard::Spawn(b"A=1\0").encode(), b"SA=1\0");
    assert_eq!(ToGuard::Release(b"{}").encode(), b"R{}");
}

#[test]
fn a_deadline_at_boot_is_not_none() {
    // 0 ns means "no deadline" on the wire: a point at boot must not
    // turn into never.
    let bytes = ToGuard::Deadline(Some(Duration::ZERO)).encode();
    assert_eq!(
        ToGuard::decode(&bytes),
        Ok(ToGuard::Deadline(Some(Duration::from_nanos(1))))
    );
}

#[test]
fn a_deadline_saturates_past_u64_nanoseconds() {
    let bytes = ToGuard::Deadline(Some(Duration::MAX)).encode();
    assert_eq!(
        ToGuard::decode(&bytes),
        Ok(ToGuard::Deadline(Some(Duration::from_nanos(u64::MAX))))
    );
}

#[test]
fn truncated_requests_do_not_decode() {
    assert_eq!(ToGuard::decode(b""), Err(Undecoded::Empty));
    let d = ToGuard::Deadline(Some(Duration::from_secs(5))).encode();
    for n in 1..d.len() {
        assert_eq!(
            ToGuard::decode(&d[..n]),
            Err(Undecoded::Malformed(b'D')),
            "{n}"
        );
    }
    let k = ToGuard::Signal(15).encode();
    for n in 1..k.len() {
        assert_eq!(
            ToGuard::decode(&k[..n]),
            Err(Undecoded::Malformed(b'K')),
            "{n}"
        );
    }
    // The go has no fixed length: its tag alone is a start, no variable added.
    assert_eq!(ToGuard::decode(b"S"), Ok(ToGuard::Spawn(b"")));
}

#[test]
fn oversized_requests_decode_as_the_guard_always_read_them() {
    // A deadline is read from its first 9 bytes, whatever follows.
    let mut d = ToGuard::Deadline(Some(Duration::from_secs(5))).encode();
    d.extend_from_slice(b"trailing");
    assert_eq!(
        ToGuard::decode(&d),
        Ok(ToGuard::Deadline(Some(Duration::from_secs(5))))
    );
    // A signal must be exactly 5 bytes.
    let mut k = ToGuard::Signal(15).encode();
    k.push(0);
    assert_eq!(ToGuard::decode(&k), Err(Undecoded::Malformed(b'K')));
}

#[test]
fn unknown_tags_do_not_decode() {
    for garbage in [
        &b"x"[..],
        b"P\x01\0\0\0",
        b"Z",
        b"\0",
        b"\xff\xff\xff\xff\xff",
    ] {
        assert_eq!(
            ToGuard::decode(garbage),
            Err(Undecoded::Unknown(garbage[0])),
            "{garbage:?}"
        );
    }
}

#[test]
fn the_go_carries_the_variables_in_order() {
    let msg = spawn_message(&[("RLOCK_KEY", "k"), ("RLOCK_HELD", "a=b")]).unwrap();
    assert_eq!(msg, b"SRLOCK_KEY=k\0RLOCK_HELD=a=b\0");
    assert_eq!(
        ToGuard::decode(&msg),
        Ok(ToGuard::Spawn(b"RLOCK_KEY=k\0RLOCK_HELD=a=b\0"))
    );
}

#[test]
fn the_go_fits_in_64_kib_or_is_refused() {
    // 'S' + "RLOCK_HELD=" + value + NUL: exactly MAX_MSG bytes is sent.
    let room = MAX_MSG - 1 - "RLOCK_HELD=".len() - 1;
    let fits = "x".repeat(room);
    let msg = spawn_message(&[("RLOCK_HELD", &fits)]).unwrap();
    assert_eq!(msg.len(), MAX_MSG);

    // One byte more is a usage error (exit 64), not a start that never comes.
    let over = "x".repeat(room + 1);
    let err = spawn_message(&[("RLOCK_HELD", &over)]).unwrap_err();
    assert!(matches!(err, crate::Error::Invalid(_)), "{err:?}");
    assert_eq!(crate::exit_code::for_error(&err, 0), 64);
    let text = err.to_string();
    assert!(text.contains(&format!("{} bytes", MAX_MSG + 1)), "{text}");
    assert!(text.contains("RLOCK_HELD"), "{text}");
}

/// A report and what it should decode back to, compared by its bytes
/// (io::Error is not comparable).
fn round_trip(report: Report) {
    let bytes = report.encode();
    let back = Report::decode(&bytes);
    assert_eq!(back.encode(), bytes, "{report:?} came back as {back:?}");
    assert_eq!(format!("{back:?}"), format!("{report:?}"));
}

#[test]
fn every_report_round_trips() {
    round_trip(Report::Started(4242));
    round_trip(Report::SpawnFailed(std::io::Error::from_raw_os_error(
        libc::ENOENT,
    )));
    round_trip(Report::Stopped(libc::SIGTSTP));
    round_trip(Report::Exited(ExitStatus::from_raw(3 << 8)));
    round_trip(Report::Exited(ExitStatus::from_raw(libc::SIGKILL)));
    round_trip(Report::Enforced);
    round_trip(Report::Empty);
    round_trip(Report::Gone);
}

#[test]
fn reports_on_the_wire() {
    assert_eq!(Report::Started(0x0102).encode(), [b'P', 2, 1, 0, 0]);
    assert_eq!(Report::Stopped(19).encode(), [b'T', 19, 0, 0, 0]);
    assert_eq!(
        Report::Exited(ExitStatus::from_raw(256)).encode(),
        [b'E', 0, 1, 0, 0]
    );
    assert_eq!(Report::Enforced.encode(), b"L");
    assert_eq!(Report::Empty.encode(), b"Z");
    assert_eq!(Report::Gone.encode(), b"");
}

#[test]
fn a_spawn_error_without_errno_is_sent_as_enoexec() {
    let e = std::io::Error::other("no errno");
    let back = Report::decode(&Report::SpawnFailed(e).encode());
    assert!(
        matches!(&back, Report::SpawnFailed(e) if e.raw_os_error() == Some(libc::ENOEXEC)),
        "{back:?}"
    );
}

#[test]
fn truncated_oversized_or_garbage_reports_are_gone() {
    let started = Report::Started(7).encode();
    for n in 0..started.len() {
        assert!(matches!(Report::decode(&started[..n]), Report::Gone), "{n}");
    }
    let mut long = started.clone();
    long.push(0);
    assert!(matches!(Report::decode(&long), Report::Gone));
    // A report longer than rlock's buffer arrives cut to it: still Gone.
    assert!(matches!(Report::decode(&[b'P'; MAX_REPORT]), Report::Gone));
    assert!(matches!(Report::decode(b"LL"), Report::Gone));
    assert!(matches!(Report::decode(b"Z\0"), Report::Gone));
    for garbage in [&b"x"[..], b"D", b"S\0\0\0\0", b"\0\0\0\0\0", b"K\x09\0\0\0"] {
        assert!(
            matches!(Report::decode(garbage), Report::Gone),
            "{garbage:?}"
        );
    }
}
