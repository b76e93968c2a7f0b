//! The cover on synthetic process tables: pid 10 is the watched script
//! (started at tick 100), the grant's `rlock acquire` is pid 20 at tick
//! 200, the keeper is pid 21.

use super::*;

fn rules(group: bool) -> Rules {
    Rules {
        watched: Id {
            pid: 10,
            start: 100,
        },
        group: group.then_some(Group {
            sid: 10,
            uid: 1000,
            pgid: 10,
            leads: true,
            leader_start: Some(100),
        }),
        grant: Grant {
            start: 200,
            pid: 20,
        },
        pid_max: 32768,
        me: 21,
    }
}

/// pid, ppid, pgid, start (sid 10, alive).
fn p(pid: Pid, ppid: Pid, pgid: Pid, start: u64) -> Row {
    Row {
        pid,
        ppid,
        pgid,
        sid: 10,
        start,
        dead: false,
    }
}

fn script() -> Vec<Row> {
    vec![
        p(1, 0, 1, 1),
        p(10, 1, 10, 100),
        // `sleep 300 &` just before the grant, in rlock's tick.
        p(19, 10, 10, 200),
        // The keeper and its guard (re-parented to init).
        p(21, 1, 21, 200),
        p(22, 21, 21, 201),
    ]
}

fn pids(ids: &[Id]) -> Vec<Pid> {
    let mut v: Vec<Pid> = ids.iter().map(|i| i.pid).collect();
    v.sort_unstable();
    v
}

fn keeper(pid: Pid) -> bool {
    pid == 21 || pid == 22
}

fn uid(pid: Pid) -> Option<u32> {
    Some(if pid == 66 { 0 } else { 1000 })
}

#[test]
fn descendants_started_after_the_grant_are_covered_and_earlier_ones_are_not() {
    let mut t = script();
    t.push(p(30, 10, 10, 250));
    t.push(p(31, 30, 10, 260));
    // A child of the pre-grant job, started since: walked through.
    t.push(p(32, 19, 10, 270));
    let mut st = State::default();
    let new = grow(&mut st, &t, &rules(false), true, keeper, uid);
    assert_eq!(pids(&new), [30, 31, 32]);
    assert_eq!(pids(&st.ids), [30, 31, 32]);
    // A second walk finds nothing new.
    assert!(grow(&mut st, &t, &rules(false), true, keeper, uid).is_empty());
}

#[test]
fn a_covered_process_stays_covered_once_re_parented_and_its_children_too() {
    let mut t = script();
    t.push(p(30, 10, 10, 250));
    let mut st = State::default();
    grow(&mut st, &t, &rules(false), true, keeper, uid);
    // The subshell 30 forked 40 and exited; 40 went to init; then the
    // script exited too.
    let mut t = script();
    t.retain(|r| r.pid != 10 && r.pid != 19);
    t.push(p(40, 1, 10, 300));
    let mut st2 = st.clone();
    grow(&mut st2, &t, &rules(false), true, keeper, uid);
    assert!(st2.ids.is_empty(), "40 was never seen under a covered one");
    // Seen once under 30, it stays covered under init, and so does
    // what it starts later.
    let mut t = script();
    t.push(p(30, 10, 10, 250));
    t.push(p(40, 30, 10, 300));
    grow(&mut st, &t, &rules(false), true, keeper, uid);
    let mut t = script();
    t.retain(|r| r.pid != 10);
    t.push(p(40, 1, 10, 300));
    t.push(p(41, 40, 10, 310));
    grow(&mut st, &t, &rules(false), true, keeper, uid);
    assert_eq!(pids(&st.ids), [40, 41]);
}

#[test]
fn a_reused_pid_is_not_covered() {
    let mut t = script();
    t.push(p(30, 10, 10, 250));
    let mut st = State::default();
    grow(&mut st, &t, &rules(false), true, keeper, uid);
    // 30 exited and an unrelated process (another session, under init)
    // got its pid.
    let mut t = script();
    t.push(Row {
        sid: 77,
        ..p(30, 1, 77, 900)
    });
    grow(&mut st, &t, &rules(false), true, keeper, uid);
    assert!(st.ids.is_empty());
    // A zombie is gone.
    let mut t = script();
    t.push(p(31, 10, 10, 250));
    let mut st = State::default();
    grow(&mut st, &t, &rules(false), true, keeper, uid);
    t.last_mut().unwrap().dead = true;
    grow(&mut st, &t, &rules(false), true, keeper, uid);
    assert!(st.ids.is_empty());
}

#[test]
fn keepers_and_what_is_below_them_are_never_covered() {
    let mut t = script();
    // The keeper and its guard still under the exiting `rlock acquire`
    // (20, the grant's own process, not after it).
    t.retain(|r| r.pid != 21 && r.pid != 22);
    t.push(p(20, 10, 10, 200));
    t.push(p(21, 20, 21, 200));
    t.push(p(22, 21, 21, 201));
    // Another keeper (of a re-entered `acquire --keep`), not ours.
    t.push(p(50, 10, 50, 300));
    t.push(p(51, 50, 50, 301));
    let k = |pid| keeper(pid) || pid == 50;
    let mut st = State::default();
    grow(&mut st, &t, &rules(false), true, k, uid);
    assert!(st.ids.is_empty(), "{:?}", st.ids);
}

