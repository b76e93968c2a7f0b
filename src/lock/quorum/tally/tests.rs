//! The tallies, on answers made up for 1, 3 and 5 masters.

use super::*;
use crate::lock::HolderInfo;

type A = Option<Result<Outcome>>;

fn g(fence: u64) -> A {
    gc(fence, 1)
}

fn gc(fence: u64, count: u64) -> A {
    Some(Ok(Outcome::Granted { fence, count }))
}

fn busy_by(pid: u32) -> A {
    let b = Busy {
        key: "k".into(),
        holder: Some(HolderInfo {
            host: "h".into(),
            pid,
            ..HolderInfo::default()
        }),
        since_ms: 0,
        expires_in: Duration::from_secs(1),
        position: 0,
        holders: 1,
        holder_ttl: Duration::from_secs(1),
        waited: Duration::ZERO,
    };
    Some(Ok(Outcome::Busy(b, 7, String::new())))
}

fn not_held() -> A {
    Some(Ok(Outcome::NotHeld))
}

/// A release's "this token holds nothing".
fn nobody() -> Option<Result<Released>> {
    Some(Ok(Released::NotHeld))
}

fn down<T>() -> Option<Result<T>> {
    Some(Err(Error::unavailable(
        "acquire \"k\" on Redis at m2",
        redis::RedisError::from((redis::ErrorKind::Io, "timed out")),
    )))
}

fn refusal<T>() -> Option<Result<T>> {
    Some(Err(Error::Conflict("not an rlock lock".into())))
}

fn lost<T>() -> Option<Result<T>> {
    Some(Err(Error::Lost {
        key: "k".into(),
        why: "gone".into(),
    }))
}

fn taken<T>() -> Option<Result<T>> {
    Some(Err(Error::NotOwner { key: "k".into() }))
}

fn ok<T>(v: T) -> Option<Result<T>> {
    Some(Ok(v))
}

fn secs(s: u64) -> BootTime {
    BootTime::from_since_boot(Duration::from_secs(s))
}

#[test]
fn majority_of_one_to_seven_masters() {
    let m: Vec<usize> = (1..=7).map(majority).collect();
    assert_eq!(m, [1, 2, 2, 3, 3, 4, 4]);
}

#[test]
fn agreement_needs_a_majority_at_one_fence() {
    assert_eq!(agreed(&vec![g(7), g(7), busy_by(1)], 2), Some(7));
    assert_eq!(agreed(&vec![g(7), g(8), busy_by(1)], 2), None);
    assert_eq!(agreed(&vec![g(7), g(9), g(7), g(9), g(7)], 3), Some(7));
    assert_eq!(agreed(&vec![g(7), g(9), g(7), g(9), None], 3), None);
    assert_eq!(agreed(&vec![g(3)], 1), Some(3));
    assert_eq!(agreed(&vec![None], 1), None);
}

#[test]
fn agreement_counts_grants_only() {
    let a = vec![g(5), down(), refusal(), None, not_held()];
    assert_eq!(agreed(&a, 3), None);
    assert_eq!(agreed(&a, 1), Some(5));
}

#[test]
fn a_fresh_attempt_is_decided_once_a_majority_agrees() {
    assert!(!attempt_decided(&vec![g(7), None, None], 2, false));
    assert!(attempt_decided(&vec![g(7), g(7), None], 2, false));
    assert!(attempt_decided(&vec![g(1)], 1, false));
}

#[test]
fn a_fresh_attempt_is_decided_once_no_majority_can_agree() {
    // Busy and unreachable: the last master alone cannot make two.
    assert!(attempt_decided(&vec![busy_by(1), down(), None], 2, false));
    assert!(!attempt_decided(&vec![busy_by(1), None, None], 2, false));
    // Five masters, split 2-2 at two fences: the fifth decides.
    assert!(!attempt_decided(
        &vec![g(7), g(7), g(8), g(8), None],
        3,
        false
    ));
    assert!(attempt_decided(
        &vec![g(7), g(7), g(8), g(8), g(7)],
        3,
        false
    ));
    assert!(attempt_decided(
        &vec![g(7), g(7), g(8), g(8), down()],
        3,
        false
    ));
    // One each at two fences, two unknown: three may still agree.
    assert!(!attempt_decided(
        &vec![g(7), g(8), None, None, busy_by(1)],
        3,
        false
    ));
}

#[test]
fn a_reentry_is_decided_by_a_majority_of_grants_whatever_the_fences() {
    assert!(attempt_decided(&vec![g(7), g(9), None], 2, true));
    // A failed one waits for every answer (each added hold is undone).
    assert!(!attempt_decided(
        &vec![g(7), not_held(), not_held()],
        2,
        true
    ));
    assert!(!attempt_decided(&vec![g(7), down(), None], 2, true));
}

