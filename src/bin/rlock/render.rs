//! How the binary shows library results to people (`status`, `list`).

use std::time::Duration;

use rlock::Status;
use rlock::duration::human;

/// Human-readable status, one line per holder.
pub(crate) fn status(st: &Status) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = write!(out, "{}: ", st.key);
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
        let _ = write!(
            out,
            "host {} pid {} since {} ttl {} fence {}",
            h.host,
            h.pid,
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
        if let Some(cmd) = &h.cmd {
            let _ = write!(out, " cmd {cmd}");
        }
        out.push('\n');
    }
    if let Some(lost) = &st.last_lost {
        let _ = writeln!(out, "  last lost: {lost}");
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
            waiters: 0,
            waiting_writers: 0,
            last_lost: None,
            oldest_wait_since_ms: None,
            holders: vec![HolderStatus {
                mode: "exclusive".into(),
                host: "h".into(),
                pid: 7,
                cmd: None,
                since: "2024-01-01T00:00:00Z".into(),
                since_ms: 0,
                ttl_ms: 29_517,
                count: 1,
                fence: 3,
            }],
        };
        let out = status(&st);
        assert!(out.contains(" ttl 29.5s fence 3"), "{out}");
    }
}
