//! The contended handoff: a grant made while others wait names the next in
//! line (lua/acquire.lua, "Next in line"), and its holder's release wakes
//! them in its own call (lua/release.lua), with no lua/wake.lua after it.
//! Counted with MONITOR, which shows every script call and, as `lua`
//! lines, the commands scripts run.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redis::Value;
use rlock::{Cancel, Error, Request, Wait};

use crate::util::*;

fn req(ttl_ms: u64) -> Request {
    Request::new(Duration::from_millis(ttl_ms)).unwrap()
}

/// The SHA1 rlock sends `file` (lua/) by.
fn sha(file: &str) -> String {
    redis::Script::new(&lua_script(file)).get_hash().to_string()
}

/// Every command `r` runs while it watches (MONITOR), until
/// [`Monitor::stop`].
struct Monitor {
    lines: JoinHandle<Vec<String>>,
    end: String,
}

impl Monitor {
    fn start(r: &Redis) -> Monitor {
        // Each call then shows once: EVALSHA, not EVALSHA, NOSCRIPT and
        // EVAL.
        for f in SCRIPTS {
            let _: String = r.cmd(&["SCRIPT", "LOAD", &lua_script(f)]);
        }
        let mut conn = r.conn();
        let _: () = redis::cmd("MONITOR").query(&mut conn).unwrap();
        // A line of its own ends the watch: no read timeout, which would
        // make the client skip a reply.
        let end = format!("monitor-end-{}", std::process::id());
        let stop = end.clone();
        let lines = std::thread::spawn(move || {
            let mut lines = Vec::new();
            conn.set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            loop {
                match conn.recv_response().expect("a MONITOR line") {
                    Value::SimpleString(l) if l.contains(&stop) => return lines,
                    Value::SimpleString(l) => lines.push(l),
                    _ => {}
                }
            }
        });
        Monitor { lines, end }
    }

    /// The lines seen, in order.
    fn stop(self, r: &Redis) -> Vec<String> {
        let _: String = r.cmd(&["ECHO", &self.end]);
        self.lines.join().unwrap()
    }
}

/// How many calls of script `file` the lines show (EVALSHA, or EVAL with
/// its code).
fn calls(lines: &[String], file: &str) -> usize {
    let (sha, header) = (sha(file), format!("-- {file}:"));
    lines
        .iter()
        .filter(|l| l.contains(&sha) || (l.contains("\"EVAL") && l.contains(&header)))
        .count()
}

/// The scripts a [`Monitor`] tells apart.
const SCRIPTS: [&str; 5] = [
    "acquire.lua",
    "release.lua",
    "wake.lua",
    "wait.lua",
    "index.lua",
];

/// The script calls the lines show, one a line: the client and the
/// script's file (for a failure's message).
fn script_calls(lines: &[String]) -> String {
    let named: Vec<(String, &str)> = SCRIPTS.iter().map(|f| (sha(f), *f)).collect();
    let mut out = String::new();
    for l in lines.iter().filter(|l| l.contains("\"EVAL")) {
        let file = named
            .iter()
            .find(|(sha, f)| l.contains(sha) || l.contains(&format!("-- {f}:")))
            .map_or("another script", |(_, f)| f);
        let client = l.split(' ').nth(2).unwrap_or("");
        out.push_str(&format!("{client} {file}\n"));
    }
    out
}

/// A waiter for `key` on its own connection, in a thread: it takes the
/// lock (waiting as `wait` says, cancelled by `cancel`), sends when it got
/// it on `granted`, holds it until `go` says, then releases.
fn waiter(
    r: &Redis,
    key: &'static str,
    wait: Wait,
    cancel: Arc<Cancel>,
    granted: mpsc::Sender<Instant>,
    go: Option<mpsc::Receiver<()>>,
) -> JoinHandle<Result<(), Error>> {
    let mut l = r.locker();
    std::thread::spawn(move || {
        let req = Request::builder(Duration::from_secs(30))
            .wait(wait)
            .build()
            .unwrap();
        let lease = l.acquire(key, &req, Some(&cancel), &mut |_| {})?;
        granted.send(Instant::now()).unwrap();
        if let Some(go) = go {
            go.recv().unwrap();
        }
        l.release(key, &lease.token)?;
        Ok(())
    })
}