#[test]
fn disagreement_is_a_majority_of_grants_at_no_common_fence() {
    assert!(disagree(&vec![g(7), g(8), busy_by(1)], 2));
    assert!(!disagree(&vec![g(7), g(7), g(8)], 2));
    assert!(!disagree(&vec![g(7), busy_by(1), busy_by(1)], 2));
    assert!(disagree(&vec![g(1), g(2), g(3), g(4), g(5)], 3));
}

#[test]
fn a_fresh_grant_needs_an_agreed_fence() {
    assert_eq!(
        grant(&vec![gc(7, 1), gc(7, 1), busy_by(1)], 2, false),
        Some((7, 1))
    );
    assert_eq!(grant(&vec![g(7), g(8), g(9)], 2, false), None);
    assert_eq!(grant(&vec![g(7), None, None], 2, false), None);
    assert_eq!(grant(&vec![g(4)], 1, false), Some((4, 1)));
}

#[test]
fn a_reentry_takes_the_highest_fence_and_the_deepest_count() {
    let apart = vec![gc(7, 2), gc(9, 3), busy_by(1)];
    assert_eq!(grant(&apart, 2, true), Some((9, 3)));
    assert_eq!(grant(&apart, 2, false), None);
    // Agreed: the agreed fence, even where another is higher.
    let agree = vec![gc(7, 2), gc(7, 4), gc(8, 1)];
    assert_eq!(grant(&agree, 2, true), Some((7, 4)));
    assert_eq!(grant(&vec![gc(7, 2), None, None], 2, true), None);
}

#[test]
fn a_refusal_is_found_past_unreachable_masters() {
    assert_eq!(refused(&vec![down(), busy_by(1), refusal()]), Some(2));
    assert_eq!(refused(&vec![down(), None, busy_by(1), g(3)]), None);
}

#[test]
fn busy_names_the_first_holder_seen() {
    let b = busy(&vec![g(7), busy_by(11), busy_by(22)]).unwrap();
    assert_eq!(b.holder.unwrap().pid, 11);
    assert!(busy(&vec![g(7), down(), None]).is_none());
}

#[test]
fn undo_targets_every_master_that_may_hold_a_grant() {
    let a = vec![g(7), busy_by(1), not_held(), down(), refusal(), None];
    assert_eq!(
        undo_targets(&a, &[true; 6]),
        [true, false, false, true, false, true]
    );
    // A master skipped (still busy with an earlier call) was not asked.
    let ran = [false, true, true, false, true, false];
    assert_eq!(undo_targets(&a, &ran), [false; 6]);
}

#[test]
fn granted_on_marks_grants_only() {
    let a = vec![g(7), busy_by(1), None, down(), gc(7, 2)];
    assert_eq!(granted_on(&a), [true, false, false, false, true]);
}

#[test]
fn a_reentry_not_held_on_a_majority_acquires_afresh() {
    let a = vec![not_held(), not_held(), down()];
    assert!(failed_reentry(a, 0, 2, "k").is_ok());
}

#[test]
fn a_failed_reentry_reports_a_refusal_first() {
    let a = vec![down(), refusal(), not_held()];
    let e = failed_reentry(a, 0, 2, "k").unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
}

#[test]
fn a_failed_reentry_says_how_many_masters_reentered() {
    let e = failed_reentry(vec![g(7), down(), None], 1, 2, "k").unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }));
    assert!(
        e.to_string().starts_with(
            "re-enter \"k\": 1 of 3 Redis masters re-entered, RedLock needs 2; given back"
        ),
        "{e}"
    );
    let late = failed_reentry(vec![g(7), g(7), None], 2, 2, "k").unwrap_err();
    assert!(
        late.to_string()
            .contains("the re-entry arrived after its lease's validity deadline"),
        "{late}"
    );
}

#[test]
fn a_release_a_majority_confirms_frees_the_lock() {
    let a = vec![ok(Released::Released), ok(Released::Released), down()];
    assert_eq!(released(a, 2, "k").unwrap(), Released::Released);
    let a = vec![
        ok(Released::StillHeld(2)),
        ok(Released::StillHeld(3)),
        ok(Released::Released),
    ];
    assert_eq!(released(a, 2, "k").unwrap(), Released::StillHeld(3));
    assert_eq!(
        released(vec![ok(Released::Released)], 1, "k").unwrap(),
        Released::Released
    );
}

