//! The guard's `decide` with synthetic events and times: no process, no
//! socket, no timer.

use std::time::Duration;

use super::*;

const GRACE: Duration = Duration::from_secs(5);

fn at(ms: u64) -> BootTime {
    BootTime::from_since_boot(Duration::from_secs(1000) + Duration::from_millis(ms))
}

/// exec's guard: it starts the command, kills on any close, and has
/// been told the deadline and how to release; the command started at 0.
fn exec() -> State {
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    decide(&mut s, Event::Deadline(Some(at(10_000))), at(0));
    decide(&mut s, Event::Release(true), at(0));
    assert_eq!(decide(&mut s, Event::Go, at(0)), [Action::Start]);
    s
}

/// keep's guard under `--on-lost term` with a grace, deadline at 10 s.
fn keep() -> State {
    let mut s = State::new(OnDeath::Term(GRACE), OnFinish::Leave, false);
    decide(&mut s, Event::Deadline(Some(at(10_000))), at(0));
    decide(&mut s, Event::Release(true), at(0));
    s
}

#[test]
fn exec_does_not_start_the_command_past_the_deadline() {
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    decide(&mut s, Event::Deadline(Some(at(10_000))), at(0));
    assert_eq!(
        decide(&mut s, Event::Go, at(10_000)),
        [Action::ReportEnforced, Action::ReportEmpty]
    );
    assert!(!s.started);
    // It stays for rlock's close: rlock releases, then says "finished".
    assert_eq!(
        decide(&mut s, Event::Closed { finished: true }, at(10_001)),
        [Action::Exit]
    );
}

#[test]
fn exec_starts_the_command_before_the_deadline_or_without_one() {
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    assert_eq!(decide(&mut s, Event::Go, at(0)), [Action::Start]);
    // A second go starts nothing.
    assert!(decide(&mut s, Event::Go, at(1)).is_empty());
}

#[test]
fn exec_before_the_go_ignores_its_timer_and_exits_when_the_holder_leaves() {
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    decide(&mut s, Event::Deadline(Some(at(10))), at(0));
    assert!(decide(&mut s, Event::Tick, at(20)).is_empty());
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(30)),
        [Action::Exit]
    );
}

#[test]
fn the_deadline_kills_and_exec_reports_it() {
    let mut s = exec();
    assert!(decide(&mut s, Event::Tick, at(9_999)).is_empty());
    assert_eq!(
        decide(&mut s, Event::Tick, at(10_000)),
        [Action::Kill, Action::ReportEnforced]
    );
}

#[test]
fn a_deadline_is_enforced_once() {
    let mut s = exec();
    decide(&mut s, Event::Tick, at(10_000));
    decide(&mut s, Event::Deadline(Some(at(10_000))), at(10_001));
    assert!(decide(&mut s, Event::Tick, at(10_002)).is_empty());
    assert_eq!(wake_at(&s), None);
}

#[test]
fn a_later_deadline_read_before_the_timer_moves_the_kill() {
    let mut s = exec();
    decide(&mut s, Event::Deadline(Some(at(20_000))), at(9_000));
    assert!(decide(&mut s, Event::Tick, at(10_000)).is_empty());
    assert_eq!(wake_at(&s), Some(at(20_000)));
    assert_eq!(decide(&mut s, Event::Tick, at(20_000))[0], Action::Kill);
}

#[test]
fn an_earlier_deadline_kills_sooner() {
    let mut s = keep();
    decide(&mut s, Event::Deadline(Some(at(3_000))), at(1_000));
    assert_eq!(wake_at(&s), Some(at(3_000)));
    assert_eq!(decide(&mut s, Event::Tick, at(3_000)), [Action::Kill]);
}

#[test]
fn no_deadline_no_wake() {
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    decide(&mut s, Event::Go, at(0));
    assert_eq!(wake_at(&s), None);
    assert!(decide(&mut s, Event::Tick, at(1_000_000)).is_empty());
}

