//! `decide` for `acquire --keep` (Holder::Keep), on the same synthetic
//! lease as the exec tests beside it (decide/tests.rs).

use super::*;

// --- acquire --keep (Holder::Keep) -------------------------------------------

fn keep_with(on_lost: OnLost) -> State {
    hold_with(Policy {
        holder: Holder::Keep,
        ..policy(on_lost)
    })
}

fn keep() -> State {
    keep_with(OnLost::Term)
}

const BROKEN: &str = "it was broken by ops@host (reason: stuck)";

#[test]
fn keep_cover_gone_releases() {
    let mut s = keep();
    let a = decide(&mut s, Event::Empty, at(3_000));
    assert_eq!(a, vec![Action::StopRenewer, Action::Finish]);
    assert_eq!(s.end(), End::Release);
}

#[test]
fn keep_stop_terms_the_cover_stops_renewing_and_tells_the_guard() {
    let mut s = keep();
    let a = decide(&mut s, Event::Stop, at(1_000));
    assert_eq!(
        a,
        vec![
            Action::StopRenewer,
            Action::Deadline(at(6_000)),
            Action::Terminate
        ]
    );
    assert!(s.stopping && s.lost.is_none());
    assert_eq!(s.kill_at, Some((at(6_000), None)));
}

#[test]
fn keep_stop_then_cover_gone_releases() {
    let mut s = keep();
    decide(&mut s, Event::Stop, at(1_000));
    assert_eq!(
        decide(&mut s, Event::Empty, at(1_500)),
        vec![Action::Finish]
    );
    assert_eq!(s.end(), End::Release);
}

#[test]
fn keep_stop_kills_after_grace_then_leaves_a_survivor_to_the_lease() {
    let mut s = keep();
    decide(&mut s, Event::Stop, at(1_000));
    assert!(tick(&mut s, at(5_999)).is_empty());
    assert_eq!(
        tick(&mut s, at(6_000)),
        vec![Action::Deadline(at(6_000)), Action::Kill]
    );
    assert_eq!(wake_at(&s, at(6_000)), at(6_000) + ABANDON_AFTER);
    assert!(tick(&mut s, at(6_999)).is_empty());
    assert_eq!(tick(&mut s, at(7_000)), vec![Action::Finish]);
    assert!(s.abandoned);
    assert_eq!(s.end(), End::LeaveToLease);
}

#[test]
fn keep_stop_grace_is_cut_to_the_kill_point() {
    let mut s = hold_with(Policy {
        holder: Holder::Keep,
        grace: Duration::from_secs(60),
        ..policy(OnLost::Term)
    });
    let kp = kill_point(valid0(), TTL);
    let a = decide(&mut s, Event::Stop, at(1_000));
    assert!(a.contains(&Action::Deadline(kp)));
    assert_eq!(s.kill_at, Some((kp, None)));
}

#[test]
fn keep_stop_under_on_lost_kill_kills_at_once() {
    let mut s = keep_with(OnLost::Kill);
    let a = decide(&mut s, Event::Stop, at(1_000));
    assert_eq!(
        a,
        vec![
            Action::StopRenewer,
            Action::Deadline(at(1_000)),
            Action::Kill
        ]
    );
    assert_eq!(s.abandon_at, Some(at(1_000) + ABANDON_AFTER));
}

#[test]
fn keep_stop_with_no_time_left_kills_at_once() {
    let mut s = keep();
    let kp = kill_point(valid0(), TTL);
    let a = decide(&mut s, Event::Stop, kp);
    assert!(a.contains(&Action::Kill) && !a.contains(&Action::Terminate));
}

#[test]
fn keep_stop_under_on_lost_ignore_releases_at_once() {
    let mut s = keep_with(OnLost::Ignore);
    let a = decide(&mut s, Event::Stop, at(1_000));
    assert_eq!(a, vec![Action::StopRenewer, Action::Finish]);
    assert_eq!(s.end(), End::Release);
}

#[test]
fn keep_a_second_stop_adds_nothing() {
    let mut s = keep();
    decide(&mut s, Event::Stop, at(1_000));
    assert!(decide(&mut s, Event::Stop, at(1_100)).is_empty());
    assert_eq!(s.kill_at, Some((at(6_000), None)));
}

#[test]
fn keep_a_stop_after_a_loss_adds_nothing() {
    let mut s = keep();
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(1_000));
    assert!(decide(&mut s, Event::Stop, at(1_100)).is_empty());
    assert!(!s.stopping);
}

