//! The redis-server a test works on, its own or a namespace on the shared
//! one, with the helpers that look at its keys; library handles on it.

use std::ops::Deref;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::{eventually, kill, rlock};
use rlock_test_support as redis_server;

pub(super) static SEQ: AtomicUsize = AtomicUsize::new(0);

/// The redis-server a test works on: its own (`Redis::start`), killed when
/// the test drops it, or a namespace of its own (a key prefix) on the one
/// server this test process shares (`Redis::shared`). Derefs to the
/// process (`port`, `url()`, `socket()`, `conn()`).
pub struct Redis {
    server: Server,
    /// The key prefix of this test's locks: `rlock:` on a server of its
    /// own, a unique one on the shared server. `rlock(&r)` and
    /// `r.locker()` use it, and so do the helpers below.
    pub prefix: String,
}

enum Server {
    Own(redis_server::Redis),
    Shared(&'static redis_server::Redis),
}

impl Deref for Redis {
    type Target = redis_server::Redis;
    fn deref(&self) -> &redis_server::Redis {
        match &self.server {
            Server::Own(r) => r,
            Server::Shared(r) => r,
        }
    }
}

/// The server shared by the tests that neither stop, kill nor reconfigure
/// theirs, nor look at server-wide state; started by the first of them.
static SHARED: OnceLock<redis_server::Redis> = OnceLock::new();

/// Kill the shared server when the test process exits (a static is never
/// dropped).
extern "C" fn stop_shared() {
    if let Some(r) = SHARED.get() {
        kill(r.child.id(), libc::SIGKILL);
        let _ = std::fs::remove_dir_all(&r.dir);
    }
}

impl Redis {
    /// A redis-server of the test's own.
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// A redis-server of the test's own, with more arguments (see
    /// `redis_server::Redis::start_with`).
    pub fn start_with(extra: &[&str]) -> Redis {
        Redis {
            server: Server::Own(redis_server::Redis::start_with(extra)),
            prefix: "rlock:".into(),
        }
    }

    /// A namespace of the test's own on the shared server: a key prefix no
    /// other test uses. For tests that neither kill, stop nor reconfigure
    /// the server, nor depend on server-wide state (INFO, KEYS *, DBSIZE,
    /// raw keys outside the prefix).
    pub fn shared() -> Redis {
        let server = SHARED.get_or_init(|| {
            let r = redis_server::Redis::start();
            // SAFETY: registers a plain `extern "C" fn()` that captures
            // nothing; it runs once, at exit.
            unsafe { libc::atexit(stop_shared) };
            r
        });
        Redis {
            server: Server::Shared(server),
            prefix: format!("t{}:", SEQ.fetch_add(1, Ordering::SeqCst)),
        }
    }

    /// `redis://127.0.0.1:PORT` (also as `Redis::url`, for `map`).
    pub fn url(&self) -> String {
        (**self).url()
    }

