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
    let rows = read(&mut locker, h.key.as_deref(), limit, since_ms(since))?;
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
        // second fit, unless a lock had more than that), of those not
        // older than the newest printed: so a lock with nothing new costs
        // one event's read.
        let from = seen.at.max(since_ms(since));
        let rows = read(&mut locker, h.key.as_deref(), limit.max(1_000), from)?;
        let new = seen.unseen(rows);
        if !new.is_empty() {
            print(&lines(&new, h.json, h.all))?;
        }
    }
}

/// The server-clock time (ms) `since` ago by this machine's clock; 0 for
/// none.
fn since_ms(since: Option<Duration>) -> u64 {
    since.map_or(0, |d| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        rlock::duration::millis(now.saturating_sub(d))
    })
}

/// The last `limit` events of `key` (or of every lock), oldest first,
/// each with its lock's name: of those at or after `from` (ms).
///
/// Every lock: first each one's last `few` events (`limit` shared out
/// over the locks, at least one), all pipelined; then again, with
/// `limit`, only the locks that may have more among the last `limit`
/// overall: those that gave `few` events, the oldest of them not before
/// the `limit`-th newest event read (nor before `from`). The others gave
/// every event they have from that time on. So 10,000 locks cost about
/// 10,000 events read, not `limit` times that.
fn read(
    locker: &mut Locker,
    key: Option<&str>,
    limit: usize,
    from: u64,
) -> anyhow::Result<Vec<(String, Event)>> {
    let names = match key {
        Some(k) => vec![k.to_string()],
        None => locker.known_names("*")?,
    };
    let few = limit.div_ceil(names.len().max(1)).clamp(1, limit);
    let mut each = locker.histories(&names, few)?;
    if few < limit {
        let again = read_again(&each, few, limit, from);
        let keys: Vec<String> = again.iter().map(|&i| names[i].clone()).collect();
        for (i, events) in again.into_iter().zip(locker.histories(&keys, limit)?) {
            each[i] = events;
        }
    }
    let rows = names
        .into_iter()
        .zip(each)
        .flat_map(|(n, events)| events.into_iter().map(move |e| (n.clone(), e)))
        .collect();
    Ok(last(rows, from, limit))
}

/// Which locks `read` reads again with `limit`: of `each` lock's last
/// `few` events, those that gave `few`, the oldest not before the
/// `limit`-th newest event of all (nor before `from`).
fn read_again(each: &[Vec<Event>], few: usize, limit: usize, from: u64) -> Vec<usize> {
    let mut ats: Vec<u64> = each.iter().flatten().map(|e| e.at).collect();
    let cutoff = if ats.len() >= limit {
        let n = ats.len() - limit;
        *ats.select_nth_unstable(n).1
    } else {
        0
    }
    .max(from);
    (0..each.len())
        .filter(|&i| each[i].len() == few && each[i].first().is_some_and(|e| e.at >= cutoff))
        .collect()
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
    fn only_locks_that_may_hold_more_of_the_last_events_are_read_again() {
        // Each lock's last event (few = 1); the last 2 overall are wanted.
        let each = vec![
            vec![ev(50, "granted")],
            vec![ev(10, "granted")],
            vec![ev(40, "granted")],
            vec![],
        ];
        // The 2nd newest read is at 40: locks 0 and 2 may have more at or
        // after it; lock 1's newest is older; lock 3 has none.
        assert_eq!(read_again(&each, 1, 2, 0), [0, 2]);
        // Fewer events read than wanted: every lock that gave `few`.
        assert_eq!(read_again(&each, 1, 5, 0), [0, 1, 2]);
        // Nothing before `from` is wanted.
        assert_eq!(read_again(&each, 1, 5, 45), [0]);
        // A lock that gave fewer than `few` gave all it has.
        let each = vec![
            vec![ev(50, "granted")],
            vec![ev(60, "granted"), ev(70, "released")],
        ];
        assert_eq!(read_again(&each, 2, 3, 0), [1]);
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
