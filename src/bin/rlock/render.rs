//! How the binary shows library results to people (`status`, `list`).

use std::time::Duration;

use rlock::Status;
use rlock::duration::human;

use crate::escape::shown;

/// Human-readable status, one line per holder.
pub(crate) fn status(st: &Status) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = write!(out, "{}: ", shown(&st.key));
    let writing = st.holders.iter().any(|h| h.mode == "write");
    match (st.holders.len(), st.kind.as_str()) {
        (0, _) => out.push_str("free"),
        (_, "rw") if writing => out.push_str("held for writing"),
        (n, "rw") => {
            let _ = write!(out, "held for reading by {n}");
        }
        (n, "semaphore") => {
            let _ = write!(out, "{n} of {} slots held", st.limit);
        }
        _ => out.push_str("held"),
    }
    if st.holders.is_empty() && st.fence > 0 {
        let _ = write!(out, " (last fence {})", st.fence);
    }
    if st.waiters > 0 {
        let _ = write!(out, ", {} waiting", st.waiters);
        match st.waiting_writers {
            0 => {}
            1 => out.push_str(" (1 writer)"),
            n => {
                let _ = write!(out, " ({n} writers)");
            }
        }
    }
    out.push('\n');
    for h in &st.holders {
        out.push_str("  ");
        if h.mode != "exclusive" {
            let _ = write!(out, "{} ", h.mode);
        }
        let _ = write!(out, "host {} pid {}", shown(&h.host), h.pid);
        if !h.user.is_empty() {
            let _ = write!(out, " user {}", shown(&h.user));
        }
        // The command's own process, beside rlock's (`pid`, which is alive
        // and renewing whatever the command does).
        if let Some(p) = h.cmd_pid {
            let _ = write!(out, " command pid {p}");
        }
        let _ = write!(
            out,
            " since {} ttl {} fence {}",
            h.since,
            human(Duration::from_millis(h.ttl_ms)),
            h.fence
        );
        match h.count {
            // Released, kept taken by its --min-hold until the lease ends.
            0 => out.push_str(" released (--min-hold)"),
            1 => {}
            n => {
                let _ = write!(out, " held {n}x");
            }
        }
        if !h.set.is_empty() {
            let _ = write!(out, " with {}", shown(&h.set.join(",")));
        }
        if let Some(ci) = &h.ci {
            let _ = write!(out, " ci {}", shown(ci));
        }
        // What a holder stored is shown, never obeyed: no escape
        // sequence reaches the operator's terminal (as in `history`).
        if let Some(cmd) = &h.cmd {
            let _ = write!(out, " cmd {}", shown(cmd));
        }
        // Still held, until its holder has stopped and released it or its
        // lease (the ttl above, no longer extended) ends.
        if let Some(b) = &h.breaking {
            let _ = write!(
                out,
                "\n    being broken by {} since {} (reason: {}): held until its holder \
                 stops and releases, at most ttl {}",
                shown(&b.by),
                rlock::lock::format_ms(b.since_ms),
                shown(&b.reason),
                human(Duration::from_millis(h.ttl_ms)),
            );
        }
        out.push('\n');
    }
    for w in &st.queue {
        out.push_str("  ");
        out.push_str(&waiter(w));
        out.push('\n');
    }
    let unlisted = st.waiters.saturating_sub(st.queue.len() as u64);
    if unlisted > 0 && !st.queue.is_empty() {
        let _ = writeln!(out, "  and {unlisted} more waiting");
    }
    if let Some(lost) = &st.last_lost {
        let _ = writeln!(out, "  last lost: {}", shown(&lost.to_string()));
    }
    out
}

/// One waiter as `status` shows it: "waiter [read|write] host H pid P
/// user U priority N since T ci J cmd C", the parts it recorded.
pub(crate) fn waiter(w: &rlock::WaiterStatus) -> String {
    use std::fmt::Write;
    let mut out = String::from("waiter");
    if !w.mode.is_empty() {
        let _ = write!(out, " {}", w.mode);
    }
    if w.host.is_empty() {
        // Queued by an rlock that did not record who waits.
        out.push_str(" (unknown)");
    } else {
        let _ = write!(out, " host {} pid {}", shown(&w.host), w.pid);
    }
    if !w.user.is_empty() {
        let _ = write!(out, " user {}", shown(&w.user));
    }
    let _ = write!(out, " priority {}", w.priority);
    if !w.since.is_empty() {
        let _ = write!(out, " since {}", w.since);
    }
    if let Some(ci) = &w.ci {
        let _ = write!(out, " ci {}", shown(ci));
    }
    if let Some(cmd) = &w.cmd {
        let _ = write!(out, " cmd {}", shown(cmd));
    }
    out
}

/// Server-clock milliseconds as RFC 3339, UTC, with milliseconds
/// (2026-11-25T20:31:02.123Z).
pub(crate) fn rfc3339_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// One history event as `history --json` prints it: every key of the
/// documented set, and the optional ones only where they apply.
pub(crate) fn event_json(e: &rlock::Event) -> serde_json::Value {
    let h = e.holder.as_ref();
    let mut v = serde_json::json!({
        "event": e.event,
        "at": rfc3339_ms(e.at),
        "host": h.map(|h| h.host.as_str()),
        "pid": h.map(|h| h.pid),
        "user": h.map(|h| h.user.as_str()).filter(|u| !u.is_empty()),
        "cmd": h.and_then(|h| h.cmd.as_deref()),
        "fence": e.fence,
    });
    let o = v.as_object_mut().expect("an object");
    let mut add = |k: &str, x: serde_json::Value| {
        if !x.is_null() {
            o.insert(k.into(), x);
        }
    };
    add("waited_ms", e.waited_ms.into());
    add("held_ms", e.held_ms.into());
    add("exit_code", e.exit_code.into());
    add("by", e.by.clone().into());
    add("reason", e.reason.clone().into());
    add("ci", h.and_then(|h| h.ci.clone()).into());
    if let Some(h) = h.filter(|h| !h.set.is_empty()) {
        add("set", h.set.clone().into());
    }
    v
}

