//! One frame of `rlock top` (pure: views in, lines out): a header, the
//! column titles, one row per lock in the order given (the library's
//! ranking, most contended first).

use std::time::Duration;

use rlock::lock::LockView;

/// The column titles.
const TITLES: [&str; 9] = [
    "LOCK",
    "KIND",
    "HOLDER",
    "HELD",
    "TTL",
    "WAIT",
    "OLDEST",
    "GR/MIN",
    "LAST EVENT",
];

/// What goes above the table.
pub(crate) struct Header<'a> {
    pub(crate) pattern: &'a str,
    pub(crate) every: Duration,
    /// The last refresh failed: why (the rows are the last good ones).
    pub(crate) error: Option<&'a str>,
    /// Live on a terminal (says how to quit), or one plain frame.
    pub(crate) live: bool,
}

/// The frame's lines. With `size` (columns, rows) every line is cut to the
/// columns and the table to the rows (the last row then says how many
/// more); without, nothing is cut (`--once`).
pub(crate) fn frame(views: &[LockView], h: &Header, size: Option<(usize, usize)>) -> Vec<String> {
    let now = views.first().map(|v| v.now_ms);
    let mut head = format!(
        "rlock top - {} lock{} in use matching {:?}",
        views.len(),
        if views.len() == 1 { "" } else { "s" },
        h.pattern,
    );
    if let Some(ms) = now {
        head.push_str(&format!(", server time {}", rlock::lock::format_ms(ms)));
    }
    if h.live {
        head.push_str(&format!(", every {}; q quits", short(h.every)));
    }
    let mut lines = vec![head];
    if let Some(e) = h.error {
        lines.push(format!("refresh failed: {e}"));
    }
    let rows: Vec<[String; 9]> = views.iter().map(row).collect();
    let mut widths = TITLES.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(w - c.chars().count() + 2));
            }
        }
        s.trim_end().to_string()
    };
    lines.push(line(&TITLES.map(String::from)));
    let room = size.map_or(usize::MAX, |(_, r)| r.saturating_sub(lines.len()));
    if rows.len() > room {
        let shown = room.saturating_sub(1);
        lines.extend(rows[..shown].iter().map(|r| line(r)));
        lines.push(format!("... {} more", rows.len() - shown));
    } else {
        lines.extend(rows.iter().map(|r| line(r)));
    }
    if let Some((cols, rows)) = size {
        lines.truncate(rows);
        for l in &mut lines {
            if l.chars().count() > cols {
                *l = l.chars().take(cols).collect();
            }
        }
    }
    lines
}

fn row(v: &LockView) -> [String; 9] {
    let st = &v.status;
    let holder = match st.holders.first() {
        None => "-".to_string(),
        Some(first) => {
            let mut s = format!("{}:{}", first.host, first.pid);
            if st.holders.len() > 1 {
                s.push_str(&format!(" +{}", st.holders.len() - 1));
            }
            // Taken together with other locks (`rlock exec a b`).
            if !first.set.is_empty() {
                s.push_str(&format!(" with {}", first.set.join(",")));
            }
            s
        }
    };
    let ttl = st.holders.iter().map(|h| h.ttl_ms).max();
    let kind = match (st.kind.as_str(), st.limit) {
        ("semaphore", n) => format!("sem/{n}"),
        (k, _) => k.to_string(),
    };
    let last = v.last_event.as_ref().map_or("-".to_string(), |e| {
        format!("{} {} ago", e.event, short(v.since(e.at)))
    });
    [
        st.key.clone(),
        kind,
        holder,
        if st.held {
            short(v.held_for())
        } else {
            "-".into()
        },
        ttl.map_or("-".into(), |ms| short(Duration::from_millis(ms))),
        st.waiters.to_string(),
        v.oldest_wait.map_or("-".into(), short),
        v.grants_last_minute.to_string(),
        last,
    ]
}

/// A duration in at most two units: 850ms, 12s, 3m05s, 2h10m, 4d03h.
pub(crate) fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short() {
        let ms = Duration::from_millis;
        assert_eq!(short(ms(850)), "850ms");
        assert_eq!(short(ms(12_400)), "12s");
        assert_eq!(short(ms(185_000)), "3m05s");
        assert_eq!(short(ms(7_800_000)), "2h10m");
        assert_eq!(short(ms(356_400_000)), "4d03h");
    }

    #[test]
    fn an_empty_frame_has_a_header_and_titles() {
        let h = Header {
            pattern: "*",
            every: Duration::from_secs(1),
            error: None,
            live: true,
        };
        let lines = frame(&[], &h, Some((20, 24)));
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|l| l.chars().count() <= 20), "{lines:?}");
        let plain = frame(&[], &h, None);
        assert!(plain[1].starts_with("LOCK  KIND  HOLDER"), "{plain:?}");
    }
}