    /// The process, to signal it (SIGSTOP, SIGKILL); only for a server of
    /// the test's own.
    #[track_caller]
    pub fn child_pid(&self) -> u32 {
        match &self.server {
            Server::Own(r) => r.child.id(),
            Server::Shared(_) => panic!("a test that signals its server needs Redis::start()"),
        }
    }

    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.conn())
            .unwrap_or_else(|e| panic!("redis {args:?}: {e}"))
    }

    /// Keys in the server (on the shared one: those under this test's
    /// prefix), sorted.
    pub fn keys(&self) -> Vec<String> {
        let pattern = match self.server {
            Server::Own(_) => "*".to_string(),
            Server::Shared(_) => format!("{}*", self.prefix),
        };
        let mut k: Vec<String> = self.cmd(&["KEYS", &pattern]);
        k.sort();
        k
    }

    /// The Redis key of lock `key`'s hash (`<prefix>{key}`); its other keys
    /// append a suffix (`:h`, `:q`, `:fence`, ...).
    pub fn key(&self, key: &str) -> String {
        format!("{}{{{key}}}", self.prefix)
    }

    /// A library handle on this server with this test's prefix.
    pub fn locker(&self) -> rlock::Locker {
        locker_with(&self.url(), &self.prefix)
    }

    /// `rlock status KEY --json`.
    #[track_caller]
    pub fn status_json(&self, key: &str) -> serde_json::Value {
        let out = rlock(self).args(["status", key, "--json"]).run().ok();
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// Whether lock `key` is held, by `rlock status`.
    #[track_caller]
    pub fn held(&self, key: &str) -> bool {
        self.status_json(key)["held"] == true
    }

    /// Wait (up to 10 s) until `n` waiters are queued for lock `key`.
    #[track_caller]
    pub fn await_waiters(&self, key: &str, n: u64) {
        eventually(
            Duration::from_secs(10),
            &format!("{n} waiter(s) queued for {key:?}"),
            || self.status_json(key)["waiting"] == n,
        );
    }

    /// Set lock `key`'s last fence well ahead of the server's clock, kept
    /// for an hour, and return it: the grants that follow then count up
    /// from it by one each, whatever their TTLs.
    pub fn fence_ahead(&self, key: &str) -> u64 {
        let t: Vec<String> = self.cmd(&["TIME"]);
        let now_ms = t[0].parse::<u64>().unwrap() * 1000;
        let f = now_ms + 10_000_000_000;
        let _: () = self.cmd(&[
            "SET",
            &format!("{}:fence", self.key(key)),
            &f.to_string(),
            "PX",
            "3600000",
        ]);
        f
    }

    /// Assert no lock state is left: only fencing counters (which never
    /// expire by design), the history and its counters (kept for their
    /// retention), request records (which must carry a TTL; they let
    /// a resent call answer as the first one did) and keys the test wrote
    /// itself may remain.
    #[track_caller]
    pub fn assert_nothing_held(&self, allowed: &[&str]) {
        // What may stay a little while: request records and wake-up lists
        // (seconds), the last fence (until its lease would have ended and
        // the server's clock has passed it). None of them for ever.
        let left: Vec<String> = self
            .keys()
            .into_iter()
            .filter(|k| !allowed.contains(&k.as_str()))
            .filter(|k| {
                // The index of locks in use keeps an entry for an hour
                // past its lease (`list` skips it once the lock is free).
                let fence = k.ends_with(":fence") || is_index_key(k);
                let passing = k.contains("}:r:") || k.contains("}:w:");
                // The history and its counters stay for their retention
                // (7 days by default) plus at most a 64th of it, up to 10
                // minutes (log_event's slack, lua/part/log.lua), never for
                // ever.
                let history = k.ends_with("}:log") || k.ends_with("}:n");
                // The list of locks with history, beside each index shard:
                // the retention plus the index's hour and its lease.
                let known = is_known_key(k);
                if fence || passing || history || known {
                    let ttl: i64 = self.cmd(&["PTTL", k]);
                    // -2: it expired between KEYS and PTTL (gone is fine);
                    // 0: it expires within the millisecond. -1 is no
                    // expiry.
                    if ttl == -2 {
                        return false;
                    }
                    assert!(ttl >= 0, "{k} has PTTL {ttl}: a key that never expires");
                    assert!(
                        fence || history || known || ttl <= 60_000,
                        "{k} has PTTL {ttl}"
                    );
                    assert!(
                        !known || ttl <= (7 * 24 + 3) * 3600 * 1000,
                        "{k} has PTTL {ttl}"
                    );
                    assert!(
                        !history || ttl <= 7 * 24 * 3600 * 1000 + 600_000,
                        "{k} has PTTL {ttl}"
                    );
                }
                !(fence || passing || history || known)
            })
            .collect();
        assert!(left.is_empty(), "lock state left in Redis: {left:?}");
    }
}

/// A shard of the index of locks in use (`<prefix>{i<n>}:index`).
pub fn is_index_key(k: &str) -> bool {
    k.ends_with(":index") && k.contains("{i")
}

/// A shard of the list of locks with history (`<prefix>{i<n>}:known`).
pub fn is_known_key(k: &str) -> bool {
    k.ends_with(":known") && k.contains("{i")
}

/// A direct connection bounded by a 1 s timeout, or None.
pub(super) fn quick_conn(port: u16) -> Option<redis::Connection> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(1))
        .ok()?;
    c.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    Some(c)
}

pub(super) fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> Option<T> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut quick_conn(port)?).ok()
}

/// A library handle on one server, default options, prefix `rlock:`.
pub fn locker(url: &str) -> rlock::Locker {
    locker_with(url, "rlock:")
}

/// A library handle on one server, default options, prefix `prefix`.
pub fn locker_with(url: &str, prefix: &str) -> rlock::Locker {
    let opts = rlock::ConnectOptions {
        urls: vec![url.to_string()],
        ..Default::default()
    };
    rlock::Locker::connect(&opts, prefix).unwrap()
}
