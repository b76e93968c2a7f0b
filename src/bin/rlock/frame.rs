//! One frame of `rlock top` (pure: views in, lines out): a header, the
//! column titles, one row per lock, in the order the [`Look`] asks for
//! (by default the library's ranking, most contended first), filtered,
//! scrolled, each lock's waiters under it when asked. [`Look::key`] turns
//! the keys typed into changes of the look, so the whole view is tested
//! without a terminal.

use std::time::Duration;

use rlock::lock::LockView;

use crate::escape::shown;

/// The column titles: what changes first (HELD, TTL, WAIT) next to the
/// name, so a narrow terminal cuts the rest.
const TITLES: [&str; 9] = [
    "LOCK",
    "HELD",
    "TTL",
    "WAIT",
    "OLDEST",
    "KIND",
    "HOLDER",
    "GR/MIN",
    "LAST EVENT",
];

/// The narrowest the LOCK column is cut to, and what the other columns
/// keep beside it (HELD TTL WAIT OLDEST KIND at their usual widths).
const LOCK_MIN: usize = 12;
const BESIDE_LOCK: usize = 40;

/// What goes above the table.
pub(crate) struct Header<'a> {
    pub(crate) pattern: &'a str,
    pub(crate) every: Duration,
    /// The last refresh failed: why (the rows are the last good ones).
    pub(crate) error: Option<&'a str>,
    /// Live on a terminal (says how to quit), or one plain frame.
    pub(crate) live: bool,
}

/// The order of the rows (`--sort`, and `s` in the live view).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Sort {
    /// Most contended first (more waiters, the longer oldest wait, more
    /// grants in the last minute, more holders), then by name.
    #[default]
    Contended,
    /// By name.
    Name,
    /// The longest hold first.
    Held,
    /// The longest oldest wait first.
    Wait,
}

impl Sort {
    fn next(self) -> Sort {
        match self {
            Sort::Contended => Sort::Name,
            Sort::Name => Sort::Held,
            Sort::Held => Sort::Wait,
            Sort::Wait => Sort::Contended,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Sort::Contended => "contended",
            Sort::Name => "name",
            Sort::Held => "held",
            Sort::Wait => "wait",
        }
    }
}

/// How the table is looked at: order, filter, scroll, waiters shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Look {
    pub(crate) sort: Sort,
    /// Only locks whose name contains this ("": all).
    pub(crate) filter: String,
    /// Rows scrolled past at the top.
    pub(crate) offset: usize,
    /// Each lock's waiters listed under its row.
    pub(crate) waiters: bool,
    /// A filter being typed (after `/`, until Enter or Esc).
    pub(crate) typing: Option<String>,
}

/// What a key asks of the live view.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    Quit,
    Redraw,
    Nothing,
}

impl Look {
    /// Take the bytes typed; `page` is how many rows a screen shows.
    /// q quits; j/k or the arrows scroll a row, space/b or PgDn/PgUp a
    /// page, g/G to the top/end; s the next sort; w the waiters on/off; /
    /// types a filter (Enter ends it, Esc clears it).
    pub(crate) fn key(&mut self, typed: &[u8], page: usize) -> Asked {
        let page = page.max(1);
        let mut asked = Asked::Nothing;
        let text = String::from_utf8_lossy(typed);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if let Some(t) = &mut self.typing {
                match c {
                    '\r' | '\n' => self.typing = None,
                    '\x1b' => {
                        self.typing = None;
                        self.filter.clear();
                    }
                    '\x7f' | '\x08' => {
                        t.pop();
                        self.filter = t.clone();
                    }
                    c if !c.is_control() && t.chars().count() < 64 => {
                        t.push(c);
                        self.filter = t.clone();
                    }
                    _ => {}
                }
                self.offset = 0;
                asked = Asked::Redraw;
                continue;
            }
            // An escape sequence: arrows and page keys.
            let c = if c == '\x1b' && chars.peek() == Some(&'[') {
                chars.next();
                let seq: String = std::iter::from_fn(|| {
                    chars.next_if(|c| c.is_ascii_digit() || *c == '~' || c.is_ascii_uppercase())
                })
                .collect();
                match seq.as_str() {
                    "A" => 'k',
                    "B" => 'j',
                    "5~" => 'b',
                    "6~" => ' ',
                    "H" => 'g',
                    "F" => 'G',
                    _ => continue,
                }
            } else {
                c
            };
            match c {
                'q' | 'Q' => return Asked::Quit,
                'j' => self.offset += 1,
                'k' => self.offset = self.offset.saturating_sub(1),
                ' ' => self.offset += page,
                'b' => self.offset = self.offset.saturating_sub(page),
                'g' => self.offset = 0,
                'G' => self.offset = usize::MAX / 2,
                's' => {
                    self.sort = self.sort.next();
                    self.offset = 0;
                }
                'w' => self.waiters = !self.waiters,
                '/' => self.typing = Some(String::new()),
                '\x1b' => {
                    self.filter.clear();
                    self.offset = 0;
                }
                _ => continue,
            }
            asked = Asked::Redraw;
        }
        asked
    }
}