#[test]
fn a_release_nobody_held_is_not_held() {
    let a = vec![ok(Released::Released), nobody(), nobody()];
    assert_eq!(released(a, 2, "k").unwrap(), Released::NotHeld);
    assert_eq!(released(vec![nobody()], 1, "k").unwrap(), Released::NotHeld);
    // A tie between another owner and nobody: nobody.
    let a = vec![taken(), nobody(), down()];
    assert_eq!(released(a, 2, "k").unwrap(), Released::NotHeld);
}

#[test]
fn a_release_another_owner_holds_fails_as_not_owner() {
    let a = vec![taken(), taken(), ok(Released::Released)];
    assert!(matches!(released(a, 2, "k"), Err(Error::NotOwner { .. })));
    // Outnumbering "nobody holds it", with a majority answering.
    let a = vec![taken(), ok(Released::Released), down()];
    assert!(matches!(released(a, 2, "k"), Err(Error::NotOwner { .. })));
}

#[test]
fn a_release_without_a_majority_answering_fails() {
    let a = vec![ok(Released::Released), down(), None];
    let e = released(a, 2, "k").unwrap_err();
    assert!(
        e.to_string().starts_with("acquire \"k\" on Redis at m2"),
        "{e}"
    );
    let a = vec![ok(Released::Released), None, None];
    let e = released(a, 2, "k").unwrap_err();
    assert!(
        e.to_string().starts_with(
            "release \"k\": 1 of 3 Redis masters answered as needed, RedLock needs 2:"
        ),
        "{e}"
    );
}

#[test]
fn a_confirmation_is_decided_by_a_majority_either_way() {
    assert!(confirm_decided(&vec![ok(1), ok(1), None], 2));
    assert!(!confirm_decided(&vec![ok(1), lost::<i32>(), None], 2));
    assert!(confirm_decided(&vec![lost::<i32>(), taken(), None], 2));
    assert!(!confirm_decided(
        &vec![lost::<i32>(), lost(), ok(1), None, None],
        3
    ));
    assert!(confirm_decided(
        &vec![lost::<i32>(), lost(), taken(), None, None],
        3
    ));
}

#[test]
fn a_confirmation_returns_the_majoritys_answers() {
    let a = vec![ok(1), ok(2), lost()];
    assert_eq!(confirmed(&a, 2, "renew", "k").unwrap(), [1, 2]);
}

#[test]
fn a_confirmation_gone_on_a_majority_says_lost_or_not_owner() {
    let e = confirmed(&vec![lost(), lost(), ok(1)], 2, "renew", "k").unwrap_err();
    assert_eq!(
        e.to_string(),
        "lock \"k\" was lost: a majority of the Redis masters no longer hold it"
    );
    let e = confirmed(&vec![taken(), taken(), ok(1)], 2, "renew", "k").unwrap_err();
    assert!(matches!(e, Error::NotOwner { .. }));
    // As many lost as taken: lost.
    let e = confirmed(&vec![lost(), taken(), ok(1)], 2, "check", "k").unwrap_err();
    assert!(matches!(e, Error::Lost { .. }));
}

#[test]
fn a_confirmation_with_too_few_answers_names_one_error() {
    let a = vec![ok(1), ok(2), lost(), down(), None];
    let e = confirmed(&a, 3, "renew", "k").unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }));
    let text = e.to_string();
    assert!(
        text.starts_with(
            "renew \"k\": 2 of 5 Redis masters answered as needed, RedLock needs 3 \
             (one said: lock \"k\" was lost: gone)"
        ),
        "{text}"
    );
}

#[test]
fn a_renewal_holds_until_the_mth_latest_end() {
    assert_eq!(
        valid_on_majority(vec![secs(10), secs(30), secs(20)], 2),
        secs(20)
    );
    let five = vec![secs(1), secs(5), secs(3), secs(4), secs(2)];
    assert_eq!(valid_on_majority(five, 3), secs(3));
    assert_eq!(valid_on_majority(vec![secs(7)], 1), secs(7));
}

#[test]
fn a_check_reports_the_mth_longest_lease_at_the_commonest_fence() {
    let h = |s: u64, fence: u64| Held {
        ttl: Duration::from_secs(s),
        fence,
    };
    assert_eq!(
        held_on_majority(vec![h(10, 7), h(30, 7), h(20, 9)], 2),
        h(20, 7)
    );
    // A tie between fences: the highest.
    assert_eq!(held_on_majority(vec![h(10, 7), h(20, 9)], 2), h(10, 9));
    assert_eq!(held_on_majority(vec![h(5, 3)], 1), h(5, 3));
}

