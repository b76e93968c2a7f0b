//! `decide` with synthetic events and times: no process, no Redis. The
//! lease: TTL 30 s, its grant's request sent at `at(0)`, valid until
//! `at(30_000)` minus the drift allowance; grace 5 s.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use super::*;
use crate::hold::{End, Holder, Policy, kill_point};
use crate::lock::{LOST_GONE, LOST_TAKEN};

const TTL: Duration = Duration::from_secs(30);
const GRACE: Duration = Duration::from_secs(5);
const LEAD: Duration = Duration::from_secs(10);

/// `ms` milliseconds after the grant's request.
fn at(ms: u64) -> BootTime {
    BootTime::from_since_boot(Duration::from_secs(1000) + Duration::from_millis(ms))
}

/// The validity deadline of the grant.
fn valid0() -> BootTime {
    at(30_000) - crate::lock::drift(TTL)
}

fn policy(on_lost: OnLost) -> Policy {
    Policy {
        holder: Holder::Exec,
        on_lost,
        grace: GRACE,
        kill_leftovers: false,
        max_hold: None,
    }
}

fn hold_with(p: Policy) -> State {
    // --max-hold counts from the grant's request, as exec's `run` does.
    State::new(p, valid0(), TTL, p.max_hold.map(|d| at(0) + d))
}

fn hold() -> State {
    hold_with(policy(OnLost::Term))
}

fn exited(code: i32) -> ExitStatus {
    ExitStatus::from_raw(code << 8)
}

fn reports(actions: &[Action]) -> Vec<&Report> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Report(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// The loss report's (why, action), if there is one.
fn lost(actions: &[Action]) -> Option<(String, String)> {
    reports(actions).into_iter().find_map(|r| match r {
        Report::Lost { why, action } => Some((why.clone(), action.clone())),
        _ => None,
    })
}

fn signals(actions: &[Action]) -> Vec<&Action> {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Forward(_) | Action::Terminate | Action::Kill))
        .collect()
}

/// Tick at `now`.
fn tick(s: &mut State, now: BootTime) -> Vec<Action> {
    decide(s, Event::Tick, now)
}

// --- renewal timing and the lead -----------------------------------------

#[test]
fn renewer_starts_when_the_first_renewal_is_due_and_not_before() {
    let mut s = hold();
    assert!(tick(&mut s, at(9_999)).is_empty());
    assert_eq!(tick(&mut s, at(10_000)), vec![Action::StartRenewer]);
}

#[test]
fn renewer_starts_only_once() {
    let mut s = hold();
    assert_eq!(tick(&mut s, at(10_000)), vec![Action::StartRenewer]);
    assert!(tick(&mut s, at(10_001)).is_empty());
    let a = decide(&mut s, Event::Signal(libc::SIGUSR1), at(11_000));
    assert!(!a.contains(&Action::StartRenewer));
}

#[test]
fn renewer_starts_before_any_report_may_block() {
    let mut s = hold();
    let a = decide(&mut s, Event::Signal(libc::SIGUSR1), at(1_000));
    assert_eq!(
        a,
        vec![
            Action::Forward(libc::SIGUSR1),
            Action::StartRenewer,
            Action::Report(Report::Forwarded(libc::SIGUSR1)),
        ]
    );
}

#[test]
fn renewer_is_never_started_after_a_loss() {
    let mut s = hold();
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), at(1_000));
    assert!(a.contains(&Action::StopRenewer));
    assert!(!a.contains(&Action::StartRenewer));
    assert!(!tick(&mut s, at(10_000)).contains(&Action::StartRenewer));
    let a = decide(&mut s, Event::Signal(libc::SIGUSR1), at(10_500));
    assert!(!a.contains(&Action::StartRenewer));
}

#[test]
fn first_wake_up_is_the_renewers_start() {
    let s = hold();
    assert_eq!(wake_at(&s, at(0)), at(10_000));
}

#[test]
fn once_renewing_the_wake_up_is_the_lead_before_validity_end() {
    let mut s = hold();
    tick(&mut s, at(10_000));
    assert_eq!(wake_at(&s, at(10_000)), valid0() - LEAD);
}

#[test]
fn a_confirmed_renewal_moves_the_loss_point_later() {
    let mut s = hold();
    tick(&mut s, at(10_000));
    let renewed = at(40_000);
    assert!(decide(&mut s, Event::Renewed(renewed), at(10_050)).is_empty());
    assert_eq!(wake_at(&s, at(10_050)), renewed - LEAD);
    // The old loss point passes quietly.
    assert!(tick(&mut s, valid0() - LEAD).is_empty());
    assert!(lost(&tick(&mut s, renewed - LEAD)).is_some());
}

