//! `decide` for what stops a command besides a loss: signals for rlock,
//! `--max-hold`, terminal stops; and the wake-up. Same synthetic lease as
//! decide/tests.rs.

use super::*;

// --- signals for rlock ------------------------------------------------------

#[test]
fn forwarded_int_gives_grace_then_kills() {
    let mut s = hold();
    decide(&mut s, Event::Signal(libc::SIGINT), at(1_000));
    assert_eq!(
        s.kill_at,
        Some((at(6_000), Some(KillCause::Grace(libc::SIGINT))))
    );
    assert!(tick(&mut s, at(5_999)).is_empty());
    let a = tick(&mut s, at(6_000));
    assert_eq!(
        a,
        vec![
            Action::Kill,
            Action::Report(Report::Killed {
                cause: KillCause::Grace(libc::SIGINT),
                command: true,
            }),
        ]
    );
}

#[test]
fn forwarded_term_gives_grace_too() {
    let mut s = hold();
    decide(&mut s, Event::Signal(libc::SIGTERM), at(2_000));
    assert_eq!(wake_at(&s, at(2_000)), at(7_000));
    assert!(tick(&mut s, at(7_000)).contains(&Action::Kill));
}

#[test]
fn a_second_int_escalates_to_kill_at_once() {
    let mut s = hold();
    decide(&mut s, Event::Signal(libc::SIGINT), at(1_000));
    let a = decide(&mut s, Event::Signal(libc::SIGINT), at(1_500));
    assert_eq!(
        a,
        vec![
            Action::Forward(libc::SIGINT),
            Action::Report(Report::Forwarded(libc::SIGINT)),
            Action::Kill,
            Action::Report(Report::Killed {
                cause: KillCause::Again(libc::SIGINT),
                command: true,
            }),
        ]
    );
    assert_eq!(s.kill_at, None);
}

#[test]
fn int_then_term_escalates_too() {
    let mut s = hold();
    decide(&mut s, Event::Signal(libc::SIGINT), at(1_000));
    let a = decide(&mut s, Event::Signal(libc::SIGTERM), at(1_100));
    assert!(a.contains(&Action::Kill));
}

#[test]
fn hup_twice_does_not_escalate() {
    let mut s = hold();
    decide(&mut s, Event::Signal(libc::SIGHUP), at(1_000));
    let a = decide(&mut s, Event::Signal(libc::SIGHUP), at(2_000));
    assert!(!a.contains(&Action::Kill));
    // The grace counts from the first.
    assert_eq!(
        s.kill_at,
        Some((at(6_000), Some(KillCause::Grace(libc::SIGHUP))))
    );
}

#[test]
fn usr1_is_passed_on_with_no_grace_period() {
    let mut s = hold();
    let a = decide(&mut s, Event::Signal(libc::SIGUSR1), at(1_000));
    assert_eq!(signals(&a), vec![&Action::Forward(libc::SIGUSR1)]);
    assert_eq!(s.kill_at, None);
}

#[test]
fn a_grace_kill_due_before_a_losss_keeps_its_cause() {
    let mut s = hold();
    decide(&mut s, Event::Signal(libc::SIGTERM), at(1_000));
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(3_000));
    assert_eq!(
        s.kill_at,
        Some((at(6_000), Some(KillCause::Grace(libc::SIGTERM))))
    );
}

#[test]
fn a_loss_brings_a_later_grace_kill_forward() {
    let mut s = hold();
    // Its grace would end past the kill point.
    decide(&mut s, Event::Signal(libc::SIGTERM), at(25_000));
    let kp = kill_point(valid0(), TTL);
    decide(
        &mut s,
        Event::Lost(LOST_GONE.into()),
        kp - Duration::from_millis(10),
    );
    assert_eq!(s.kill_at, Some((kp, None)));
}

// --- --max-hold -------------------------------------------------------------

fn max_hold(d: Duration) -> State {
    hold_with(Policy {
        max_hold: Some(d),
        ..policy(OnLost::Term)
    })
}

#[test]
fn max_hold_terms_the_tree_then_kills_after_grace() {
    let mut s = max_hold(Duration::from_secs(2));
    assert_eq!(wake_at(&s, at(0)), at(2_000));
    let a = tick(&mut s, at(2_000));
    assert_eq!(
        a,
        vec![
            Action::Terminate,
            Action::StartRenewer,
            Action::Report(Report::Overran(Duration::from_secs(2))),
        ]
    );
    assert!(s.overran);
    assert!(tick(&mut s, at(6_999)).is_empty());
    assert_eq!(tick(&mut s, at(7_000)), vec![Action::Kill]);
}

#[test]
fn max_hold_does_not_fire_a_tick_early() {
    let mut s = max_hold(Duration::from_secs(2));
    assert!(tick(&mut s, at(1_999)).is_empty());
    assert!(!s.overran);
}

#[test]
fn max_hold_fires_once_and_keeps_renewing() {
    let mut s = max_hold(Duration::from_secs(2));
    let a = tick(&mut s, at(2_000));
    assert!(!a.contains(&Action::StopRenewer));
    assert!(!tick(&mut s, at(2_500)).contains(&Action::Terminate));
    assert_eq!(wake_at(&s, at(2_500)), at(7_000));
}

#[test]
fn max_hold_after_a_loss_does_nothing_more() {
    let mut s = max_hold(Duration::from_secs(2));
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(1_000));
    assert!(!tick(&mut s, at(2_000)).contains(&Action::Terminate));
    assert!(!s.overran);
}

#[test]
fn max_hold_on_a_command_that_already_exited_stops_its_leftovers() {
    let mut s = max_hold(Duration::from_secs(2));
    decide(&mut s, Event::Exited(exited(0)), at(500));
    assert!(tick(&mut s, at(2_000)).contains(&Action::Terminate));
    assert!(s.overran);
}

// --- terminal stops, the wake-up --------------------------------------------

#[test]
fn a_stopped_job_may_be_continued_only_before_its_kill_point() {
    let s = hold();
    let kp = kill_point(valid0(), TTL);
    assert!(s.may_continue(valid0(), kp - Duration::from_millis(1)));
    assert!(!s.may_continue(valid0(), kp));
    // A renewal confirmed meanwhile counts.
    assert!(s.may_continue(at(60_000), kp));
}

#[test]
fn a_stopped_job_under_on_lost_ignore_is_always_continued() {
    let s = hold_with(policy(OnLost::Ignore));
    assert!(s.may_continue(valid0(), at(600_000)));
}

#[test]
fn wake_up_is_at_most_an_hour_away() {
    let mut s = hold();
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(1_000));
    tick(&mut s, at(6_000));
    assert_eq!(
        wake_at(&s, at(6_000)),
        at(6_000) + Duration::from_secs(3600)
    );
}

#[test]
fn a_stop_decides_nothing_but_a_due_renewers_start() {
    let mut s = hold();
    assert!(decide(&mut s, Event::Stopped, at(1_000)).is_empty());
    assert_eq!(
        decide(&mut s, Event::Stopped, at(10_000)),
        vec![Action::StartRenewer]
    );
    assert!(s.lost.is_none() && s.kill_at.is_none());
}
