//! Section 10: what one lock cycle costs the Redis server, side by side
//! with the naive lock (`SET k tok NX PX` + a compare-and-delete EVALSHA)
//! and with Redisson's fair lock (its lock and unlock scripts, see
//! fairlock.rs), same server, same run: the library's acquire + release,
//! and one whole `rlock exec cK -- true` from the CLI (its connection
//! set-up included). Then where the library cycle's time goes: each
//! script's and each inner command's own time from the slow log; and the
//! floor (#32, goal 1: `FLOOR_ACQUIRE`), the cheapest script pair doing
//! what the lock's state alone must, then with the fence, a history event
//! and an index touch, run with the library cycle and FairLock in
//! alternating rounds, each round's figure over its FairLock figure.
//!
//! How the server time is read. `CONFIG RESETSTAT` zeroes INFO
//! commandstats, the cycles run, and one `INFO commandstats` reads, per
//! command, `calls` and `usec`. In Redis 7 a script's commands are counted
//! twice over: the EVALSHA row's usec is the script's whole run, the
//! commands it called included, and those inner commands also appear in
//! their own rows (GET, HGET, ZADD ...) with their own calls and usec. So
//! the server time of a cycle is the sum of the usec of the rows of the
//! commands clients sent (EVALSHA, EVAL, SET, BLPOP, connection set-up),
//! never of all rows; the inner rows are reported only as counts, beside.
//! The rows of our own CONFIG RESETSTAT and INFO are left out (the INFO
//! that reads is not yet counted in its own reply).

use std::collections::HashMap;
use std::time::Duration;

use rlock::{Request, Wait};

use crate::Bench;
use crate::client::{locker, rlock};
use crate::fairlock::FairLock;
use crate::process::run_ok;
use crate::server::info;
use crate::stats::section;
use crate::support::{Redis, start_redis};

const CYCLES: usize = 500;
const EXEC_CYCLES: usize = 100;
/// The commands rlock's clients send on these paths (its scripts call none
/// of them): their usec is the server time of a cycle.
const RLOCK_SENT: [&str; 3] = ["evalsha", "eval", "blpop"];
/// The naive lock's client commands.
const NAIVE_SENT: [&str; 2] = ["set", "evalsha"];
/// The fair lock's: its two scripts (the latch's DEL Redisson sends after
/// the unlock is left out, see `run`).
const FAIR_SENT: [&str; 1] = ["evalsha"];

