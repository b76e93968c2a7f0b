//! Reading the Redis server: INFO as numbers, script server time, CPU,
//! and what lock state is left behind.

use std::collections::HashMap;

use crate::support::Redis;

/// SCRIPT LOAD `code`; its SHA1.
pub(crate) fn script_load(conn: &mut redis::Connection, code: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(code)
        .query(conn)
        .expect("SCRIPT LOAD")
}

/// One INFO reply as field -> number; a commandstats line becomes
/// `cmdstat_<name>` -> calls and `usec_<name>` -> microseconds spent. One
/// INFO call for all sections, so that the cost of observing is exactly one
/// INFO per snapshot.
pub(crate) fn info(conn: &mut redis::Connection, sections: &[&str]) -> HashMap<String, f64> {
    let mut cmd = redis::cmd("INFO");
    for s in sections {
        cmd.arg(*s);
    }
    let text: String = cmd.query(conn).expect("INFO");
    let mut out = HashMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        if let Some(name) = k.strip_prefix("cmdstat_") {
            for (field, prefix) in [("calls=", "cmdstat_"), ("usec=", "usec_")] {
                let n = v.split(',').find_map(|f| f.strip_prefix(field));
                if let Some(n) = n.and_then(|n| n.parse::<f64>().ok()) {
                    out.insert(format!("{prefix}{name}"), n);
                }
            }
        } else if let Ok(n) = v.parse::<f64>() {
            out.insert(k.to_string(), n);
        }
    }
    out
}

/// Server-side microseconds per lock script call between two snapshots:
/// what one acquire/release/status costs Redis's single thread.
pub(crate) fn script_usec(
    before: &HashMap<String, f64>,
    after: &HashMap<String, f64>,
) -> (f64, f64) {
    let d = |k: &str| after.get(k).unwrap_or(&0.0) - before.get(k).unwrap_or(&0.0);
    let calls = d("cmdstat_evalsha") + d("cmdstat_eval");
    let usec = d("usec_evalsha") + d("usec_eval");
    (calls, if calls > 0.0 { usec / calls } else { 0.0 })
}

pub(crate) fn blocked_clients(conn: &mut redis::Connection) -> u64 {
    info(conn, &["clients"])
        .get("blocked_clients")
        // INFO's integer field, read as f64: whole and small.
        .map_or(0, |n| {
            #[allow(clippy::cast_possible_truncation, reason = "see above")]
            let n = *n as u64;
            n
        })
}

/// CPU seconds the server has used, system plus user, all threads.
pub(crate) fn redis_cpu(conn: &mut redis::Connection) -> f64 {
    let i = info(conn, &["cpu"]);
    i.get("used_cpu_sys").unwrap_or(&0.0) + i.get("used_cpu_user").unwrap_or(&0.0)
}

/// Lock state left in Redis: not the last fences, the request answers
/// (`:r:<request>`), the wake-up signals (`:w:<token>`) or the shards of
/// the index of locks in use (`{i<n>}:index`), which expire by themselves
/// (section 12 checks that every key does).
pub(crate) fn leftovers(r: &Redis) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut r.conn())
        .expect("KEYS");
    let expiring = |k: &str| {
        k.ends_with(":fence")
            || k.contains("}:r:")
            || k.contains("}:w:")
            || (k.ends_with(":index") && k.contains("{i"))
    };
    keys.retain(|k| !expiring(k));
    keys.sort();
    keys
}

pub(crate) fn describe(keys: &[String]) -> String {
    match keys.len() {
        0 => "nothing (but fences, answers, wake-up signals and the index, which expire)".into(),
        n if n <= 5 => format!("{keys:?}"),
        n => format!("{n} keys, e.g. {:?}", &keys[..5]),
    }
}