#[test]
fn no_confirmation_is_a_loss_exactly_ttl_over_3_before_validity_end() {
    let mut s = hold();
    tick(&mut s, at(10_000));
    let a = tick(&mut s, valid0() - LEAD);
    let (why, _) = lost(&a).expect("a loss");
    assert_eq!(why, "no renewal confirmed for 20s");
    assert_eq!(s.lost.as_deref(), Some("no renewal confirmed for 20s"));
}

#[test]
fn no_confirmation_is_not_a_loss_a_tick_earlier() {
    let mut s = hold();
    tick(&mut s, at(10_000));
    let just_before =
        BootTime::from_since_boot((valid0() - LEAD).since_boot() - Duration::from_nanos(1));
    assert!(tick(&mut s, just_before).is_empty());
    assert!(s.lost.is_none());
}

#[test]
fn frozen_redis_loss_terms_now_and_kills_after_grace() {
    let mut s = hold();
    tick(&mut s, at(10_000));
    let now = valid0() - LEAD;
    let a = tick(&mut s, now);
    assert_eq!(a[0], Action::StopRenewer);
    assert_eq!(a[1], Action::Deadline(now + GRACE));
    assert_eq!(a[2], Action::Terminate);
    let (_, action) = lost(&a).unwrap();
    assert_eq!(
        action,
        "sent SIGTERM to the command, SIGKILL in 5s if it is still running"
    );
    assert_eq!(wake_at(&s, now), now + GRACE);
}

#[test]
fn loss_sigkill_comes_at_the_end_of_grace_without_a_second_line() {
    let mut s = hold();
    let now = at(2_000);
    decide(&mut s, Event::Lost(LOST_GONE.into()), now);
    assert!(tick(&mut s, now + GRACE - Duration::from_millis(1)).is_empty());
    assert_eq!(tick(&mut s, now + GRACE), vec![Action::Kill]);
    assert!(tick(&mut s, now + GRACE + GRACE).is_empty());
}

// --- definite losses --------------------------------------------------------

#[test]
fn lock_gone_terms_now_and_kills_at_now_plus_grace() {
    let mut s = hold();
    let now = at(12_000);
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), now);
    assert_eq!(
        signals(&a),
        vec![&Action::Terminate],
        "SIGTERM by rlock's own walk only"
    );
    assert!(a.contains(&Action::Deadline(now + GRACE)));
    assert_eq!(lost(&a).unwrap().0, LOST_GONE);
    assert_eq!(s.kill_at, Some((now + GRACE, None)));
}

#[test]
fn lock_taken_reports_why_and_terms() {
    let mut s = hold();
    let a = decide(
        &mut s,
        Event::Lost(crate::lock::LOST_TAKEN.into()),
        at(12_000),
    );
    assert_eq!(lost(&a).unwrap().0, crate::lock::LOST_TAKEN);
    assert!(a.contains(&Action::Terminate));
}

#[test]
fn lock_broken_reports_who_broke_it() {
    let mut s = hold();
    let why = format!("{} ops (reason: stuck)", crate::lock::breaking::BROKEN_BY);
    let a = decide(&mut s, Event::Lost(why.clone()), at(3_000));
    assert_eq!(lost(&a).unwrap().0, why);
    assert_eq!(s.lost, Some(why));
}

#[test]
fn loss_kill_is_cut_to_the_kill_point_when_grace_is_longer() {
    let mut s = hold_with(Policy {
        grace: Duration::from_secs(60),
        ..policy(OnLost::Term)
    });
    let now = at(12_000);
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), now);
    let kp = kill_point(valid0(), TTL);
    assert!(a.contains(&Action::Deadline(kp)));
    assert_eq!(s.kill_at, Some((kp, None)));
}

#[test]
fn loss_with_no_time_left_before_the_kill_point_kills_at_once() {
    let mut s = hold();
    let kp = kill_point(valid0(), TTL);
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), kp);
    assert_eq!(signals(&a), vec![&Action::Kill]);
    assert!(!a.iter().any(|x| matches!(x, Action::Deadline(_))));
    assert_eq!(
        lost(&a).unwrap().1,
        "killed the command: no time was left for a grace period"
    );
    assert_eq!(s.kill_at, None);
}

#[test]
fn on_lost_kill_kills_at_once() {
    let mut s = hold_with(policy(OnLost::Kill));
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), at(5_000));
    assert_eq!(
        a,
        vec![
            Action::StopRenewer,
            Action::Kill,
            Action::Report(Report::Lost {
                why: LOST_GONE.into(),
                action: "killed the command".into(),
            }),
        ]
    );
}

#[test]
fn on_lost_kill_drops_a_pending_grace_kill() {
    let mut s = hold_with(policy(OnLost::Kill));
    decide(&mut s, Event::Signal(libc::SIGHUP), at(1_000));
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(2_000));
    assert_eq!(s.kill_at, None);
    assert!(signals(&tick(&mut s, at(1_000) + GRACE)).is_empty());
}