/// The floor (#32, goal 1): the cheapest script pair that does what an
/// uncontended rlock cycle's state alone must, written for this bench
/// only, each feature switched on by an argument, so that each one's cost
/// is measured beside FairLock's: a reentrant hold (its count and info in
/// the state hash) with its own lease (a zset score on the server's
/// clock, as every holder of a semaphore or read lock has), free only if
/// nobody holds or waits (EXISTS of the state, holders and queue), every
/// key expiring (PEXPIRE of the two it writes); ARGV[4] '1' adds the fence
/// (GET + SET PX: one more than the last while it is kept), ARGV[5] '1' a
/// history event per script (RPUSH of the JSON entry + HINCRBY of its
/// counter; the list and counters get their expiry when made, where
/// rlock moves it once per slack), ARGV[6] '1' the index touch (one ZADD
/// GT; the shard's expiry set when the entry is new, where rlock keeps it
/// ahead of every entry). No Cluster or RedLock concern, no maxmemory
/// order, no check of foreign keys, no resends, no waiters.
/// KEYS: state, holders, queue, fence, log, counters, index shard.
/// ARGV: token, lease ms, info, fence, history, index, lock name.
const FLOOR_ACQUIRE: &str = r"
local tok, ttl = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now_s = t[1] .. string.sub('00000' .. t[2], -6, -4)
local now = tonumber(now_s)
local until_s = string.format('%d', now + tonumber(ttl))
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) == 0 then
  local fence = '0'
  if ARGV[4] == '1' then
    local last = redis.call('GET', KEYS[4])
    fence = last and string.format('%d', tonumber(last) + 1) or now_s
    redis.call('SET', KEYS[4], fence, 'PX', ttl)
  end
  if ARGV[5] == '1' then
    if redis.call('RPUSH', KEYS[5], cjson.encode({now, 'granted', fence, ARGV[3], 'w', 0})) == 1 then
      redis.call('PEXPIRE', KEYS[5], 604800000)
    end
    if redis.call('HINCRBY', KEYS[6], 'grants', '1') == 1 then
      redis.call('PEXPIRE', KEYS[6], 604800000)
    end
  end
  redis.call('ZADD', KEYS[2], until_s, tok)
  redis.call('HSET', KEYS[1], 'c:' .. tok, '1', 'f:' .. tok, fence, 'i:' .. tok, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  if ARGV[6] == '1' and redis.call('ZADD', KEYS[7], 'GT', until_s, ARGV[7]) == 1 then
    redis.call('PEXPIRE', KEYS[7], ttl)
  end
  return {1, fence, 1}
end
if redis.call('ZSCORE', KEYS[2], tok) then
  local n = redis.call('HINCRBY', KEYS[1], 'c:' .. tok, '1')
  redis.call('ZADD', KEYS[2], 'GT', until_s, tok)
  return {1, redis.call('HGET', KEYS[1], 'f:' .. tok), n}
end
return {0}
";

/// The floor's release: the only holder, its lease running, nobody
/// waiting: one hold fewer, the state gone with the last (and its history
/// event with ARGV[2] '1').
/// KEYS: as FLOOR_ACQUIRE's. ARGV: token, history.
const FLOOR_RELEASE: &str = r"
local tok = ARGV[1]
local first = redis.call('ZRANGE', KEYS[2], 0, 1, 'WITHSCORES')
local t = redis.call('TIME')
local now = tonumber(t[1] .. string.sub('00000' .. t[2], -6, -4))
if first[1] ~= tok or first[3] or tonumber(first[2]) <= now
    or redis.call('EXISTS', KEYS[3]) == 1 then
  return {-1}
end
local h = redis.call('HMGET', KEYS[1], 'c:' .. tok, 'f:' .. tok, 'i:' .. tok)
if h[1] ~= '1' then return {redis.call('HINCRBY', KEYS[1], 'c:' .. tok, '-1')} end
if ARGV[2] == '1' then
  redis.call('RPUSH', KEYS[5], cjson.encode({now, 'released', h[2] or '0', h[3] or '', 'd', 0}))
  redis.call('HINCRBY', KEYS[6], 'released', '1')
end
redis.call('DEL', KEYS[1], KEYS[2])
return {0}
";

/// One variant of the floor (see FLOOR_ACQUIRE), on a lock of its own.
struct Floor {
    acquire: String,
    release: String,
    keys: Vec<String>,
    fence: bool,
    history: bool,
    index: bool,
}

impl Floor {
    fn new(
        conn: &mut redis::Connection,
        name: &str,
        fence: bool,
        history: bool,
        index: bool,
    ) -> Self {
        let load = crate::server::script_load;
        let keys = ["", ":h", ":q", ":fence", ":log", ":n"]
            .iter()
            .map(|s| format!("floor:{{{name}}}{s}"))
            .chain(std::iter::once("floor:{i0}:index".to_string()))
            .collect();
        Self {
            acquire: load(conn, FLOOR_ACQUIRE),
            release: load(conn, FLOOR_RELEASE),
            keys,
            fence,
            history,
            index,
        }
    }

    fn cycle(&self, conn: &mut redis::Connection, tok: &str) {
        let flag = |b: bool| if b { "1" } else { "0" };
        let got: Vec<redis::Value> = redis::cmd("EVALSHA")
            .arg(&self.acquire)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(tok)
            .arg(30_000)
            .arg(r#"{"host":"vm","pid":9716,"user":"root"}"#)
            .arg(flag(self.fence))
            .arg(flag(self.history))
            .arg(flag(self.index))
            .arg(&self.keys[0])
            .query(conn)
            .expect("floor acquire");
        assert_eq!(
            got.first(),
            Some(&redis::Value::Int(1)),
            "the floor's lock was free"
        );
        let freed: Vec<i64> = redis::cmd("EVALSHA")
            .arg(&self.release)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(tok)
            .arg(flag(self.history))
            .query(conn)
            .expect("floor release");
        assert_eq!(freed, [0], "the floor's lock was released");
    }
}

/// Rounds of the library cycle, FairLock's and the floors, one block of
/// each per round, alternating (a shared machine's load moves every
/// variant of a round alike): each round's server time over its FairLock
/// figure, median and range.
const ROUNDS: usize = 7;
const ROUND_CYCLES: usize = 200;

/// One cycle's cost, averaged over the cycles measured.
struct Cost {
    /// Server time of the commands clients sent, µs per cycle.
    usec: f64,
    /// Commands clients sent per cycle.
    sent: f64,
    /// Commands run inside scripts per cycle.
    inner: f64,
    /// Inner commands per cycle, by name, most first.
    inner_by: Vec<(String, f64)>,
}

/// Connection set-up and other commands no script may call: always sent
/// by a client.
fn connection_command(name: &str) -> bool {
    [
        "client|", "script|", "hello", "auth", "select", "ping", "readonly",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// Server cost per cycle of `cycle`, run `n` times; `sent` names the
/// commands the clients send (their usec already holds the inner ones).
fn measure(r: &Redis, n: usize, sent: &[&str], mut cycle: impl FnMut(usize)) -> Cost {
    let mut conn = r.conn();
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut conn)
        .expect("CONFIG RESETSTAT");
    for i in 0..n {
        cycle(i);
    }
    let after = info(&mut conn, &["commandstats"]);
    let calls: HashMap<&str, f64> = after
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("cmdstat_")?, *v)))
        .filter(|(name, _)| *name != "info" && !name.starts_with("config|"))
        .collect();
    let per = |x: f64| x / n as f64;
    let is_sent = |name: &str| sent.contains(&name) || connection_command(name);
    let usec: f64 = calls
        .keys()
        .filter(|name| is_sent(name))
        .map(|name| after.get(&format!("usec_{name}")).unwrap_or(&0.0))
        .sum();
    let mut inner_by: Vec<(String, f64)> = calls
        .iter()
        .filter(|(name, _)| !is_sent(name))
        .map(|(name, c)| (name.to_uppercase(), per(*c)))
        .collect();
    inner_by.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Cost {
        usec: per(usec),
        sent: per(calls
            .iter()
            .filter(|(k, _)| is_sent(k))
            .map(|(_, c)| c)
            .sum()),
        inner: inner_by.iter().map(|(_, c)| c).sum(),
        inner_by,
    }
}