/// `history` as aligned columns: time (UTC), event, holder, user, fence,
/// what it took, command, reason.
pub(crate) fn history(key: &str, events: &[rlock::Event]) -> String {
    if events.is_empty() {
        return format!("{}: no history\n", shown(key));
    }
    let ms = |m: u64| human(Duration::from_millis(m));
    let rows: Vec<[String; 8]> = events
        .iter()
        .map(|e| {
            let h = e.holder.as_ref();
            let mut took = Vec::new();
            if let Some(w) = e.waited_ms {
                took.push(format!("waited {}", ms(w)));
            }
            if let Some(d) = e.held_ms {
                took.push(format!("held {}", ms(d)));
            }
            if let Some(x) = e.exit_code {
                took.push(format!("exit {x}"));
            }
            let mut why = Vec::new();
            if let Some(b) = &e.by {
                why.push(format!("by {b}"));
            }
            if let Some(r) = &e.reason {
                why.push(r.clone());
            }
            let time = rfc3339_ms(e.at)
                .replace('T', " ")
                .trim_end_matches('Z')
                .to_string();
            [
                time,
                e.event.clone(),
                h.map_or("-".into(), |h| format!("{}:{}", h.host, h.pid)),
                h.map(|h| h.user.clone())
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| "-".into()),
                e.fence.map_or("-".into(), |f| f.to_string()),
                if took.is_empty() {
                    "-".into()
                } else {
                    took.join(", ")
                },
                h.and_then(|h| h.cmd.clone()).unwrap_or_else(|| "-".into()),
                if why.is_empty() {
                    String::new()
                } else {
                    why.join(": ")
                },
            ]
            .map(|c| shown(&c))
        })
        .collect();
    let head = [
        "TIME (UTC)",
        "EVENT",
        "HOLDER",
        "USER",
        "FENCE",
        "TOOK",
        "COMMAND",
        "REASON",
    ];
    let mut width = head.map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                let pad = width[i] - c.chars().count() + 2;
                s.extend(std::iter::repeat_n(' ', pad));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&head.map(String::from));
    for r in &rows {
        out.push_str(&line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlock::HolderStatus;

    #[test]
    fn status_shows_readable_ttls() {
        let st = Status {
            key: "k".into(),
            kind: "exclusive".into(),
            held: true,
            limit: 1,
            fence: 3,
            holders: vec![HolderStatus {
                mode: "exclusive".into(),
                host: "h".into(),
                pid: 7,
                since: "2024-01-01T00:00:00Z".into(),
                ttl_ms: 29_517,
                count: 1,
                fence: 3,
                ..HolderStatus::default()
            }],
            ..Status::default()
        };
        let out = status(&st);
        assert!(out.contains(" ttl 29.5s fence 3"), "{out}");
        assert!(out.contains("pid 7 since"), "{out}");
        let mut st = st;
        st.holders[0].cmd_pid = Some(42);
        let out = status(&st);
        assert!(out.contains("pid 7 command pid 42 since"), "{out}");
    }

    #[test]
    fn status_shows_who_holds_and_who_waits_escaped() {
        let mut st = Status {
            key: "k\u{202e}x".into(),
            kind: "exclusive".into(),
            held: true,
            limit: 1,
            fence: 3,
            waiters: 3,
            ..Status::default()
        };
        st.holders.push(HolderStatus {
            mode: "exclusive".into(),
            host: "h".into(),
            pid: 7,
            cmd: Some("deploy\x1b[2J".into()),
            user: "ann".into(),
            ci: Some("github o/r run 12 job build".into()),
            cmd_pid: Some(42),
            since: "2024-01-01T00:00:00Z".into(),
            ttl_ms: 1000,
            count: 1,
            fence: 3,
            ..HolderStatus::default()
        });
        st.queue.push(rlock::WaiterStatus {
            host: "g".into(),
            pid: 8,
            user: "bob".into(),
            priority: 5,
            since: "2024-01-01T00:00:01Z".into(),
            since_ms: 1000,
            cmd: Some("job\rFAKE".into()),
            ..Default::default()
        });
        st.queue.push(rlock::WaiterStatus::default());
        let out = status(&st);
        assert!(out.starts_with("k\\u{202e}x: held, 3 waiting\n"), "{out}");
        assert!(
            out.contains("  host h pid 7 user ann command pid 42 since"),
            "{out}"
        );
        assert!(
            out.contains(" ci github o/r run 12 job build cmd deploy\\x1b[2J\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "\n  waiter host g pid 8 user bob priority 5 since 2024-01-01T00:00:01Z \
                 cmd job\\rFAKE\n  waiter (unknown) priority 0\n  and 1 more waiting\n"
            ),
            "{out}"
        );
        assert!(!out.contains('\x1b') && !out.contains('\r'), "{out}");
    }
}