/// Holder H, waiters A and B: H's release wakes A (lua/wake.lua: H's grant
/// found nobody waiting), A's grant names B, and A's release wakes B in
/// its own call: no lua/wake.lua, a push by the script, and B gets it.
#[test]
fn a_release_wakes_the_next_in_line_with_no_wake_script() {
    let r = Redis::start();
    let mut l = r.locker();
    let h = l.acquire("k", &req(30_000), None, &mut |_| {}).unwrap();
    let (a_granted, a_got) = mpsc::channel();
    let (a_go, a_wait) = mpsc::channel();
    let cancel = Arc::new(Cancel::new());
    let a = waiter(
        &r,
        "k",
        Wait::Forever,
        cancel.clone(),
        a_granted,
        Some(a_wait),
    );
    r.await_waiters("k", 1);
    let (b_granted, b_got) = mpsc::channel();
    let b = waiter(&r, "k", Wait::Forever, cancel, b_granted, None);
    r.await_waiters("k", 2);
    l.release("k", &h.token).unwrap();
    a_got
        .recv_timeout(Duration::from_secs(10))
        .expect("A got it");
    let monitor = Monitor::start(&r);
    let released = Instant::now();
    a_go.send(()).unwrap();
    let b_at = b_got
        .recv_timeout(Duration::from_secs(10))
        .expect("B got it");
    a.join().unwrap().unwrap();
    b.join().unwrap().unwrap();
    let lines = monitor.stop(&r);
    assert!(
        calls(&lines, "release.lua") >= 2,
        "{}",
        script_calls(&lines)
    );
    assert_eq!(calls(&lines, "wake.lua"), 0, "{}", script_calls(&lines));
    let pushed = lines
        .iter()
        .filter(|l| l.contains(" lua] \"RPUSH\"") && l.contains("}:w:"))
        .count();
    assert_eq!(
        pushed,
        1,
        "the release pushed B's wake-up itself:\n{}",
        script_calls(&lines)
    );
    // Woken, not found at a heartbeat (5 s).
    let took = b_at - released;
    assert!(
        took < Duration::from_secs(3),
        "B got it {took:?} after A's release"
    );
    r.assert_nothing_held(&[]);
}

/// A's grant names B, then C behind it; both give up before A releases,
/// and D, next now, is woken at A's release all the same (by lua/wake.lua:
/// the stale hints wake nobody), well before its heartbeat would find it.
#[test]
fn a_stale_hint_still_wakes_the_waiter_next_now() {
    let r = Redis::start();
    let mut l = r.locker();
    let h = l.acquire("k", &req(30_000), None, &mut |_| {}).unwrap();
    let (a_granted, a_got) = mpsc::channel();
    let (a_go, a_wait) = mpsc::channel();
    let forever = Arc::new(Cancel::new());
    let a = waiter(
        &r,
        "k",
        Wait::Forever,
        forever.clone(),
        a_granted,
        Some(a_wait),
    );
    r.await_waiters("k", 1);
    let quitters: Vec<_> = (2..=3)
        .map(|n| {
            let cancel = Arc::new(Cancel::new());
            let (tx, _rx) = mpsc::channel();
            let t = waiter(&r, "k", Wait::Forever, cancel.clone(), tx, None);
            r.await_waiters("k", n);
            (cancel, t)
        })
        .collect();
    let (d_granted, d_got) = mpsc::channel();
    let d = waiter(&r, "k", Wait::Forever, forever, d_granted, None);
    r.await_waiters("k", 4);
    l.release("k", &h.token).unwrap();
    a_got
        .recv_timeout(Duration::from_secs(10))
        .expect("A got it");
    for (cancel, t) in quitters {
        cancel.cancel(libc::SIGTERM);
        assert!(matches!(t.join().unwrap(), Err(Error::Interrupted(_))));
    }
    r.await_waiters("k", 1);
    let monitor = Monitor::start(&r);
    let released = Instant::now();
    a_go.send(()).unwrap();
    let d_at = d_got
        .recv_timeout(Duration::from_secs(10))
        .expect("D got it");
    a.join().unwrap().unwrap();
    d.join().unwrap().unwrap();
    let took = d_at - released;
    let lines = monitor.stop(&r);
    assert_eq!(calls(&lines, "wake.lua"), 1, "{}", script_calls(&lines));
    assert!(
        took < Duration::from_secs(3),
        "D got it {took:?} after A's release"
    );
    r.assert_nothing_held(&[]);
}