/// Where a cycle's server time goes, from the slow log at threshold 0 (a
/// pass of its own: logging every command costs the server a little, so
/// its times are a little above INFO's): per script (`scripts` names them
/// by SHA1), its own time per call, its inner commands included, and how
/// many it ran; per inner command, calls per cycle and own time per call.
/// An inner command is logged before the script that ran it, by a client
/// named `?:0`: so each is counted to the next script logged.
struct Profile {
    scripts: Vec<(String, f64, f64)>,
    inner: Vec<(String, f64, f64)>,
}

fn profile(r: &Redis, n: usize, scripts: &[(&str, &str)], mut cycle: impl FnMut(usize)) -> Profile {
    let mut conn = r.conn();
    crate::profile::slowlog_start(&mut conn);
    for i in 0..n {
        cycle(i);
    }
    type Entry = (i64, i64, i64, Vec<String>, String, String);
    let mut log: Vec<Entry> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(100_000)
        .query(&mut conn)
        .expect("SLOWLOG GET");
    crate::profile::slowlog_stop(&mut conn);
    log.reverse();
    // name -> (calls, usec, inner commands)
    let mut by_script: HashMap<String, (f64, f64, f64)> = HashMap::new();
    let mut by_inner: HashMap<String, (f64, f64)> = HashMap::new();
    let mut pending = 0.0;
    for (_, _, us, args, client, _) in log {
        let cmd = args.first().map(|a| a.to_uppercase()).unwrap_or_default();
        let us = us as f64;
        if client == "?:0" {
            let e = by_inner.entry(cmd).or_default();
            e.0 += 1.0;
            e.1 += us;
            pending += 1.0;
        } else if cmd == "EVALSHA" {
            let sha = args.get(1).map(String::as_str).unwrap_or("");
            let name = scripts
                .iter()
                .find(|(s, _)| *s == sha)
                .map_or_else(|| format!("script {sha}"), |(_, n)| (*n).to_string());
            let e = by_script.entry(name).or_default();
            e.0 += 1.0;
            e.1 += us;
            e.2 += pending;
            pending = 0.0;
        }
    }
    let mut scripts: Vec<(String, f64, f64)> = by_script
        .into_iter()
        .map(|(k, (calls, us, inner))| (k, us / calls, inner / calls))
        .collect();
    scripts.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut inner: Vec<(String, f64, f64)> = by_inner
        .into_iter()
        .map(|(k, (calls, us))| (k, calls / n as f64, us / calls))
        .collect();
    inner.sort_by(|a, b| (b.1 * b.2).total_cmp(&(a.1 * a.2)).then(a.0.cmp(&b.0)));
    Profile { scripts, inner }
}