#[test]
fn keep_stopping_is_no_loss_when_the_lease_nears_its_end() {
    let mut s = hold_with(Policy {
        holder: Holder::Keep,
        grace: Duration::from_secs(60),
        ..policy(OnLost::Term)
    });
    decide(&mut s, Event::Stop, at(1_000));
    let a = tick(&mut s, valid0() - LEAD);
    assert!(lost(&a).is_none() && s.lost.is_none());
    // Nothing due in the past: no busy loop.
    assert!(wake_at(&s, valid0() - LEAD) > valid0() - LEAD);
}

#[test]
fn exec_ignores_a_keep_stop() {
    let mut s = hold();
    assert!(decide(&mut s, Event::Stop, at(1_000)).is_empty());
    assert!(!s.stopping);
}

#[test]
fn keep_unconfirmed_lease_is_a_loss_that_names_redis() {
    let mut s = keep();
    tick(&mut s, at(10_000));
    let a = tick(&mut s, valid0() - LEAD);
    assert_eq!(lost(&a).unwrap().0, super::KEEP_UNCONFIRMED);
    assert!(a.contains(&Action::Terminate));
}

#[test]
fn keep_unconfirmed_lease_under_ignore_is_a_loss_that_ends_keeping() {
    let mut s = keep_with(OnLost::Ignore);
    tick(&mut s, at(10_000));
    let a = tick(&mut s, valid0() - LEAD);
    assert!(signals(&a).is_empty());
    assert!(lost(&a).is_some());
    assert_eq!(a.last(), Some(&Action::Finish));
    assert_eq!(s.end(), End::LeaveToLease);
}

#[test]
fn keep_definite_loss_under_ignore_ends_keeping_without_a_signal() {
    let mut s = keep_with(OnLost::Ignore);
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), at(12_000));
    assert!(signals(&a).is_empty());
    assert_eq!(a.last(), Some(&Action::Finish));
    assert_eq!(s.end(), End::LeaveToLease);
}

#[test]
fn keep_loss_then_cover_gone_leaves_the_lock_to_its_lease() {
    let mut s = keep();
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(12_000));
    assert_eq!(
        decide(&mut s, Event::Empty, at(12_500)),
        vec![Action::Finish]
    );
    assert_eq!(s.end(), End::LeaveToLease);
}

#[test]
fn keep_break_then_cover_gone_gives_the_broken_hold_back() {
    let mut s = keep();
    decide(&mut s, Event::Lost(BROKEN.into()), at(12_000));
    decide(&mut s, Event::Empty, at(12_500));
    assert_eq!(s.end(), End::GiveBackBroken);
}

#[test]
fn keep_break_whose_cover_outlives_the_kill_is_left_to_the_lease() {
    let mut s = keep();
    decide(&mut s, Event::Lost(BROKEN.into()), at(12_000));
    assert!(tick(&mut s, at(17_000)).contains(&Action::Kill));
    assert_eq!(tick(&mut s, at(18_000)), vec![Action::Finish]);
    assert_eq!(s.end(), End::LeaveToLease);
}

#[test]
fn keep_definite_loss_kill_is_cut_to_the_kill_point() {
    // (The keeper once gave a definite loss its whole grace.)
    let mut s = hold_with(Policy {
        holder: Holder::Keep,
        grace: Duration::from_secs(60),
        ..policy(OnLost::Term)
    });
    decide(&mut s, Event::Lost(LOST_TAKEN.into()), at(12_000));
    assert_eq!(s.kill_at, Some((kill_point(valid0(), TTL), None)));
}

#[test]
fn keep_loss_under_on_lost_kill_tells_the_guard_and_waits_a_second() {
    let mut s = keep_with(OnLost::Kill);
    let now = at(12_000);
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), now);
    let from = a.iter().position(|x| *x == Action::StopRenewer).unwrap();
    assert_eq!(
        &a[from..from + 3],
        &[Action::StopRenewer, Action::Deadline(now), Action::Kill]
    );
    assert_eq!(s.abandon_at, Some(now + ABANDON_AFTER));
}

#[test]
fn exec_kill_waits_for_the_guard_not_a_second() {
    let mut s = hold_with(policy(OnLost::Kill));
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), at(12_000));
    assert!(!a.iter().any(|x| matches!(x, Action::Deadline(_))));
    assert_eq!(s.abandon_at, None);
}