#[test]
fn the_group_rule_finds_orphans_of_the_scripts_own_group_only() {
    let mut t = script();
    t.retain(|r| r.pid != 10);
    // Re-parented before any walk saw them: in the script's group and
    // session, after the grant: covered, with what they start.
    t.push(p(40, 1, 10, 300));
    t.push(p(41, 40, 10, 310));
    // In the group but before the grant (`sleep 300 &` re-parented).
    t.push(p(42, 1, 10, 150));
    // Another group, session, or user: never.
    t.push(p(60, 1, 60, 300));
    t.push(Row {
        sid: 77,
        ..p(61, 1, 10, 300)
    });
    t.push(p(66, 1, 10, 300));
    let mut st = State::default();
    grow(&mut st, &t, &rules(true), true, keeper, uid);
    assert_eq!(pids(&st.ids), [40, 41]);
    // Not on a walk of the cover's own tree (not every process).
    let mut st = State::default();
    grow(&mut st, &t, &rules(true), false, keeper, uid);
    assert!(st.ids.is_empty() && !st.group_closed);
    // Without the rule (the script did not lead its group): none.
    let mut st = State::default();
    grow(&mut st, &t, &rules(false), true, keeper, uid);
    assert!(st.ids.is_empty());
}

#[test]
fn the_group_rule_ends_when_the_group_empties_or_its_number_is_reused() {
    let mut st = State::default();
    let mut t = script();
    t.retain(|r| r.pid != 10 && r.pid != 19);
    grow(&mut st, &t, &rules(true), true, keeper, uid);
    assert!(st.group_closed, "no process in group 10 any more");
    // Later a new group 10 (the number reused): not the script's.
    t.push(p(10, 1, 10, 500));
    t.push(p(45, 10, 10, 510));
    grow(&mut st, &t, &rules(true), true, keeper, uid);
    assert!(st.ids.is_empty());
    // Reused while a member was still around: its live leader tells.
    let mut st = State::default();
    let mut t = script();
    t.retain(|r| r.pid != 10);
    t.push(p(10, 1, 10, 500));
    t.push(p(46, 1, 10, 510));
    grow(&mut st, &t, &rules(true), true, keeper, uid);
    assert!(st.group_closed && st.ids.is_empty(), "{:?}", st.ids);
}

#[test]
fn a_stat_line_parses_with_spaces_and_parens_in_the_name() {
    let line = "42 (a b) c) S 7 42 9 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
    let r = parse_stat(42, line).unwrap();
    assert_eq!(
        (r.ppid, r.pgid, r.sid, r.start, r.dead),
        (7, 42, 9, 12345, false)
    );
    assert!(parse_stat(42, "42 (x) S 7").is_none());
}

#[test]
fn the_board_gives_the_guard_the_keepers_last_cover() {
    let b = Board::new().unwrap();
    assert!(b.read().is_empty());
    let a = [Id { pid: 5, start: 9 }, Id { pid: 6, start: 10 }];
    b.publish(&a);
    assert_eq!(b.read(), a);
    b.publish(&a[1..]);
    assert_eq!(b.read(), a[1..]);
    let many: Vec<Id> = (1..=5000).map(|pid| Id { pid, start: 1 }).collect();
    b.publish(&many);
    assert_eq!(b.read().len(), BOARD_SLOTS);
}

/// The script (pid 10) in group 5, led by its caller (pid 5, from before
/// the grant), which does not end with it.
fn in_callers_group() -> (Vec<Row>, Rules) {
    let mut r = rules(false);
    r.group = Some(Group {
        sid: 10,
        uid: 1000,
        pgid: 5,
        leads: false,
        leader_start: Some(50),
    });
    let t = vec![p(1, 0, 1, 1), p(5, 1, 5, 50), p(10, 5, 5, 100)];
    (t, r)
}

#[test]
fn the_orphan_rule_covers_a_last_line_job_of_a_script_in_its_callers_group() {
    // `job &` as the script's last line: re-parented to init as the
    // script exited, before any walk saw it (two holders, found in review).
    let (mut t, r) = in_callers_group();
    t.retain(|x| x.pid != 10);
    t.push(p(40, 1, 5, 300));
    t.push(p(41, 40, 5, 310));
    let mut st = State::default();
    grow(&mut st, &t, &r, true, keeper, uid);
    assert_eq!(pids(&st.ids), [40, 41]);
    // Only on walks of every process.
    let mut st = State::default();
    grow(&mut st, &t, &r, false, keeper, uid);
    assert!(st.ids.is_empty());
}

#[test]
fn the_orphan_rule_leaves_what_other_members_started() {
    let (mut t, r) = in_callers_group();
    // The caller's next command, and its child: parents in the group.
    t.push(p(60, 5, 5, 300));
    t.push(p(61, 60, 5, 310));
    // From before the grant, re-parented; another session; another uid.
    t.push(p(42, 1, 5, 150));
    t.push(Row {
        sid: 77,
        ..p(43, 1, 5, 300)
    });
    t.push(p(66, 1, 5, 300));
    let mut st = State::default();
    grow(&mut st, &t, &r, true, keeper, uid);
    assert!(st.ids.is_empty(), "{:?}", st.ids);
    // 61 seen with its parent in the group: once re-parented, still not
    // the script's.
    t.retain(|x| x.pid != 60);
    t.iter_mut()
        .filter(|x| x.pid == 61)
        .for_each(|x| x.ppid = 1);
    grow(&mut st, &t, &r, true, keeper, uid);
    assert!(st.ids.is_empty(), "{:?}", st.ids);
}

#[test]
fn the_orphan_rule_ends_when_the_callers_group_number_is_reused() {
    let (mut t, r) = in_callers_group();
    t.retain(|x| x.pid != 5 && x.pid != 10);
    t.push(p(5, 1, 5, 900));
    t.push(p(40, 1, 5, 950));
    let mut st = State::default();
    grow(&mut st, &t, &r, true, keeper, uid);
    assert!(st.group_closed && st.ids.is_empty(), "{:?}", st.ids);
}