#[test]
fn keep_reports_nothing_when_the_deadline_kills() {
    let mut s = keep();
    assert_eq!(decide(&mut s, Event::Tick, at(10_000)), [Action::Kill]);
}

#[test]
fn exec_holder_death_kills_at_once_and_hands_back_the_terminal_first() {
    let mut s = exec();
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(100)),
        [Action::HandBackTerminal, Action::Kill]
    );
    assert_eq!(s.holder, HolderIs::Dead);
}

#[test]
fn exec_clean_close_kills_what_is_left_and_releases_nothing() {
    let mut s = exec();
    assert_eq!(
        decide(&mut s, Event::Closed { finished: true }, at(100)),
        [Action::HandBackTerminal, Action::Kill]
    );
    assert_eq!(decide(&mut s, Event::Empty, at(200)), [Action::Exit]);
}

#[test]
fn exec_dead_holder_and_empty_tree_release() {
    let mut s = exec();
    decide(&mut s, Event::Closed { finished: false }, at(100));
    assert_eq!(
        decide(&mut s, Event::Empty, at(200)),
        [Action::Release, Action::Exit]
    );
}

#[test]
fn no_release_without_settings() {
    let mut s = exec();
    decide(&mut s, Event::Release(false), at(0));
    decide(&mut s, Event::Closed { finished: false }, at(100));
    assert_eq!(decide(&mut s, Event::Empty, at(200)), [Action::Exit]);
}

#[test]
fn exec_empty_while_the_holder_lives_is_reported() {
    let mut s = exec();
    assert_eq!(decide(&mut s, Event::Empty, at(500)), [Action::ReportEmpty]);
    // Once: the loop sees the empty reach on every turn.
    assert!(decide(&mut s, Event::Empty, at(501)).is_empty());
    // The guard stays for rlock's release, then its close as "finished".
    assert_eq!(
        decide(&mut s, Event::Closed { finished: true }, at(600)),
        [Action::HandBackTerminal, Action::Exit]
    );
}

#[test]
fn exec_dead_between_the_empty_tree_and_its_release_is_released_for() {
    // rlock heard the tree was gone and died before its release went out
    // (killed, crashed): the guard gives the holds back, not the lease's
    // end; the kill deadline passing meanwhile has nothing left to kill.
    let mut s = exec();
    decide(&mut s, Event::Release(true), at(0));
    assert_eq!(decide(&mut s, Event::Empty, at(500)), [Action::ReportEmpty]);
    assert!(decide(&mut s, Event::Tick, at(20_000)).is_empty());
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(20_001)),
        [Action::HandBackTerminal, Action::Release, Action::Exit]
    );
    // Without settings (a library caller without a releaser): none.
    let mut s = exec();
    decide(&mut s, Event::Release(false), at(0));
    decide(&mut s, Event::Empty, at(500));
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(600)),
        [Action::HandBackTerminal, Action::Exit]
    );
}

#[test]
fn keep_empty_while_the_keeper_lives_is_the_keepers_business() {
    let mut s = keep();
    assert!(decide(&mut s, Event::Empty, at(500)).is_empty());
}

#[test]
fn keep_finished_leaves_the_cover_alone() {
    let mut s = keep();
    assert_eq!(
        decide(&mut s, Event::Closed { finished: true }, at(100)),
        [Action::Exit]
    );
}

#[test]
fn keep_death_terms_then_kills_after_the_grace() {
    let mut s = keep();
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(1_000)),
        [Action::Terminate]
    );
    assert_eq!(wake_at(&s), Some(at(6_000)));
    assert!(decide(&mut s, Event::Tick, at(5_999)).is_empty());
    assert_eq!(decide(&mut s, Event::Tick, at(6_000)), [Action::Kill]);
    assert!(decide(&mut s, Event::Tick, at(7_000)).is_empty());
}