#[test]
fn keep_release_pauses_renewals_until_its_verdict_or_deadline() {
    let mut s = keep();
    assert!(decide(&mut s, Event::Releasing(at(5_000)), at(1_000)).is_empty());
    assert!(s.renewals_paused(at(4_999)));
    assert!(!s.renewals_paused(at(5_000)));
    assert_eq!(wake_at(&s, at(1_000)), at(5_000));
    // Past the pause, no wake-up in the past.
    assert!(wake_at(&s, at(6_000)) > at(6_000));
}

#[test]
fn keep_release_verdict_that_gave_back_ends_quietly() {
    let mut s = keep();
    decide(&mut s, Event::Releasing(at(5_000)), at(1_000));
    let a = decide(&mut s, Event::ReleaseEnded { given_back: true }, at(1_200));
    assert_eq!(a, vec![Action::StopRenewer, Action::Finish]);
    assert_eq!(s.end(), End::Given);
}

#[test]
fn keep_release_verdict_held_resumes_renewals() {
    let mut s = keep();
    decide(&mut s, Event::Releasing(at(5_000)), at(1_000));
    let a = decide(&mut s, Event::ReleaseEnded { given_back: false }, at(1_200));
    assert!(a.is_empty());
    assert!(!s.renewals_paused(at(1_300)));
    assert!(s.releasing.is_none());
}

#[test]
fn keep_lock_gone_while_a_release_runs_is_no_loss() {
    let mut s = keep();
    decide(&mut s, Event::Releasing(at(5_000)), at(1_000));
    // Even past the pause: the verdict has not come yet.
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), at(6_000));
    assert!(lost(&a).is_none() && signals(&a).is_empty());
    assert_eq!(a.last(), Some(&Action::Finish));
    assert_eq!(s.end(), End::Given);
}

#[test]
fn exec_lock_gone_is_a_loss_whatever_keep_would_say() {
    let mut s = hold();
    decide(&mut s, Event::Releasing(at(5_000)), at(1_000));
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), at(2_000));
    assert!(lost(&a).is_some());
}

#[test]
fn keep_release_given_back_while_stopping_still_waits_for_the_cover() {
    let mut s = keep();
    decide(&mut s, Event::Stop, at(1_000));
    decide(&mut s, Event::Releasing(at(5_000)), at(1_100));
    let a = decide(&mut s, Event::ReleaseEnded { given_back: true }, at(1_200));
    assert!(!a.contains(&Action::Finish));
    assert_eq!(
        decide(&mut s, Event::Empty, at(1_500)),
        vec![Action::Finish]
    );
    assert_eq!(s.end(), End::Given);
}

fn keep_max_hold(on_lost: OnLost, d: Duration) -> State {
    hold_with(Policy {
        holder: Holder::Keep,
        max_hold: Some(d),
        ..policy(on_lost)
    })
}

#[test]
fn keep_max_hold_stops_renewing_terms_and_releases_once_gone() {
    let mut s = keep_max_hold(OnLost::Term, Duration::from_secs(2));
    let a = tick(&mut s, at(2_000));
    assert_eq!(
        a,
        vec![
            Action::StopRenewer,
            Action::Deadline(at(7_000)),
            Action::Terminate,
            Action::Report(Report::Overran(Duration::from_secs(2))),
        ]
    );
    assert!(s.overran && s.stopping);
    decide(&mut s, Event::Empty, at(3_000));
    assert_eq!(s.end(), End::Release);
}

#[test]
fn keep_max_hold_terms_even_under_on_lost_kill_or_ignore() {
    for p in [OnLost::Kill, OnLost::Ignore] {
        let mut s = keep_max_hold(p, Duration::from_secs(2));
        let a = tick(&mut s, at(2_000));
        assert!(a.contains(&Action::Terminate), "{p:?}");
        assert!(!a.contains(&Action::Kill), "{p:?}");
    }
}

#[test]
fn keep_max_hold_after_a_stop_does_nothing_more() {
    let mut s = keep_max_hold(OnLost::Term, Duration::from_secs(2));
    decide(&mut s, Event::Stop, at(1_000));
    let a = tick(&mut s, at(2_000));
    assert!(a.is_empty());
    assert!(!s.overran);
}

#[test]
fn keep_max_hold_whose_cover_outlives_the_kill_is_left_to_the_lease() {
    let mut s = keep_max_hold(OnLost::Term, Duration::from_secs(2));
    tick(&mut s, at(2_000));
    assert!(tick(&mut s, at(7_000)).contains(&Action::Kill));
    assert_eq!(tick(&mut s, at(8_000)), vec![Action::Finish]);
    assert_eq!(s.end(), End::LeaveToLease);
}