/// Three `rlock exec` queue behind a holder: only the holder's release
/// (its grant found nobody waiting) sends lua/wake.lua; each exec's grant
/// names the next, whose wake-up its release pushes.
#[test]
fn execs_in_line_hand_over_without_wake_scripts() {
    let r = Redis::start();
    let h = rlock(&r)
        .args(["acquire", "--ttl", "30s", "k"])
        .run()
        .ok()
        .token();
    let order = tmp_dir("handoff", "execs").join("order");
    let execs: Vec<_> = (1..=3)
        .map(|n| {
            let child = rlock(&r)
                .args(["exec", "k", "--", "sh", "-c"])
                .args([format!("echo {n} >> {}", order.display())])
                .spawn();
            r.await_waiters("k", n);
            child
        })
        .collect();
    let monitor = Monitor::start(&r);
    rlock(&r).args(["release", "k", "--token", &h]).run().ok();
    for (n, child) in execs.into_iter().enumerate() {
        finish(child, &format!("exec {}", n + 1)).ok();
    }
    let lines = monitor.stop(&r);
    assert_eq!(read(&order), "1\n2\n3\n");
    assert!(
        calls(&lines, "release.lua") >= 4,
        "{}",
        script_calls(&lines)
    );
    assert_eq!(calls(&lines, "wake.lua"), 1, "{}", script_calls(&lines));
    r.assert_nothing_held(&[]);
}

/// lua/acquire.lua and lua/release.lua run by hand, on tokens the test
/// names: the hints a grant gives, and what a release does with them.
struct ByHand<'r> {
    r: &'r Redis,
    key: &'static str,
    n: Mutex<u32>,
}

impl ByHand<'_> {
    fn keys(&self, tok: &str) -> Vec<String> {
        let b = self.r.key(self.key);
        let mut n = self.n.lock().unwrap();
        *n += 1;
        let mut keys: Vec<String> = ["", ":h", ":q", ":qa", ":fence", ":qw", ":log", ":n"]
            .iter()
            .map(|s| format!("{b}{s}"))
            .collect();
        keys.push(self.wake(tok));
        keys.push(format!("{b}:r:req{n}"));
        keys
    }

    fn wake(&self, tok: &str) -> String {
        format!("{}:w:{tok}", self.r.key(self.key))
    }

    fn eval(&self, file: &str, keys: &[String], args: &[&str]) -> Vec<String> {
        let reply: Vec<Value> = redis::cmd("EVAL")
            .arg(lua_script(file))
            .arg(keys.len())
            .arg(keys)
            .arg(args)
            .query(&mut self.r.conn())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        reply
            .into_iter()
            .map(|v| match v {
                Value::Int(n) => n.to_string(),
                v => redis::from_redis_value(v).unwrap(),
            })
            .collect()
    }

    /// Acquire (queueing when busy) as `tok`: the reply.
    fn acquire(&self, tok: &str) -> Vec<String> {
        let keys = self.keys(tok);
        let id = keys[9].clone();
        let args = [
            tok,
            "30000",
            "1",
            "{}",
            "1",
            "15000",
            "0",
            "x",
            &id,
            "0",
            "0",
            "20000",
            "0",
            "0",
            "0",
            "",
            "0",
            "200",
            "604800000",
        ];
        self.eval("acquire.lua", &keys, &args)
    }

    /// Release `tok` (every hold and its place with `all`), the grant's
    /// hints `next` and `scout` ("": none): the reply.
    fn release(&self, tok: &str, all: bool, next: &str, scout: &str) -> Vec<String> {
        let mut keys = self.keys(tok);
        let id = keys[9].clone();
        keys.push(format!("{}:b", self.r.key(self.key)));
        for t in [next, scout].into_iter().filter(|t| !t.is_empty()) {
            keys.push(self.wake(t));
        }
        let all = if all { "1" } else { "0" };
        let mut args = vec![tok, all, &id, "0", "0", "20000", "", "", "", "0"];
        // The hints' arguments go only with their keys (ops.rs).
        if !next.is_empty() {
            args.extend(["10000", next, scout]);
        }
        args.extend(["200", "604800000"]);
        self.eval("release.lua", &keys, &args)
    }

    fn list(&self, tok: &str) -> (Vec<String>, i64) {
        let k = self.wake(tok);
        (
            self.r.cmd(&["LRANGE", &k, "0", "-1"]),
            self.r.cmd(&["PTTL", &k]),
        )
    }
}