pub(crate) fn run(_: &Bench) {
    let r = start_redis(&[]);
    let mut conn = r.conn();
    let cad = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(cad)
        .query(&mut conn)
        .expect("SCRIPT LOAD");
    let naive = measure(&r, CYCLES, &NAIVE_SENT, |i| {
        let tok = format!("tok-{i}");
        let _: Option<String> = redis::cmd("SET")
            .arg("naive")
            .arg(&tok)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query(&mut conn)
            .expect("SET");
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg("naive")
            .arg(&tok)
            .query(&mut conn)
            .expect("EVALSHA");
    });
    // Redisson's fair lock, paced alike: one script call at a time from
    // one connection.
    let fair_lock = FairLock::new(&mut conn, "fair");
    let fair = measure(&r, CYCLES, &FAIR_SENT, |_| fair_lock.cycle(&mut conn));
    let mut l = locker(&r);
    let req = Request::builder(Duration::from_secs(30))
        .wait(Wait::No)
        .build()
        .expect("request");
    let lib = measure(&r, CYCLES, &RLOCK_SENT, |_| {
        let lease = l.acquire("cost", &req, None, &mut |_| {}).expect("acquire");
        l.release("cost", &lease.token).expect("release");
    });
    // The history at its cap (#19): what it weighs, and what the cycle
    // costs with counters only (no stream).
    let name = l.name("cost").expect("lock name");
    let weigh = |conn: &mut redis::Connection, k: &str| -> i64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(k)
            .arg("SAMPLES")
            .arg(0)
            .query(conn)
            .unwrap_or(0)
    };
    let log_len: i64 = redis::cmd("LLEN")
        .arg(name.log_key())
        .query(&mut conn)
        .unwrap_or(0);
    let log_mem = weigh(&mut conn, &name.log_key());
    let stats_mem = weigh(&mut conn, &name.stats_key());
    // Where the library cycle's time goes, and the fair lock's, on the
    // same lock names (slow log; a pass of its own).
    let scripts = [
        (env!("RLOCK_LUA_SHA_acquire.lua"), "acquire.lua"),
        (env!("RLOCK_LUA_SHA_release.lua"), "release.lua"),
        (env!("RLOCK_LUA_SHA_index.lua"), "index.lua"),
        (fair_lock.lock_sha(), "FairLock lock"),
        (fair_lock.unlock_sha(), "FairLock unlock"),
    ];
    let lib_profile = profile(&r, CYCLES, &scripts, |_| {
        let lease = l.acquire("cost", &req, None, &mut |_| {}).expect("acquire");
        l.release("cost", &lease.token).expect("release");
    });
    let fair_profile = profile(&r, CYCLES, &scripts, |_| fair_lock.cycle(&mut conn));
    // The floors and the library cycle against FairLock, round by round.
    let floors = [
        (
            "floor: reentrant hold + lease + queue check",
            Floor::new(&mut conn, "f0", false, false, false),
        ),
        (
            "floor + fence",
            Floor::new(&mut conn, "f1", true, false, false),
        ),
        (
            "floor + fence + history event",
            Floor::new(&mut conn, "f2", true, true, false),
        ),
        (
            "floor + fence + history + index touch",
            Floor::new(&mut conn, "f3", true, true, true),
        ),
    ];
    let variants = 2 + floors.len();
    let mut round_us = vec![Vec::new(); variants];
    let mut round_cmds = vec![0.0; variants];
    for round in 0..ROUNDS {
        let mut order: Vec<usize> = (0..variants).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for v in order {
            let c = match v {
                0 => measure(&r, ROUND_CYCLES, &FAIR_SENT, |_| fair_lock.cycle(&mut conn)),
                1 => measure(&r, ROUND_CYCLES, &RLOCK_SENT, |_| {
                    let lease = l.acquire("cost", &req, None, &mut |_| {}).expect("acquire");
                    l.release("cost", &lease.token).expect("release");
                }),
                k => measure(&r, ROUND_CYCLES, &FAIR_SENT, |i| {
                    floors[k - 2].1.cycle(&mut conn, &format!("tok-{i}"));
                }),
            };
            round_us[v].push(c.usec);
            round_cmds[v] = c.sent + c.inner;
        }
    }
    let keep = rlock::HistoryLimits::default().retention();
    l.set_history(rlock::HistoryLimits::new(0, keep).expect("history limits"));
    let lib_counters = measure(&r, CYCLES, &RLOCK_SENT, |_| {
        let lease = l
            .acquire("cost0", &req, None, &mut |_| {})
            .expect("acquire");
        l.release("cost0", &lease.token).expect("release");
    });
    // The naive lock as a shell script runs it: one redis-cli per command,
    // each a new connection, as each `rlock exec` is. Server time per call
    // depends on the pacing (a server that idles between calls runs them
    // with colder caches), so the CLI is compared with this row.
    let port = r.port.to_string();
    let naive_cli = measure(&r, EXEC_CYCLES, &NAIVE_SENT, |i| {
        let tok = format!("tok-{i}");
        for args in [
            vec!["SET", "naivecli", &tok, "NX", "PX", "30000"],
            vec!["EVALSHA", &sha, "1", "naivecli", &tok],
        ] {
            let out = std::process::Command::new("redis-cli")
                .args(["-p", &port])
                .args(&args)
                .output()
                .expect("redis-cli");
            assert!(out.status.success(), "redis-cli {args:?}");
        }
    });
    let cli = measure(&r, EXEC_CYCLES, &RLOCK_SENT, |i| {
        run_ok(rlock(&r).args(["exec", &format!("c{i}"), "--", "true"]));
    });
    section(&format!(
        "10. Redis cost per lock cycle (INFO commandstats after CONFIG RESETSTAT; {CYCLES} cycles, exec {EXEC_CYCLES})"
    ));
    println!(
        "   {:<44} {:>8} {:>8} {:>6} {:>6} {:>7} {:>7}",
        "cycle", "usec", "commands", "sent", "inner", "x usec", "x cmds"
    );
    let rows = [
        (
            "naive SET NX PX + compare-and-delete EVALSHA",
            &naive,
            &naive,
        ),
        ("Redisson FairLock lock + unlock scripts", &fair, &naive),
        ("rlock library acquire + release", &lib, &naive),
        ("the same, --history-events 0", &lib_counters, &naive),
        (
            "naive pair, one redis-cli per command",
            &naive_cli,
            &naive_cli,
        ),
        ("rlock exec cK -- true (CLI)", &cli, &naive_cli),
    ];
    for (name, c, base) in rows {
        let cmds = c.sent + c.inner;
        println!(
            "   {name:<44} {:>8.1} {cmds:>8.1} {:>6.1} {:>6.1} {:>6.2}x {:>6.2}x",
            c.usec,
            c.sent,
            c.inner,
            c.usec / base.usec,
            cmds / (base.sent + base.inner)
        );
    }
    for (name, c) in [("library", &lib), ("FairLock", &fair), ("exec", &cli)] {
        let by: Vec<String> = c
            .inner_by
            .iter()
            .map(|(k, n)| format!("{k} {n:.1}"))
            .collect();
        println!("   inside scripts per {name} cycle: {}", by.join(", "));
    }
    println!(
        "   rlock library cycle over FairLock's: usec {:.2}x, commands {:.2}x (goal, #32: usec at most 1.0x)",
        lib.usec / fair.usec,
        (lib.sent + lib.inner) / (fair.sent + fair.inner)
    );
    println!(
        "   {ROUNDS} rounds of {ROUND_CYCLES} cycles, alternating; each round's usec over its FairLock figure:"
    );
    let mut fair_us = round_us[0].clone();
    fair_us.sort_by(f64::total_cmp);
    println!(
        "   {:<44} {:>6.1} us (median) {:>5.1} commands  1.00x",
        "Redisson FairLock lock + unlock scripts",
        fair_us[fair_us.len() / 2],
        round_cmds[0]
    );
    let names =
        std::iter::once("rlock library acquire + release").chain(floors.iter().map(|f| f.0));
    for (v, name) in (1..variants).zip(names) {
        let mut ratios: Vec<f64> = round_us[v]
            .iter()
            .zip(&round_us[0])
            .map(|(x, fair)| x / fair)
            .collect();
        ratios.sort_by(f64::total_cmp);
        let mut us = round_us[v].clone();
        us.sort_by(f64::total_cmp);
        println!(
            "   {name:<44} {:>6.1} us (median) {:>5.1} commands  {:.2}x FairLock (median; {:.2} .. {:.2})",
            us[us.len() / 2],
            round_cmds[v],
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        );
        crate::goal(format!(
            "Redis server time, {name} over FairLock (section 10, median of rounds): {:.2}x{}",
            ratios[ratios.len() / 2],
            if v == 1 { "   goal at most 1.0x" } else { "" }
        ));
    }
    for (name, p) in [("library", &lib_profile), ("FairLock", &fair_profile)] {
        let s: Vec<String> = p
            .scripts
            .iter()
            .map(|(k, us, inner)| format!("{k} {us:.1} us ({inner:.1} inner)"))
            .collect();
        println!(
            "   slow log, {name} cycle, per script call: {}",
            s.join(", ")
        );
        let s: Vec<String> = p
            .inner
            .iter()
            .map(|(k, calls, us)| format!("{k} {calls:.2}x{us:.2}"))
            .collect();
        println!(
            "   slow log, {name} cycle, inner commands (calls per cycle x own us): {}",
            s.join(", ")
        );
    }
    println!(
        "   FairLock: Redisson's RedissonFairLock scripts (commit a5077398, see fairlock.rs) as"
    );
    println!(
        "   EVALSHA; Redisson also sends a DEL of its unlock latch after each unlock, not counted"
    );
    println!(
        "   usec: server time per cycle, the sum over the commands clients sent (EVALSHA, EVAL,"
    );
    println!(
        "   SET, BLPOP, connection set-up), whose usec includes the commands scripts ran; those"
    );
    println!("   are counted as inner and their time is not added again. commands = sent + inner.");
    println!("   x = over the naive pair paced alike: the library over the first row, the CLI");
    println!("   over the redis-cli row. Goals (#12): library at most 2x, exec at most 2.5x usec");
    println!(
        "   history after {CYCLES} cycles (cap 200): P{{K}}:log {log_len} entries, {log_mem} bytes; P{{K}}:n {stats_mem} bytes"
    );
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    keys.sort();
    let immortal: Vec<&String> = keys
        .iter()
        .filter(|k| {
            redis::cmd("PTTL")
                .arg(*k)
                .query::<i64>(&mut conn)
                .unwrap_or(0)
                == -1
        })
        .collect();
    let sample: Vec<&&String> = immortal.iter().take(3).collect();
    println!(
        "   keys left after the runs: {}, {} of them without an expiry (e.g. {sample:?})",
        keys.len(),
        immortal.len(),
    );
}