#[test]
fn on_lost_ignore_sends_no_signal_and_reports_only() {
    let mut s = hold_with(policy(OnLost::Ignore));
    let a = decide(&mut s, Event::Lost(LOST_GONE.into()), at(5_000));
    assert_eq!(
        a,
        vec![
            Action::StopRenewer,
            Action::Report(Report::Lost {
                why: LOST_GONE.into(),
                action: "the command runs on without the lock (--on-lost ignore)".into(),
            }),
        ]
    );
    assert!(signals(&tick(&mut s, at(60_000))).is_empty());
}

#[test]
fn on_lost_ignore_reports_no_confirmation_once_and_keeps_renewing() {
    let mut s = hold_with(policy(OnLost::Ignore));
    tick(&mut s, at(10_000));
    let a = tick(&mut s, valid0() - LEAD);
    assert_eq!(
        a,
        vec![Action::Report(Report::Unconfirmed(Duration::from_secs(20)))]
    );
    assert!(s.lost.is_none());
    assert!(tick(&mut s, valid0()).is_empty(), "said once");
    // Looked at again within a second, for a renewal.
    assert_eq!(wake_at(&s, valid0()), valid0() + Duration::from_secs(1));
}

#[test]
fn on_lost_ignore_reports_again_after_a_renewal_came_back() {
    let mut s = hold_with(policy(OnLost::Ignore));
    tick(&mut s, at(10_000));
    tick(&mut s, valid0() - LEAD);
    decide(&mut s, Event::Renewed(at(60_000)), at(25_000));
    assert!(tick(&mut s, at(25_000)).is_empty());
    assert!(!s.stalled);
    assert_eq!(
        reports(&tick(&mut s, at(50_000))),
        vec![&Report::Unconfirmed(Duration::from_secs(20))]
    );
}

#[test]
fn a_second_loss_is_not_reported() {
    let mut s = hold();
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(5_000));
    assert!(
        decide(
            &mut s,
            Event::Lost(crate::lock::LOST_TAKEN.into()),
            at(5_100)
        )
        .is_empty()
    );
    assert_eq!(s.lost.as_deref(), Some(LOST_GONE));
}

#[test]
fn late_renewal_confirmation_after_a_loss_revives_nothing() {
    let mut s = hold();
    let now = at(12_000);
    decide(&mut s, Event::Lost(LOST_GONE.into()), now);
    assert!(decide(&mut s, Event::Renewed(at(90_000)), now).is_empty());
    assert_eq!(s.valid_until, valid0());
    assert_eq!(s.kill_at, Some((now + GRACE, None)));
    assert_eq!(tick(&mut s, now + GRACE), vec![Action::Kill]);
}

#[test]
fn late_renewal_after_a_stall_loss_does_not_cancel_the_kill() {
    let mut s = hold();
    tick(&mut s, at(10_000));
    let now = valid0() - LEAD;
    tick(&mut s, now);
    decide(
        &mut s,
        Event::Renewed(at(70_000)),
        now + Duration::from_secs(1),
    );
    assert_eq!(tick(&mut s, now + GRACE), vec![Action::Kill]);
    assert!(s.lost.is_some());
}

#[test]
fn kill_deadlines_never_move_later_than_the_leases_kill_point() {
    let kp = kill_point(valid0(), TTL);
    for grace_s in [0, 1, 5, 19, 20, 25, 600] {
        for now_ms in [0, 5_000, 12_000, 19_000, 29_000] {
            let mut s = hold_with(Policy {
                grace: Duration::from_secs(grace_s),
                ..policy(OnLost::Term)
            });
            let a = decide(&mut s, Event::Lost(LOST_GONE.into()), at(now_ms));
            for x in &a {
                if let Action::Deadline(d) = x {
                    assert!(*d <= kp, "grace {grace_s}s at {now_ms}ms: {d:?} > {kp:?}");
                }
            }
            if let Some((k, _)) = s.kill_at {
                assert!(k <= kp, "grace {grace_s}s at {now_ms}ms");
            }
        }
    }
}

// --- the guard's reports ----------------------------------------------------

#[test]
fn guard_enforcing_after_the_start_is_a_loss_by_a_stalled_rlock() {
    let mut s = hold();
    decide(&mut s, Event::Started, at(10));
    let a = decide(&mut s, Event::Enforced, at(29_500));
    assert!(signals(&a).is_empty(), "the guard killed already");
    let (why, action) = lost(&a).unwrap();
    assert_eq!(
        why,
        "no renewal was confirmed in time (rlock stalled?); the guard killed the command \
         250ms before the lease's end"
    );
    assert_eq!(action, "killed every process of the command");
    assert_eq!(a.last(), Some(&Action::StopRenewer));
}