/// The views to show, in the look's order, filtered.
pub(crate) fn arrange<'v>(views: &'v [LockView], look: &Look) -> Vec<&'v LockView> {
    let mut out: Vec<&LockView> = views
        .iter()
        .filter(|v| v.status.key.contains(&look.filter))
        .collect();
    match look.sort {
        Sort::Contended => {}
        Sort::Name => out.sort_by(|a, b| a.status.key.cmp(&b.status.key)),
        Sort::Held => out.sort_by_key(|v| std::cmp::Reverse(v.held_for())),
        Sort::Wait => out.sort_by_key(|v| std::cmp::Reverse(v.oldest_wait.unwrap_or_default())),
    }
    out
}

/// The frame's lines. With `size` (columns, rows) the LOCK column is
/// capped (names cut with …), every line is cut to the columns, and the
/// table scrolled by `look.offset` to fit the rows (the last line then
/// says how many more); without, nothing is cut (`--once`). `look.offset`
/// is clamped to what there is to scroll.
pub(crate) fn frame(
    views: &[LockView],
    h: &Header,
    size: Option<(usize, usize)>,
    look: &mut Look,
) -> Vec<String> {
    let shown_views = arrange(views, look);
    let now = views.first().map(|v| v.now_ms);
    let mut head = format!(
        "rlock top - {} lock{} in use matching {:?}",
        views.len(),
        if views.len() == 1 { "" } else { "s" },
        shown(h.pattern),
    );
    if let Some(ms) = now {
        head.push_str(&format!(", server time {}", rlock::lock::format_ms(ms)));
    }
    if h.live {
        head.push_str(&format!(", every {}", short(h.every)));
    }
    let mut lines = vec![head];
    if h.live {
        let mut keys = format!("sort {} (s)", look.sort.name());
        match &look.typing {
            Some(t) => keys.push_str(&format!(", filter: {}_ (Enter, Esc)", shown(t))),
            None if !look.filter.is_empty() => {
                keys.push_str(&format!(", filter {:?} (/, Esc)", shown(&look.filter)));
            }
            None => keys.push_str(", / filter"),
        }
        keys.push_str(", w waiters, j/k scroll, q quits");
        lines.push(keys);
    }
    if let Some(e) = h.error {
        lines.push(format!("refresh failed: {e}"));
    }
    let cap = size.map(|(cols, _)| cols.saturating_sub(BESIDE_LOCK).max(LOCK_MIN));
    let rows: Vec<[String; 9]> = shown_views.iter().map(|v| row(v, cap)).collect();
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
    let mut body = Vec::new();
    for (v, r) in shown_views.iter().zip(&rows) {
        body.push(line(r));
        if look.waiters {
            body.extend(v.status.queue.iter().map(|w| waiter_row(v, w)));
            let more = v.status.waiters.saturating_sub(v.status.queue.len() as u64);
            if more > 0 {
                body.push(format!("  and {more} more waiting"));
            }
        }
    }
    let room = size.map_or(usize::MAX, |(_, r)| r.saturating_sub(lines.len()));
    if body.len() > room {
        let page = room.saturating_sub(1);
        look.offset = look.offset.min(body.len() - page);
        let end = look.offset + page;
        lines.extend(body[look.offset..end].iter().cloned());
        lines.push(format!("... {} more", body.len() - end));
    } else {
        look.offset = 0;
        lines.extend(body);
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

/// `s` cut to `max` characters, its end replaced by … when cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn row(v: &LockView, cap: Option<usize>) -> [String; 9] {
    let st = &v.status;
    let holder = match st.holders.first() {
        None => "-".to_string(),
        Some(first) => {
            let mut s = format!("{}:{}", shown(&first.host), first.pid);
            if st.holders.len() > 1 {
                s.push_str(&format!(" +{}", st.holders.len() - 1));
            }
            // Taken together with other locks (`rlock exec a b`).
            if !first.set.is_empty() {
                s.push_str(&format!(" with {}", shown(&first.set.join(","))));
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
    let name = shown(&st.key);
    [
        cap.map_or(name.clone(), |c| cut(&name, c)),
        if st.held {
            short(v.held_for())
        } else {
            "-".into()
        },
        ttl.map_or("-".into(), |ms| short(Duration::from_millis(ms))),
        st.waiters.to_string(),
        v.oldest_wait.map_or("-".into(), short),
        kind,
        holder,
        v.grants_last_minute.to_string(),
        last,
    ]
}

/// A waiter under its lock's row: "  > host:pid user U prio N waited D
/// cmd C".
fn waiter_row(v: &LockView, w: &rlock::WaiterStatus) -> String {
    let mut s = String::from("  >");
    if !w.mode.is_empty() {
        s.push_str(&format!(" {}", w.mode));
    }
    if w.host.is_empty() {
        s.push_str(" (unknown)");
    } else {
        s.push_str(&format!(" {}:{}", shown(&w.host), w.pid));
    }
    if !w.user.is_empty() {
        s.push_str(&format!(" user {}", shown(&w.user)));
    }
    s.push_str(&format!(" prio {}", w.priority));
    if w.since_ms > 0 {
        s.push_str(&format!(" waited {}", short(v.since(w.since_ms))));
    }
    if let Some(c) = &w.cmd {
        s.push_str(&format!(" cmd {}", shown(c)));
    }
    s
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
        let lines = frame(&[], &h, Some((20, 24)), &mut Look::default());
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.chars().count() <= 20), "{lines:?}");
        let plain = frame(
            &[],
            &Header { live: false, ..h },
            None,
            &mut Look::default(),
        );
        assert!(plain[1].starts_with("LOCK  HELD  TTL  WAIT"), "{plain:?}");
    }

    fn view(key: &str, waiters: u64, held_s: u64) -> LockView {
        let holder = rlock::HolderStatus {
            mode: "exclusive".into(),
            host: "host".into(),
            pid: 7,
            since_ms: 100_000 - held_s * 1000,
            ttl_ms: 20_000,
            count: 1,
            fence: 1,
            ..rlock::HolderStatus::default()
        };
        LockView {
            status: rlock::Status {
                key: key.into(),
                kind: "exclusive".into(),
                held: true,
                limit: 1,
                fence: 1,
                waiters,
                holders: vec![holder],
                queue: (0..waiters)
                    .map(|i| rlock::WaiterStatus {
                        host: "w".into(),
                        pid: u32::try_from(i).unwrap_or(0),
                        user: "bob".into(),
                        priority: 2,
                        since_ms: 90_000,
                        cmd: Some("job\x1b[2J".into()),
                        ..Default::default()
                    })
                    .collect(),
                ..rlock::Status::default()
            },
            now_ms: 100_000,
            oldest_wait: (waiters > 0).then(|| Duration::from_secs(10)),
            grants_last_minute: 0,
            last_event: None,
            counters: Default::default(),
            renewed_ms: None,
        }
    }

    fn live() -> Header<'static> {
        Header {
            pattern: "*",
            every: Duration::from_secs(1),
            error: None,
            live: true,
        }
    }

    #[test]
    fn a_narrow_terminal_keeps_held_ttl_and_wait_and_cuts_long_names() {
        let long = format!("deploy-{}\u{202e}", "x".repeat(80));
        let views = [view(&long, 2, 65), view("db", 0, 5)];
        for cols in [60, 80] {
            let lines = frame(&views, &live(), Some((cols, 24)), &mut Look::default());
            assert!(lines.iter().all(|l| l.chars().count() <= cols), "{lines:?}");
            let titles = lines.iter().find(|l| l.starts_with("LOCK")).unwrap();
            let t: Vec<&str> = titles.split_whitespace().collect();
            assert_eq!(t[..4], ["LOCK", "HELD", "TTL", "WAIT"], "{cols}: {titles}");
            let row = lines.iter().find(|l| l.starts_with("deploy-")).unwrap();
            let cells: Vec<&str> = row.split_whitespace().collect();
            assert!(cells[0].ends_with('…'), "{row}");
            assert_eq!(cells[0].chars().count(), cols - BESIDE_LOCK, "{row}");
            assert_eq!(&cells[1..4], ["1m05s", "20s", "2"], "{cols}: {row}");
        }
        // Not cut without a size (--once), but escaped.
        let plain = frame(&views, &live(), None, &mut Look::default());
        assert!(
            plain.iter().any(|l| l.contains(r"xxx\u{202e}  1m05s")),
            "{plain:?}"
        );
    }

    #[test]
    fn keys_sort_filter_scroll_and_show_waiters() {
        let views: Vec<LockView> = (0..30)
            .map(|i| view(&format!("k{i:02}"), i % 3, i))
            .collect();
        let mut look = Look::default();
        let size = Some((80, 10));
        let rows = |lines: &[String]| -> Vec<String> {
            lines
                .iter()
                .skip_while(|l| !l.starts_with("LOCK"))
                .skip(1)
                .map(|l| l.split_whitespace().next().unwrap().to_string())
                .collect()
        };
        assert_eq!(look.key(b"s", 6), Asked::Redraw);
        assert_eq!(look.sort, Sort::Name);
        let lines = frame(&views, &live(), size, &mut look);
        assert_eq!(rows(&lines)[..2], ["k00", "k01"]);
        assert_eq!(lines.last().unwrap(), "... 24 more");
        // A page down, a row up (an arrow key), to the end and back.
        look.key(b" \x1b[A", 6);
        let lines = frame(&views, &live(), size, &mut look);
        assert_eq!(rows(&lines)[0], "k05");
        look.key(b"G", 6);
        let lines = frame(&views, &live(), size, &mut look);
        assert_eq!(rows(&lines).last().unwrap(), "...");
        assert_eq!(rows(&lines)[rows(&lines).len() - 2], "k29");
        look.key(b"g", 6);
        // Sorted by the longest hold.
        look.key(b"s", 6);
        assert_eq!(look.sort, Sort::Held);
        let lines = frame(&views, &live(), size, &mut look);
        assert_eq!(rows(&lines)[0], "k29");
        // A filter typed: q is a letter then; Esc clears it.
        assert_eq!(look.key(b"/k2q", 6), Asked::Redraw);
        assert_eq!(look.filter, "k2q");
        look.key(b"\x7f\r", 6);
        let lines = frame(&views, &live(), size, &mut look);
        let shown_rows = rows(&lines);
        assert_eq!(shown_rows[..2], ["k29", "k28"], "{lines:?}");
        assert!(
            shown_rows.iter().all(|r| r.starts_with("k2") || r == "..."),
            "{lines:?}"
        );
        assert!(lines[1].contains("filter \"k2\""), "{lines:?}");
        // The waiters under their lock, escaped.
        look.key(b"w", 6);
        let lines = frame(&views, &live(), Some((80, 40)), &mut look);
        let w = lines.iter().find(|l| l.starts_with("  >")).unwrap();
        assert_eq!(w, r"  > w:0 user bob prio 2 waited 10s cmd job\x1b[2J");
        look.key(b"\x1b", 6);
        assert!(look.filter.is_empty());
        assert_eq!(look.key(b"xq", 6), Asked::Quit);
    }
}
