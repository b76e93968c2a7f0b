//! `history KEY` and `history --all`: locks' events, oldest first;
//! `--since` keeps the recent ones, `--follow` goes on printing new ones.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rlock::{Event, Locker, exit_code};

use crate::cli::{Global, History};
use crate::out::print;
use crate::render;
use crate::setup::connect;

/// How often `--follow` reads again.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// `history`: one lock's last events, or every lock's (`--all`), then
/// with `--follow` the new ones as they come.
pub(crate) fn history(g: &Global, h: &History) -> anyhow::Result<u8> {
    if let Some(key) = &h.key {
        rlock::lock::LockName::new(&g.prefix, key)?;
    }
    let mut locker = connect(g)?;
    let limit = h.limit as usize;
    let since = h.since.map(|d| d.0);
    let rows = read(&mut locker, h.key.as_deref(), limit, since)?;
    if !h.follow {
        match (&h.key, h.json) {
            (Some(key), false) => {
                let events: Vec<Event> = rows.into_iter().map(|(_, e)| e).collect();
                print(&render::history(key, &events))?;
            }
            (_, json) => print(&lines(&rows, json, h.all))?,
        }
        return Ok(exit_code::OK);
    }
    let mut seen = Seen::default();
    print(&lines(&seen.unseen(rows), h.json, h.all))?;
    loop {
        std::thread::sleep(FOLLOW_EVERY);
        // The last `limit` events of each lock at least (the new ones of a
        // second fit, unless a lock had more than that).
        let rows = read(&mut locker, h.key.as_deref(), limit.max(1_000), since)?;
        let new = seen.unseen(rows);
        if !new.is_empty() {
            print(&lines(&new, h.json, h.all))?;
        }
    }
}

/// The last `limit` events of `key` (or of every lock), oldest first,
/// each with its lock's name: of those at most `since` old.
fn read(
    locker: &mut Locker,
    key: Option<&str>,
    limit: usize,
    since: Option<Duration>,
) -> anyhow::Result<Vec<(String, Event)>> {
    let names = match key {
        Some(k) => vec![k.to_string()],
        None => locker.known_names("*")?,
    };
    let mut rows = Vec::new();
    for n in names {
        rows.extend(
            locker
                .history(&n, limit)?
                .into_iter()
                .map(|e| (n.clone(), e)),
        );
    }
    let from = since.map_or(0, |d| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        rlock::duration::millis(now.saturating_sub(d))
    });
    Ok(last(rows, from, limit))
}

/// The last `limit` of `rows` at or after `from` (ms), in time order (by
/// lock name among events of one millisecond, each lock's own order kept).
fn last(mut rows: Vec<(String, Event)>, from: u64, limit: usize) -> Vec<(String, Event)> {
    rows.retain(|(_, e)| e.at >= from);
    rows.sort_by(|a, b| (a.1.at, &a.0).cmp(&(b.1.at, &b.0)));
    let skip = rows.len().saturating_sub(limit);
    rows.split_off(skip)
}

/// What `--follow` has printed: the time of the newest event, and the
/// events of that millisecond (a later read shows them again).
#[derive(Default)]
struct Seen {
    at: u64,
    those: HashSet<String>,
}

impl Seen {
    /// The rows not printed yet, noted as printed.
    fn unseen(&mut self, rows: Vec<(String, Event)>) -> Vec<(String, Event)> {
        let mut out = Vec::new();
        for (lock, e) in rows {
            let id = format!("{lock}\0{}", render::event_json(&e));
            if e.at < self.at || (e.at == self.at && self.those.contains(&id)) {
                continue;
            }
            if e.at > self.at {
                self.at = e.at;
                self.those.clear();
            }
            self.those.insert(id);
            out.push((lock, e));
        }
        out
    }
}

/// `rows` as lines: JSON objects (with the lock's name when `all`), or
/// text, the lock's name second.
fn lines(rows: &[(String, Event)], json: bool, all: bool) -> String {
    let mut out = String::new();
    for (lock, e) in rows {
        if json {
            let mut v = render::event_json(e);
            if all {
                v["lock"] = lock.as_str().into();
            }
            out.push_str(&v.to_string());
        } else {
            // One lock's table, its header and the trailing newline taken off.
            let one = render::history(lock, std::slice::from_ref(e));
            let row = one.lines().nth(1).unwrap_or_default();
            let (time, rest) = row.split_at(row.find("  ").unwrap_or(row.len()));
            out.push_str(&format!(
                "{time}  {}  {}",
                crate::escape::shown(lock),
                rest.trim_start()
            ));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(at: u64, event: &str) -> Event {
        Event {
            event: event.into(),
            at,
            ..Default::default()
        }
    }

    #[test]
    fn all_locks_merge_in_time_order_and_keep_the_last() {
        let rows = vec![
            ("b".to_string(), ev(10, "granted")),
            ("b".to_string(), ev(30, "released")),
            ("a".to_string(), ev(20, "granted")),
            ("a".to_string(), ev(30, "expired")),
            ("c".to_string(), ev(5, "granted")),
        ];
        let got: Vec<(String, u64)> = last(rows.clone(), 0, 3)
            .into_iter()
            .map(|(l, e)| (l, e.at))
            .collect();
        assert_eq!(got, [("a".into(), 20), ("a".into(), 30), ("b".into(), 30)]);
        assert_eq!(last(rows, 11, 100).len(), 3);
    }

    #[test]
    fn follow_prints_each_event_once() {
        let mut seen = Seen::default();
        let first = vec![("a".to_string(), ev(10, "granted"))];
        assert_eq!(seen.unseen(first.clone()).len(), 1);
        assert!(seen.unseen(first.clone()).is_empty());
        let mut more = first;
        more.push(("b".to_string(), ev(10, "granted")));
        more.push(("a".to_string(), ev(12, "released")));
        let new = seen.unseen(more.clone());
        assert_eq!(new.len(), 2);
        assert!(seen.unseen(more).is_empty());
    }

    #[test]
    fn all_rows_name_their_lock() {
        let rows = vec![("deploy".to_string(), ev(1_000, "granted"))];
        let text = lines(&rows, false, true);
        assert!(text.contains("  deploy  granted"), "{text}");
        let v: serde_json::Value = serde_json::from_str(lines(&rows, true, true).trim()).unwrap();
        assert_eq!(
            (v["lock"].as_str(), v["event"].as_str()),
            (Some("deploy"), Some("granted"))
        );
        let v: serde_json::Value = serde_json::from_str(lines(&rows, true, false).trim()).unwrap();
        assert!(v.get("lock").is_none());
    }
}