#[test]
fn a_release_wakes_only_hinted_waiters_that_to_wake_names_and_lists_rlock_wrote() {
    let r = Redis::shared();
    let s = ByHand {
        r: &r,
        key: "hint",
        n: Mutex::new(0),
    };
    let granted = |reply: &[String]| reply[0] == "1";
    assert_eq!(s.acquire("t").len(), 3, "the fast path names nobody");
    for w in ["a", "b", "c", "d"] {
        assert_eq!(s.acquire(w)[0], "0");
    }
    // Without hints: the tokens to wake, for the client (wake.lua).
    assert_eq!(s.release("t", false, "", ""), ["0", "a", "~b"]);
    // A grant while others wait ends with the next in line and the scout.
    let a = s.acquire("a");
    assert!(granted(&a));
    assert_eq!(a[3..], ["^b", "^~c"]);
    // Both named by to_wake: pushed by the release itself, '1' and 's',
    // each list expiring; the answer names nobody.
    assert_eq!(s.release("a", false, "b", "c"), ["0"]);
    let (b_list, b_ttl) = s.list("b");
    let (c_list, c_ttl) = s.list("c");
    assert_eq!(
        (b_list, c_list),
        (vec!["1".to_string()], vec!["s".to_string()])
    );
    assert!(b_ttl > 0 && b_ttl <= 10_000 && c_ttl > 0 && c_ttl <= 10_000);
    // A list there without a TTL is not rlock's: left alone. The hinted
    // token is still left out of the answer (nothing more to do for it).
    let b = s.acquire("b");
    assert_eq!(b[3..], ["^c", "^~d"]);
    let theirs = s.wake("c");
    let _: () = r.cmd(&["DEL", &theirs]);
    let _: () = r.cmd(&["RPUSH", &theirs, "theirs"]);
    assert_eq!(s.release("b", false, "c", "d"), ["0"]);
    assert_eq!(s.list("c"), (vec!["theirs".to_string()], -1));
    assert_eq!(s.list("d").0, ["s"]);
    // A key of another type (with a TTL): the push is refused, the
    // release is done all the same.
    let _: () = r.cmd(&["DEL", &theirs]);
    assert!(granted(&s.acquire("c")));
    assert_eq!(s.acquire("e")[0], "0");
    let other = s.wake("d");
    let _: () = r.cmd(&["SET", &other, "x", "PX", "60000"]);
    assert_eq!(s.release("c", false, "d", "e"), ["0"]);
    assert_eq!(r.cmd::<String>(&["GET", &other]), "x");
    assert_eq!(s.list("e").0, ["s"]);
    // Stale: the hinted waiter left; the one next now goes to the client.
    let _: () = r.cmd(&["DEL", &other]);
    let d = s.acquire("d");
    assert_eq!(d[3..], ["^e"]);
    s.release("e", true, "", "");
    assert_eq!(s.acquire("f")[0], "0");
    assert_eq!(s.release("d", false, "e", ""), ["0", "f"]);
    assert!(s.list("e").0.is_empty());
    // Sent again (a resend after a lost reply): not held, and f, still
    // queued with its claim, is named again; hinted, it is pushed again.
    assert_eq!(s.release("d", false, "f", ""), ["-1"]);
    assert_eq!(s.list("f").0, ["1"]);
    assert_eq!(s.release("f", true, "", ""), ["-1"]);
    r.assert_nothing_held(&[]);
}