#[test]
fn guard_enforcing_before_the_start_says_the_command_did_not_run() {
    let mut s = hold();
    let a = decide(&mut s, Event::Enforced, at(29_800));
    let (why, action) = lost(&a).unwrap();
    assert!(why.starts_with("the guard process was stopped or starved"));
    assert_eq!(action, "the command was not started");
}

#[test]
fn guard_enforcing_after_a_loss_adds_nothing() {
    let mut s = hold();
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(5_000));
    assert!(decide(&mut s, Event::Enforced, at(10_000)).is_empty());
}

#[test]
fn started_takes_no_action() {
    let mut s = hold();
    assert!(decide(&mut s, Event::Started, at(5)).is_empty());
    assert!(s.started);
}

#[test]
fn no_start_report_from_a_stopped_guard_still_enforces_the_lease() {
    // The guard never reported "started" (stopped between the exec and
    // the report): the lease is enforced all the same.
    let mut s = hold();
    tick(&mut s, at(10_000));
    let a = tick(&mut s, valid0() - LEAD);
    assert!(a.contains(&Action::Terminate));
    assert!(lost(&a).is_some());
}

#[test]
fn the_tree_empty_ends_supervision() {
    let mut s = hold();
    decide(&mut s, Event::Started, at(5));
    decide(&mut s, Event::Exited(exited(0)), at(100));
    let a = decide(&mut s, Event::Empty, at(120));
    assert_eq!(a, vec![Action::StopRenewer, Action::Finish]);
    assert_eq!(s.ended, Some(at(120)));
    assert!(s.status.is_some_and(|st| st.success()));
}

#[test]
fn the_tree_empty_after_a_loss_just_finishes() {
    let mut s = hold();
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(5_000));
    assert_eq!(
        decide(&mut s, Event::Empty, at(6_000)),
        vec![Action::Finish]
    );
    assert_eq!(s.lost.as_deref(), Some(LOST_GONE));
}

#[test]
fn spawn_failure_ends_supervision_with_the_error() {
    let mut s = hold();
    let e = std::io::Error::from_raw_os_error(libc::ENOENT);
    let a = decide(&mut s, Event::SpawnFailed(e), at(3));
    assert_eq!(a, vec![Action::StopRenewer, Action::Finish]);
    assert_eq!(
        s.spawn_failed.as_ref().map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
    assert!(s.status.is_none());
}

#[test]
fn guard_killed_ends_supervision_as_such() {
    let mut s = hold();
    decide(&mut s, Event::Started, at(5));
    let a = decide(&mut s, Event::GuardGone, at(2_000));
    assert_eq!(a, vec![Action::StopRenewer, Action::Finish]);
    assert!(s.guard_killed);
    assert!(s.ended.is_none());
}

// --- the command's exit -----------------------------------------------------

#[test]
fn exit_without_kill_leftovers_keeps_holding_for_what_is_left() {
    let mut s = hold();
    assert!(decide(&mut s, Event::Exited(exited(3)), at(1_000)).is_empty());
    assert_eq!(s.status.and_then(|st| st.code()), Some(3));
    assert_eq!(s.kill_at, None);
    // Still renewed.
    assert_eq!(tick(&mut s, at(10_000)), vec![Action::StartRenewer]);
}

#[test]
fn kill_leftovers_terms_what_is_left_then_kills_after_grace() {
    let mut s = hold_with(Policy {
        kill_leftovers: true,
        ..policy(OnLost::Term)
    });
    let a = decide(&mut s, Event::Exited(exited(0)), at(1_000));
    assert_eq!(a, vec![Action::Forward(libc::SIGTERM)]);
    assert!(tick(&mut s, at(5_999)).is_empty());
    let a = tick(&mut s, at(6_000));
    assert_eq!(
        a,
        vec![
            Action::Kill,
            Action::StartRenewer,
            Action::Report(Report::Killed {
                cause: KillCause::Leftovers,
                command: false,
            }),
        ]
    );
}

#[test]
fn command_exiting_while_the_lock_is_lost_takes_its_leftovers_along() {
    let mut s = hold();
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(5_000));
    assert_eq!(
        decide(&mut s, Event::Exited(exited(143)), at(5_100)),
        vec![Action::Kill]
    );
}

#[test]
fn command_exiting_while_lost_under_ignore_kills_nothing() {
    let mut s = hold_with(Policy {
        kill_leftovers: false,
        ..policy(OnLost::Ignore)
    });
    decide(&mut s, Event::Lost(LOST_GONE.into()), at(5_000));
    assert!(decide(&mut s, Event::Exited(exited(0)), at(5_100)).is_empty());
}

// Signals for rlock, --max-hold, terminal stops and the wake-up.
mod stops;

// The keeper's transitions (Holder::Keep): a file of their own.
mod keep;