#[test]
fn keep_death_the_deadline_cuts_the_grace_short() {
    let mut s = keep();
    decide(&mut s, Event::Closed { finished: false }, at(8_000));
    assert_eq!(wake_at(&s), Some(at(10_000)));
    assert_eq!(decide(&mut s, Event::Tick, at(10_000)), [Action::Kill]);
    // The grace's SIGKILL is not sent again.
    assert_eq!(wake_at(&s), None);
    assert!(decide(&mut s, Event::Tick, at(13_000)).is_empty());
}

#[test]
fn keep_death_under_on_lost_kill_kills_at_once() {
    let mut s = State::new(OnDeath::Kill, OnFinish::Leave, false);
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(0)),
        [Action::Kill]
    );
}

#[test]
fn keep_death_then_empty_releases_at_once() {
    let mut s = keep();
    decide(&mut s, Event::Closed { finished: false }, at(1_000));
    assert_eq!(
        decide(&mut s, Event::Empty, at(1_200)),
        [Action::Release, Action::Exit]
    );
}

#[test]
fn keep_dead_keeper_with_nothing_left_releases_without_a_signal() {
    // The script was gone before the keeper died: TERM goes nowhere, and
    // the first look finds nothing.
    let mut s = keep();
    decide(&mut s, Event::Closed { finished: false }, at(1_000));
    assert_eq!(
        decide(&mut s, Event::Empty, at(1_000)),
        [Action::Release, Action::Exit]
    );
}

#[test]
fn a_second_close_decides_nothing() {
    let mut s = keep();
    decide(&mut s, Event::Closed { finished: false }, at(1_000));
    assert!(decide(&mut s, Event::Closed { finished: true }, at(1_001)).is_empty());
    assert_eq!(s.holder, HolderIs::Dead);
}

#[test]
fn a_kill_at_the_deadline_after_the_holder_died_reports_nothing() {
    let mut s = exec();
    decide(&mut s, Event::Closed { finished: false }, at(100));
    assert_eq!(decide(&mut s, Event::Tick, at(10_000)), [Action::Kill]);
}

#[test]
fn a_dead_holders_lock_is_released_after_a_deadline_kill_too() {
    let mut s = keep();
    decide(&mut s, Event::Tick, at(10_000));
    decide(&mut s, Event::Closed { finished: false }, at(10_100));
    assert_eq!(
        decide(&mut s, Event::Empty, at(10_200)),
        [Action::Release, Action::Exit]
    );
}

#[test]
fn exec_dead_before_the_go_with_settings_releases() {
    // rlock waited (settings of its place and of the set's locks taken so
    // far) or was granted, and died before the go: nothing was started.
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    decide(&mut s, Event::Release(true), at(0));
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(5)),
        [Action::Release, Action::Exit]
    );
    assert!(!s.started);
}

#[test]
fn exec_dead_before_the_go_without_settings_exits() {
    // The uncontended path sends its settings only with the go.
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    decide(&mut s, Event::Deadline(Some(at(10_000))), at(0));
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(5)),
        [Action::Exit]
    );
    // Settings taken back (an empty `R`) count as none.
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    decide(&mut s, Event::Release(true), at(0));
    decide(&mut s, Event::Release(false), at(1));
    assert_eq!(
        decide(&mut s, Event::Closed { finished: false }, at(5)),
        [Action::Exit]
    );
}

#[test]
fn exec_finished_before_the_go_never_releases() {
    // A live rlock that stopped waiting (timeout, signal, busy) released
    // what it had itself, then said "finished".
    let mut s = State::new(OnDeath::Kill, OnFinish::Kill, true);
    decide(&mut s, Event::Release(true), at(0));
    assert_eq!(
        decide(&mut s, Event::Closed { finished: true }, at(5)),
        [Action::Exit]
    );
    // And a later close, or the tree's emptiness, changes nothing.
    assert!(decide(&mut s, Event::Closed { finished: false }, at(6)).is_empty());
    assert_eq!(decide(&mut s, Event::Empty, at(7)), [Action::Exit]);
}