#[test]
fn a_read_needs_a_majority_of_answers() {
    assert_eq!(
        answered(vec![None, down(), ok(5), ok(6)], 2, "status").unwrap(),
        [5, 6]
    );
    // Too few: a refusal is the real answer, else how many answered.
    let e = answered::<i32>(vec![down(), refusal(), ok(1)], 2, "status").unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    let e = answered::<i32>(vec![None, down(), ok(1)], 2, "status \"k\"").unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }));
    assert!(
        e.to_string()
            .starts_with("status \"k\": 1 of 3 Redis masters answered as needed, RedLock needs 2"),
        "{e}"
    );
}

/// A master that answered with an error about itself (too few replicas,
/// an ACL): it did answer.
fn complained<T>() -> Option<Result<T>> {
    Some(Err(Error::unavailable(
        "acquire \"k\" on Redis at m2",
        redis::RedisError::from((redis::ErrorKind::Client, "too few replicas")),
    )))
}

#[test]
fn a_master_is_silent_when_it_failed_or_was_waited_for_in_vain() {
    use Heard::*;
    // Two masters down: the busy one cannot make a majority alone.
    assert_eq!(
        heard(&vec![busy_by(1), down(), down()], 2),
        [Answered, Silent, Silent]
    );
    // Decided without the third (busy, and one down): not known.
    assert_eq!(
        heard(&vec![busy_by(1), down(), None], 2),
        [Answered, Silent, Unknown]
    );
    // Undecided: the fan-out waited for the two until its time was up.
    assert_eq!(
        heard(&vec![busy_by(1), None, None], 2),
        [Answered, Silent, Silent]
    );
    // Errors that are answers: a refusal, a master's own complaint.
    assert_eq!(
        heard(&vec![refusal(), complained(), g(3)], 2),
        [Answered, Answered, Answered]
    );
}

#[test]
fn out_of_reach_when_too_few_masters_are_left_to_answer() {
    use Heard::*;
    let fresh = [false; 5];
    assert!(out_of_reach(&[Answered, Silent, Silent], &fresh, 2));
    assert!(out_of_reach(&[Silent, Silent, Silent], &fresh, 2));
    // One master down and a busy lock: busy, not out of reach.
    assert!(!out_of_reach(&[Answered, Silent, Unknown], &fresh, 2));
    assert!(!out_of_reach(&[Answered, Silent, Answered], &fresh, 2));
    assert!(!out_of_reach(
        &[Answered, Answered, Silent, Silent, Unknown],
        &fresh,
        3
    ));
    assert!(out_of_reach(
        &[Answered, Silent, Silent, Silent, Unknown],
        &fresh,
        3
    ));
    assert!(!out_of_reach(&[Answered], &fresh, 1));
    assert!(out_of_reach(&[Silent], &fresh, 1));
    // Two masters frozen together: the first to time out decided the
    // attempt without the other, which had been silent before.
    let before = [false, true, true];
    assert!(out_of_reach(&[Answered, Unknown, Silent], &before, 2));
    // One that answered since is not silent.
    assert!(!out_of_reach(&[Answered, Answered, Silent], &before, 2));
}

#[test]
fn no_answer_since_names_each_silent_master() {
    let since = [
        "Redis at a:1 has not answered since 2026-11-27T15:05:25Z (4.5s)".to_string(),
        "Redis at b:2 has not answered since 2026-11-27T15:05:26Z (3.5s)".to_string(),
    ];
    let e = no_answer_since("acquire \"k\"", 3, 2, None, &since);
    assert!(matches!(e, Error::Unavailable { .. }));
    assert!(
        e.to_string().starts_with(
            "acquire \"k\": RedLock needs 2 of 3 Redis masters; \
             Redis at a:1 has not answered since 2026-11-27T15:05:25Z (4.5s), \
             Redis at b:2 has not answered since 2026-11-27T15:05:26Z (3.5s): no majority"
        ),
        "{e}"
    );
    let said = Error::Conflict("refused".into());
    let e = no_answer_since("acquire \"k\"", 3, 2, Some(&said), &since[..1]);
    assert!(
        e.to_string()
            .contains("(3.5s) (one that did said: refused): ")
            || e.to_string()
                .contains("(4.5s) (one that did said: refused): "),
        "{e}"
    );
}

#[test]
fn no_answer_names_the_count_and_what_one_said() {
    let said = Error::Conflict("refused".into());
    let e = no_answer("acquire \"k\"", 1, 3, 2, Some(&said));
    assert!(matches!(e, Error::Unavailable { .. }));
    assert!(
        e.to_string().starts_with(
            "acquire \"k\": 1 of 3 Redis masters answered as needed, RedLock needs 2 \
             (one said: refused)"
        ),
        "{e}"
    );
}
