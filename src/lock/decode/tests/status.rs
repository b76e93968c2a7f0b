//! Status, overview and history replies, decoded.

use super::*;

fn holder(info: &str, since: i64, ttl: i64, count: i64, fence: i64, mode: &str) -> Value {
    Value::Array(vec![s(info), i(since), i(ttl), i(count), i(fence), s(mode)])
}

#[test]
fn status_of_an_exclusive_lock() {
    let reply = vec![
        s("x"),
        i(1),
        i(9),
        i(2),
        i(0),
        s(""),
        i(1500),
        Value::Array(vec![]),
        Value::Array(vec![]),
        holder(r#"{"host":"h","pid":5,"cmd":"job"}"#, 0, 2500, 2, 9, ""),
    ];
    let st = status("k", reply).unwrap();
    assert_eq!(
        (st.key.as_str(), st.kind.as_str(), st.held),
        ("k", "exclusive", true)
    );
    assert_eq!(
        (st.limit, st.fence, st.waiters, st.waiting_writers),
        (1, 9, 2, 0)
    );
    assert!(st.last_lost.is_none());
    assert_eq!(st.oldest_wait_since_ms, Some(1500));
    assert!(st.damaged.is_empty());
    let h = &st.holders[0];
    assert_eq!(
        (h.mode.as_str(), h.host.as_str(), h.pid),
        ("exclusive", "h", 5)
    );
    assert_eq!(h.cmd.as_deref(), Some("job"));
    assert_eq!((h.since.as_str(), h.since_ms), ("1970-01-01T00:00:00Z", 0));
    assert_eq!((h.ttl_ms, h.count, h.fence), (2500, 2, 9));
}

/// The command's pid, the 8th field (after the token digest) once a
/// renewal noted it ('' before; absent from a shorter reply).
#[test]
fn status_gives_the_commands_pid_once_noted() {
    let with = |pid: Option<&str>| {
        let Value::Array(mut h) = holder(r#"{"host":"h","pid":5}"#, 0, 2500, 1, 9, "") else {
            unreachable!()
        };
        h.push(s("digest"));
        h.extend(pid.map(s));
        let reply = vec![
            s("x"),
            i(1),
            i(9),
            i(0),
            i(0),
            s(""),
            i(0),
            Value::Array(vec![]),
            Value::Array(vec![]),
            Value::Array(h),
        ];
        status("k", reply).unwrap().holders[0].cmd_pid
    };
    assert_eq!(with(Some("4133")), Some(4133));
    assert_eq!(with(Some("")), None);
    assert_eq!(with(None), None);
    assert_eq!(with(Some("x")), None);
}

/// Who waits: each waiter's info, join time, priority (from its score in
/// the queue) and, on a read-write lock, whether it waits to write.
#[test]
fn status_lists_each_waiter() {
    let waiter = |info: &str, since: i64, score: &str, writer: i64| {
        Value::Array(vec![s(info), i(since), s(score), s("d"), i(writer)])
    };
    let reply = |kind: &str, queue: Vec<Value>| {
        vec![
            s(kind),
            i(if kind == "x" { 1 } else { 0 }),
            i(9),
            i(queue.len() as i64),
            i(0),
            s(""),
            i(1500),
            Value::Array(vec![]),
            Value::Array(queue),
        ]
    };
    let st = status(
        "k",
        reply(
            "x",
            vec![
                waiter(
                    r#"{"host":"h","pid":5,"cmd":"deploy","user":"ann","ci":"gitlab p job 9"}"#,
                    1_700_000_000_000,
                    "-49999999999",
                    0,
                ),
                waiter(r#"{"host":"g","pid":6}"#, 1_700_000_001_000, "3", 0),
                waiter("", 0, "-1e+11", 0),
            ],
        ),
    )
    .unwrap();
    let w: Vec<(&str, u32, &str, i64, Option<&str>)> = st
        .queue
        .iter()
        .map(|w| {
            (
                w.host.as_str(),
                w.pid,
                w.user.as_str(),
                w.priority,
                w.cmd.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        w,
        [
            ("h", 5, "ann", 5, Some("deploy")),
            ("g", 6, "", 0, None),
            ("", 0, "", 10, None)
        ]
    );
    assert_eq!(st.queue[0].since, "2023-11-14T22:13:20Z");
    assert_eq!(st.queue[0].ci.as_deref(), Some("gitlab p job 9"));
    assert_eq!(
        (st.queue[2].since.as_str(), st.queue[2].mode.as_str()),
        ("", "")
    );
    let st = status(
        "k",
        reply("rw", vec![waiter("{}", 1, "1", 1), waiter("{}", 1, "2", 0)]),
    )
    .unwrap();
    let modes: Vec<&str> = st.queue.iter().map(|w| w.mode.as_str()).collect();
    assert_eq!(modes, ["write", "read"]);
    // A queue entry that is not one is a protocol error, not a guess.
    assert!(status("k", reply("x", vec![s("x")])).is_err());
    let json = serde_json::to_value(&st).unwrap();
    assert_eq!(
        (
            json["waiting"].as_u64(),
            json["waiters"][0]["mode"].as_str()
        ),
        (Some(2), Some("write"))
    );
}

#[test]
fn status_of_a_semaphore_and_of_a_read_write_lock() {
    let sem = vec![s("x"), i(3), i(4), i(0), i(0), s("")];
    assert_eq!(status("k", sem).unwrap().kind, "semaphore");
    let rw = vec![
        s("rw"),
        i(0),
        i(5),
        i(1),
        i(1),
        s(""),
        i(0),
        Value::Array(vec![]),
        Value::Array(vec![]),
        holder(r#"{"host":"a","pid":1}"#, 1000, 100, 1, 4, "r"),
        holder(r#"{"host":"b","pid":2}"#, 2000, 200, 1, 5, "w"),
    ];
    let st = status("k", rw).unwrap();
    assert_eq!((st.kind.as_str(), st.waiting_writers), ("rw", 1));
    assert_eq!(st.oldest_wait_since_ms, None);
    let modes: Vec<&str> = st.holders.iter().map(|h| h.mode.as_str()).collect();
    assert_eq!(modes, ["read", "write"]);
    assert_eq!(st.holders[1].since, "1970-01-01T00:00:02Z");
}

#[test]
fn status_of_a_free_lock_with_a_recorded_loss() {
    let lost = r#"{"host":"h","pid":3,"when":"2025-01-01T00:00:00Z","when_ms":1735689600000,"why":"expired","action":"sent TERM"}"#;
    let st = status("k", vec![s(""), i(0), i(0), i(0), i(0), s(lost)]).unwrap();
    assert_eq!(
        (st.kind.as_str(), st.held, st.holders.len()),
        ("", false, 0)
    );
    assert_eq!(
        st.last_lost,
        Some(LostRecord {
            host: "h".into(),
            pid: 3,
            when: "2025-01-01T00:00:00Z".into(),
            when_ms: 1_735_689_600_000,
            why: "expired".into(),
            action: "sent TERM".into(),
        })
    );
}

#[test]
fn status_of_a_damaged_lock_names_its_remains() {
    let remains = Value::Array(vec![s("rlock:{k}:h"), s("rlock:{k}:qa")]);
    let st = status(
        "k",
        vec![s(""), i(0), i(7), i(0), i(0), s(""), i(0), remains],
    )
    .unwrap();
    assert_eq!(st.damaged, ["rlock:{k}:h", "rlock:{k}:qa"]);
    assert_eq!((st.held, st.fence), (false, 7));
}

#[test]
fn a_malformed_status_is_a_protocol_error() {
    assert!(protocol(status("k", vec![s("x"), i(1)])).starts_with("status returned"));
    protocol(status(
        "k",
        vec![s("x"), i(1), i(2), i(3), i(4), s(""), i(0), i(5)],
    ));
}

#[test]
fn text_past_the_end_is_empty() {
    let reply = [s("a"), i(5)];
    assert_eq!(texts(&reply), ["a", "5"]);
    assert_eq!(text(&reply, 2), "");
}

#[test]
fn history_entries_decode_with_their_optional_fields() {
    let reply = Value::Array(vec![
        s(
            r#"[1700000000123,"released","42","{\"host\":\"h\",\"pid\":7,\"user\":\"u\"}","d",1500,"x",3]"#,
        ),
        s(r#"[1700000000456,"lost","0","","r","it expired or was deleted"]"#),
        s(r#"[1700000000789,"broken","7","","d",5,"by","ops@h","r",""]"#),
    ]);
    let h = history(reply).unwrap();
    assert_eq!(h.len(), 3);
    assert_eq!(h[0].event, "released");
    assert_eq!(h[0].at, 1_700_000_000_123);
    assert_eq!(h[0].fence, Some(42));
    assert_eq!(h[0].held_ms, Some(1500));
    assert_eq!(h[0].exit_code, Some(3));
    assert_eq!(h[0].holder.as_ref().map(|h| h.user.as_str()), Some("u"));
    assert_eq!((h[0].waited_ms, h[0].by.as_deref()), (None, None));
    // Fence 0 is no fence; info that is not JSON is no holder.
    assert_eq!((h[1].fence, h[1].holder.is_none()), (None, true));
    assert_eq!(h[1].reason.as_deref(), Some("it expired or was deleted"));
    assert_eq!(
        (h[2].by.as_deref(), h[2].reason.as_deref()),
        (Some("ops@h"), Some(""))
    );
    // Not an entry rlock wrote: too short, not JSON, no time.
    for bad in [r#"[1,"granted"]"#, "granted", r#"["x","granted","1",""]"#] {
        assert!(history(Value::Array(vec![s(bad)])).is_err(), "{bad}");
    }
    assert!(history(Value::Array(vec![])).unwrap().is_empty());
}
