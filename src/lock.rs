//! The lock itself: acquire (with FIFO waiting), release, renew, status.
//!
//! Every operation is one Lua script (see lua/), so each is atomic and one
//! round trip; keys and tokens travel only as KEYS and ARGV.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use redis::{FromRedisValue, Script, Value};
use serde::{Deserialize, Serialize};

use crate::clock::BootTime;
use crate::conn::{Conn, Server};
use crate::duration::human;
use crate::{Error, Result};

/// One server-side operation: its Lua source and SHA1, computed once.
pub(crate) struct Lua {
    code: &'static str,
    sha: String,
}

macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| {
            let code = concat!(
                include_str!("../lua/common.lua"),
                include_str!(concat!("../lua/", $file))
            );
            // Hashed at build time (build.rs); debug builds check it.
            let sha = env!(concat!("RLOCK_LUA_SHA_", $file));
            debug_assert_eq!(sha, Script::new(code).get_hash());
            Lua {
                code,
                sha: sha.to_string(),
            }
        })
    };
}

static ACQUIRE: LazyLock<Lua> = script!("acquire.lua");
static RELEASE: LazyLock<Lua> = script!("release.lua");
static RENEW: LazyLock<Lua> = script!("renew.lua");
static STATUS: LazyLock<Lua> = script!("status.lua");
static CHECK: LazyLock<Lua> = script!("check.lua");

/// How long a script call is sent again after a failure that leaves it
/// unknown whether it ran (a timeout, a dropped connection) or that says it
/// did not run yet (a refused connection, a cluster redirect, TRYAGAIN,
/// CLUSTERDOWN, LOADING, READONLY after a failover). Every script is
/// idempotent per request (see lua/acquire.lua, "Resends"), so sending
/// again is safe; release's tombstones outlive this window (10 s).
pub const RESEND_WINDOW: Duration = Duration::from_secs(5);
/// A wait with no deadline rides out this much Redis outage (a restart, a
/// failover) before it gives up; a wait with a deadline rides out any
/// outage until its deadline.
pub const OUTAGE_LIMIT: Duration = Duration::from_secs(30);

/// A waiter re-checks in with Redis at least this often, even if nothing
/// wakes it: about one command per second on average while idle.
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// A queued waiter that has not checked in for this long is presumed dead
/// and skipped (server clock). Shorter for leases shorter than this: a dead
/// waiter never blocks others for longer than its own TTL.
pub const WAITER_LEASE: Duration = Duration::from_secs(5);
/// Late grants in a row an acquire gives back before it gives up.
const MAX_FAILURES: u32 = 3;
/// A node that never resends (RedLock) replaces a connection idle for
/// longer than this before use: servers, proxies and NATs close idle
/// connections, and a command sent into a dead one would fail. Other nodes
/// keep their connection (no reconnect, no TLS handshake per renewal): a
/// dead one fails the call with an I/O error, and the call is resent on a
/// fresh one (see `eval`).
const IDLE_RECONNECT: Duration = Duration::from_secs(1);
/// Cap on any wait, so that deadlines never overflow.
const MAX_WAIT: Duration = crate::duration::MAX;
/// Shortest and longest lease TTL accepted.
pub const MIN_TTL: Duration = Duration::from_millis(50);
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest key name accepted, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// An owner token: a UUIDv4, 122 random bits. Its Debug output hides it so
/// it cannot end up in logs by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn generate() -> Token {
        Token(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    /// Parse a token given by a user (flag or RLOCK_TOKEN).
    pub fn parse(s: &str) -> Result<Token> {
        let u = uuid::Uuid::try_parse(s.trim()).map_err(|_| {
            Error::Usage("malformed token: expected a UUID as printed by `rlock acquire`".into())
        })?;
        Ok(Token(u.hyphenated().to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

/// Who holds a lock, as stored beside the grant (never the token).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HolderInfo {
    pub host: String,
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
}

impl HolderInfo {
    /// This process on this host, optionally running `cmd`.
    pub fn current(cmd: Option<String>) -> HolderInfo {
        HolderInfo {
            host: hostname(),
            pid: std::process::id(),
            cmd,
        }
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for buf.len() bytes; gethostname NUL-terminates
    // on success (and we cap at the buffer anyway).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// How long to wait for a busy lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Try once.
    No,
    /// Wait at most this long.
    For(Duration),
    /// Wait until granted (the default, like flock).
    Forever,
}

/// What kind of hold to ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// An exclusive lock, or a counting semaphore with `limit` > 1.
    Exclusive,
    /// A shared hold of a read-write lock.
    Read,
    /// The exclusive hold of a read-write lock.
    Write,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Mode::Exclusive => "x",
            Mode::Read => "r",
            Mode::Write => "w",
        }
    }
}

/// What to ask for.
#[derive(Clone, Debug)]
pub struct Request {
    pub ttl: Duration,
    pub mode: Mode,
    /// Holders allowed at once (1: exclusive lock). Only for
    /// [`Mode::Exclusive`]; read-write locks need 1.
    pub limit: u32,
    pub wait: Wait,
    /// Re-enter with this token if it holds the lock (a parent `rlock
    /// exec`, say); if it does not, acquire with a fresh token as usual.
    pub reenter: Option<Token>,
    pub info: HolderInfo,
    /// A new grant's lease lasts at least this long after the grant, even
    /// if it is released sooner (zero: no minimum).
    pub min_hold: Duration,
}

impl Request {
    /// Refuse what no server could grant: a TTL out of range, no slots, a
    /// read-write lock with slots.
    pub fn check(&self) -> Result<()> {
        check_ttl(self.ttl)?;
        if self.limit == 0 {
            return Err(Error::Usage("--limit must be at least 1".into()));
        }
        if self.limit != 1 && self.mode != Mode::Exclusive {
            return Err(Error::Usage("read-write locks take no --limit".into()));
        }
        if self.min_hold > MAX_TTL {
            return Err(Error::Usage(format!(
                "--min-hold {} is too long: at most {}",
                human(self.min_hold),
                human(MAX_TTL)
            )));
        }
        Ok(())
    }

    pub fn new(ttl: Duration) -> Request {
        Request {
            ttl,
            mode: Mode::Exclusive,
            limit: 1,
            wait: Wait::Forever,
            reenter: None,
            info: HolderInfo::current(None),
            min_hold: Duration::ZERO,
        }
    }
}

/// A granted lock.
#[derive(Debug)]
pub struct Lease {
    pub key: String,
    pub token: Token,
    /// Fencing value: strictly increases with every grant of this lock.
    pub fence: u64,
    /// Re-entry depth after this grant (1 for a fresh grant).
    pub count: u64,
    pub ttl: Duration,
    /// The lease is safe to rely on until this point (CLOCK_BOOTTIME, which
    /// keeps counting through a suspend): request sent + TTL − drift.
    pub valid_until: BootTime,
}

/// How long a waiter for a lease of `ttl` keeps its place in the queue
/// without checking in.
pub fn waiter_lease(ttl: Duration) -> Duration {
    WAITER_LEASE.min(ttl)
}

/// How often a waiter checks in: well within its waiter lease.
pub fn heartbeat(ttl: Duration) -> Duration {
    HEARTBEAT.min(waiter_lease(ttl) * 2 / 5)
}

/// 100 ms, 200 ms, ... up to 800 ms.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(50 << failures.clamp(1, 4))
}

/// Until when a lease of `ttl` asked for at `sent` is safe to rely on:
/// sent + TTL − drift, on CLOCK_BOOTTIME (see [`crate::clock`]).
pub fn valid_until(sent: BootTime, ttl: Duration) -> BootTime {
    sent + ttl.saturating_sub(drift(ttl))
}

/// A grant whose reply came after its lease's validity deadline, `took`
/// after the request was sent.
fn late_grant(key: &str, took: Duration, ttl: Duration) -> Error {
    let show = |d: Duration| humantime::format_duration(Duration::from_millis(ms(d) as u64));
    Error::Unavailable {
        context: format!(
            "acquire {key:?}: the grant arrived after its lease had expired \
             (Redis answered in {}, TTL {})",
            show(took),
            show(ttl)
        ),
        cause: redis::RedisError::from((redis::ErrorKind::Io, "stale grant")),
    }
}

/// Clock drift allowance for a lease of `ttl` (as in the RedLock paper:
/// 1% plus 2 ms for timer granularity).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The holder a waiter is waiting for.
#[derive(Clone, Debug)]
pub struct Busy {
    pub holder: Option<HolderInfo>,
    pub since_ms: u64,
    /// When the first lease of a holder or of another waiter runs out, if
    /// nobody renews it: the longest a waiter need sleep without a wake-up.
    pub expires_in: Duration,
    /// Place in the wait queue (0 = next in line).
    pub position: u64,
    pub holders: u64,
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.holder {
            Some(h) => {
                write!(f, "host {} pid {}", h.host, h.pid)?;
                if self.since_ms > 0 {
                    write!(f, " since {}", format_ms(self.since_ms))?;
                }
                if self.holders > 1 {
                    write!(f, " and {} more", self.holders - 1)?;
                }
                Ok(())
            }
            None => write!(f, "waiters queued ahead"),
        }
    }
}

/// Server-clock milliseconds as an RFC 3339 UTC time.
pub fn format_ms(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// A token's hold, as `check` sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Held {
    /// Lease time left, by the server's clock.
    #[serde(rename = "ttl_ms", serialize_with = "as_ms")]
    pub ttl: Duration,
    pub fence: u64,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// What a release did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// The lock is free (for this token).
    Released,
    /// Re-entered holds remain; the lock is still held.
    StillHeld(u64),
    /// Nobody held it: already released, or expired. Harmless.
    NotHeld,
}

/// A lock's state.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub key: String,
    /// "exclusive", "semaphore" or "rw"; "" when nobody holds or waits.
    pub kind: String,
    pub held: bool,
    /// Slots of an exclusive lock or semaphore (1 = exclusive); 0 for a
    /// read-write lock, and when nobody holds or waits.
    pub limit: u64,
    /// Last fencing value granted (0: never granted).
    pub fence: u64,
    pub waiters: u64,
    /// Writers among the waiters (read-write locks).
    pub waiting_writers: u64,
    pub holders: Vec<HolderStatus>,
}

#[derive(Clone, Debug, Serialize)]
pub struct HolderStatus {
    /// "exclusive", "read" or "write".
    pub mode: String,
    pub host: String,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
    /// RFC 3339, server clock.
    pub since: String,
    pub since_ms: u64,
    pub ttl_ms: u64,
    pub count: u64,
    pub fence: u64,
}

/// Lets another thread (a signal handler thread) stop a waiting acquire at
/// once: it sets a flag and pushes to the waiter's wake-up list, so the
/// blocked BLPOP returns and the waiter leaves the queue itself.
#[derive(Default)]
pub struct Cancel {
    flag: AtomicBool,
    signal: AtomicI32,
    target: Mutex<Option<(Server, String)>>,
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Ask the waiting acquire to stop; `signal` is reported in the error.
    pub fn cancel(&self, signal: i32) {
        self.signal.store(signal, Ordering::SeqCst);
        self.flag.store(true, Ordering::SeqCst);
        let target = self
            .target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some((server, key)) = target
            && let Ok(mut c) = server.connect()
        {
            let _: redis::RedisResult<()> =
                redis::cmd("RPUSH").arg(&key).arg("cancel").query(&mut c);
            let _: redis::RedisResult<()> =
                redis::cmd("PEXPIRE").arg(&key).arg(10_000).query(&mut c);
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    pub fn interrupted(&self) -> Error {
        Error::Interrupted(self.signal.load(Ordering::SeqCst))
    }

    fn watch(&self, server: &Server, key: &str) {
        *self.target.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((server.clone(), key.to_string()));
    }
}

/// A lock name checked and placed under a prefix, with its Redis keys.
#[derive(Clone, Debug)]
pub struct LockName {
    name: String,
    base: String,
}

impl LockName {
    pub fn new(prefix: &str, name: &str) -> Result<LockName> {
        if name.is_empty() {
            return Err(Error::Usage("lock key must not be empty".into()));
        }
        if name.len() > MAX_KEY_LEN {
            return Err(Error::Usage(format!(
                "lock key is {} bytes; at most {MAX_KEY_LEN} allowed",
                name.len()
            )));
        }
        if name.chars().any(char::is_control) {
            return Err(Error::Usage(format!(
                "lock key {name:?} contains control characters"
            )));
        }
        if prefix.chars().any(char::is_control) {
            return Err(Error::Usage(format!(
                "prefix {prefix:?} contains control characters"
            )));
        }
        // The braces make {name} the hash tag of every key of this lock, so
        // all of them live in one Redis Cluster slot. If name itself holds a
        // '}', the tag ends there, which is still common to all the keys;
        // but an empty tag ("{}") means no tag, and keys in many slots.
        let base = format!("{prefix}{{{name}}}");
        let open = base.find('{').unwrap_or(0);
        if base[open..].starts_with("{}") {
            return Err(Error::Usage(format!(
                "lock key {name:?} under prefix {prefix:?} makes an empty hash tag \
                 (\"{{}}\"); do not start the key with '}}' or put \"{{}}\" in the prefix"
            )));
        }
        Ok(LockName {
            name: name.to_string(),
            base,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The main Redis key of the lock (a hash).
    pub fn redis_key(&self) -> &str {
        &self.base
    }

    fn keys(&self, token: Option<&Token>) -> Vec<String> {
        let b = &self.base;
        let mut keys = vec![
            b.clone(),
            format!("{b}:h"),
            format!("{b}:q"),
            format!("{b}:qa"),
            format!("{b}:fence"),
            format!("{b}:qw"),
        ];
        if let Some(t) = token {
            keys.push(self.wake_key(t));
        }
        keys
    }

    fn wake_key(&self, token: &Token) -> String {
        format!("{}:w:{}", self.base, token.as_str())
    }

    /// The keys of an acquire or release by `token` with request id `req`
    /// (the last one is the request's record, see lua/acquire.lua).
    fn request_keys(&self, token: &Token, req: &str) -> Vec<String> {
        let mut keys = self.keys(Some(token));
        keys.push(format!("{}:r:{req}", self.base));
        keys
    }
}

/// A new request id: the same for every resend of one call.
fn request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// May a call that failed this way be sent again? Yes if it may not have
/// run, or ran with its reply lost; no for refusals and bad data. READONLY
/// and MASTERDOWN pass with a failover only where a new connection follows
/// it (`failover`: Sentinel, Cluster); to one URL they mean a replica was
/// named, which no resend fixes.
pub(crate) fn resendable(err: &redis::RedisError, cluster: bool, failover: bool) -> bool {
    if err.is_io_error()
        || err.is_timeout()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
    {
        return true;
    }
    match err.code() {
        Some("TRYAGAIN" | "CLUSTERDOWN" | "LOADING") => true,
        Some("MASTERDOWN" | "READONLY") => failover,
        Some("MOVED" | "ASK") => cluster,
        _ => false,
    }
}

/// How long a request's record (lua/acquire.lua, "Resends") must outlive
/// its first send: longer than any resend of it can come, connect
/// included.
fn record_ms(timeout: Duration) -> String {
    ms((RESEND_WINDOW + timeout) * 2).to_string()
}

/// A Redis outage seen by a waiting acquire.
#[derive(Default)]
pub(crate) struct Outage {
    since: Option<Instant>,
    tries: u32,
}

impl Outage {
    /// After a failure: should the wait go on? Yes for a waiting acquire
    /// (not -n) while Redis is unreachable, until its deadline or, without
    /// one, for [`OUTAGE_LIMIT`]; it sleeps a backoff first.
    /// `passing`: whether this kind of failure can pass (see `resendable`).
    pub(crate) fn ride_out(
        &mut self,
        passing: bool,
        queue: bool,
        deadline: Option<Instant>,
    ) -> bool {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        self.tries += 1;
        let pause = backoff(self.tries);
        let go_on = queue
            && passing
            && match deadline {
                Some(d) => now + pause < d,
                None => now - since < OUTAGE_LIMIT,
            };
        if go_on {
            std::thread::sleep(pause);
        }
        go_on
    }

    /// Redis answered again.
    pub(crate) fn over(&mut self) {
        self.since = None;
        self.tries = 0;
    }
}

pub(crate) enum Attempt {
    Granted {
        fence: u64,
        count: u64,
    },
    /// Busy, and the lock's fencing counter on that server.
    Busy(Busy, u64),
    NotHeld,
}

/// One Redis server and a connection to it, with the lock operations.
pub(crate) struct Node {
    server: Server,
    conn: Option<Conn>,
    last_used: Instant,
    prefix: String,
    /// Upper bound on any call's resend window.
    resend_cap: Duration,
    /// The server has answered this process before: only then is a failure
    /// an outage worth riding out (a wrong or silent address fails at once).
    answered: bool,
}

impl Node {
    /// A node for `server`; it connects on first use.
    pub(crate) fn new(server: Server, prefix: &str) -> Node {
        Node {
            server,
            conn: None,
            last_used: Instant::now(),
            prefix: prefix.to_string(),
            resend_cap: RESEND_WINDOW,
            answered: false,
        }
    }

    /// Send each call once, never again after a failure: for RedLock, whose
    /// masters each get one short attempt and whose retries are its own.
    pub(crate) fn without_resends(mut self) -> Node {
        self.resend_cap = Duration::ZERO;
        self
    }

    /// Connect now, to report an unusable server at once.
    pub(crate) fn connect(&mut self) -> Result<()> {
        self.conn = Some(self.server.connect()?);
        // A cluster connection has read the slot map from a node.
        self.answered |= self.server.is_cluster();
        self.last_used = Instant::now();
        Ok(())
    }

    /// Has the server answered this node? (Until then a failed attempt is
    /// final, for a waiting acquire too.)
    pub(crate) fn answered(&self) -> bool {
        self.answered
    }

    /// Another node for the same server and prefix, with its own
    /// connection (opened on first use).
    pub(crate) fn detached(&self) -> Node {
        Node {
            server: self.server.clone(),
            conn: None,
            last_used: Instant::now(),
            prefix: self.prefix.clone(),
            resend_cap: self.resend_cap,
            answered: self.answered,
        }
    }

    /// Bound on connecting and on each reply (but blocking waits).
    pub(crate) fn timeout(&self) -> Duration {
        self.server.timeout
    }

    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.server.timeout = timeout;
        self.conn = None;
    }

    pub(crate) fn name(&self, key: &str) -> Result<LockName> {
        LockName::new(&self.prefix, key)
    }

    fn conn(&mut self) -> Result<&mut Conn> {
        if self.resend_cap.is_zero() && self.last_used.elapsed() > IDLE_RECONNECT {
            self.conn = None;
        }
        self.last_used = Instant::now();
        if self.conn.is_none() {
            self.conn = Some(self.server.connect()?);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// Note that a command just finished, so the connection is fresh.
    fn used(&mut self) {
        self.last_used = Instant::now();
    }

    fn fail(&mut self, err: redis::RedisError, what: String) -> Error {
        // After an I/O error or timeout the reply stream may be out of step:
        // never reuse that connection.
        if crate::error::is_unavailable(&err) {
            self.conn = None;
        }
        let what = if crate::error::is_unavailable(&err) {
            format!("{what} on Redis at {}", self.server.label)
        } else {
            what
        };
        Error::from_redis(err, &what)
    }

    /// Run `script` with EVALSHA, or EVAL when the server lacks it (a
    /// restart, a failover, SCRIPT FLUSH). Done by hand rather than with
    /// redis-rs' Script, whose fallback SCRIPT LOAD goes to every node of a
    /// cluster and fails when any is down; EVAL goes to the key's node only.
    ///
    /// A failure that leaves it unknown whether the script ran, or that
    /// says it could not run yet, is followed by a resend of the very same
    /// call (same token, same request id) on a new connection, with
    /// backoff, for up to `resend_for`: the scripts are idempotent per
    /// request, so a resend never counts twice.
    fn eval<T: FromRedisValue>(
        &mut self,
        script: &Lua,
        keys: &[String],
        args: &[&str],
        what: impl FnOnce() -> String,
        resend_for: Duration,
    ) -> Result<T> {
        let call = |verb: &str, body: &str| {
            let mut c = redis::cmd(verb);
            c.arg(body).arg(keys.len()).arg(keys).arg(args);
            c
        };
        let until = Instant::now() + resend_for.min(self.resend_cap);
        let (cluster, failover) = (self.server.is_cluster(), self.server.follows_failovers());
        // Sleep the next backoff and say to go on, if that stays in time.
        let pause = |tries: &mut u32| {
            let ok = Instant::now() + backoff(*tries + 1) < until;
            if ok {
                *tries += 1;
                std::thread::sleep(backoff(*tries));
            }
            ok
        };
        let mut tries = 0;
        loop {
            let conn = match self.conn() {
                Ok(conn) => conn,
                // Reconnecting during an outage: keep trying. A first
                // connect fails at once.
                Err(_) if tries > 0 && pause(&mut tries) => continue,
                Err(e) => return Err(e),
            };
            let mut res = call("EVALSHA", &script.sha).query(conn);
            if matches!(&res, Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
            {
                res = call("EVAL", script.code).query(conn);
            }
            self.used();
            // Only a real answer counts: a replica's READONLY does not.
            self.answered |= res.is_ok();
            match res {
                Ok(v) => return Ok(v),
                Err(e) if self.answered && resendable(&e, cluster, failover) => {
                    // Never reuse the connection: its replies may be out of
                    // step, and a cluster one has a stale slot map.
                    self.conn = None;
                    if !pause(&mut tries) {
                        return Err(self.fail(e, what()));
                    }
                }
                Err(e) => return Err(self.fail(e, what())),
            }
        }
    }

    /// One run of the acquire script. A new grant's fence is at least
    /// `floor` + 1 (RedLock; 0 for one Redis).
    // The script's own arguments, each with its reason; a struct would only
    // rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attempt(
        &mut self,
        lock: &LockName,
        token: &Token,
        req: &Request,
        queue: bool,
        reenter_only: bool,
        floor: u64,
        until: Option<Instant>,
    ) -> Result<Attempt> {
        let info = serde_json::to_string(&req.info).map_err(|e| Error::Protocol(e.to_string()))?;
        let ttl = ms(req.ttl).to_string();
        let limit = req.limit.to_string();
        let lease = ms(waiter_lease(req.ttl)).to_string();
        let flag = |b| if b { "1" } else { "0" };
        let id = request_id();
        let floor = floor.to_string();
        let min_hold = ms(req.min_hold).to_string();
        let record = record_ms(self.server.timeout);
        let resend_for = until.map_or(RESEND_WINDOW, |u| {
            u.saturating_duration_since(Instant::now())
                .min(RESEND_WINDOW)
        });
        let reply: Vec<Value> = self.eval(
            &ACQUIRE,
            &lock.request_keys(token, &id),
            &[
                token.as_str(),
                &ttl,
                &limit,
                &info,
                flag(queue),
                &lease,
                flag(reenter_only),
                req.mode.arg(),
                &id,
                &floor,
                &min_hold,
                &record,
            ],
            || format!("acquire {:?}", lock.name()),
            req.ttl.min(resend_for),
        )?;
        let int = |i: usize| -> Result<i64> {
            reply
                .get(i)
                .and_then(|v| i64::from_redis_value(v.clone()).ok())
                .ok_or_else(|| Error::Protocol(format!("acquire returned {reply:?}")))
        };
        match int(0)? {
            1 => {
                let (fence, count) = (int(1)? as u64, int(2)? as u64);
                if count == 1 && self.server.min_replicas > 0 {
                    self.confirm_replicas(lock, token)?;
                }
                Ok(Attempt::Granted { fence, count })
            }
            0 => {
                let info: String = reply
                    .get(3)
                    .and_then(|v| String::from_redis_value(v.clone()).ok())
                    .unwrap_or_default();
                let busy = Busy {
                    holder: serde_json::from_str(&info).ok(),
                    expires_in: Duration::from_millis(int(1)?.max(0) as u64),
                    position: int(2)?.max(0) as u64,
                    since_ms: int(4)?.max(0) as u64,
                    holders: int(5)?.max(0) as u64,
                };
                Ok(Attempt::Busy(busy, int(6)?.max(0) as u64))
            }
            -1 => Err(Error::Conflict(format!(
                "lock {:?} is in use with --limit {}, not {}; every holder must agree",
                lock.name(),
                int(1)?,
                req.limit
            ))),
            -2 => Ok(Attempt::NotHeld),
            -3 => {
                let kind = reply
                    .get(1)
                    .and_then(|v| String::from_redis_value(v.clone()).ok())
                    .unwrap_or_default();
                let (is, asked) = if kind == "rw" {
                    ("a read-write lock (rlock rw)", "an exclusive lock")
                } else {
                    ("an exclusive lock or semaphore", "a read-write lock")
                };
                Err(Error::Conflict(format!(
                    "lock {:?} is in use as {is}; it cannot be taken as {asked}",
                    lock.name()
                )))
            }
            -4 => Err(Error::Conflict(format!(
                "lock {:?}: this owner holds it for reading and cannot upgrade to writing \
                 (that would wait for itself); release the read lock first",
                lock.name()
            ))),
            _ => Err(Error::Protocol(format!("acquire returned {reply:?}"))),
        }
    }

    /// The server's `run_id` (INFO server): two URLs that reach one server
    /// give the same. `None` when the server does not say (an ACL without
    /// +info, a server that is no redis-server).
    pub(crate) fn run_id(&mut self) -> Result<Option<String>> {
        let res: redis::RedisResult<String> = redis::cmd("INFO").arg("server").query(self.conn()?);
        self.used();
        match res {
            Ok(info) => Ok(info
                .lines()
                .find_map(|l| l.strip_prefix("run_id:"))
                .map(|id| id.trim().to_string())
                .filter(|id| !id.is_empty())),
            Err(e) if e.code() == Some("NOPERM") || !crate::error::is_unavailable(&e) => Ok(None),
            Err(e) => Err(self.fail(e, "INFO server".into())),
        }
    }

    /// Replication is asynchronous: a failover can lose a fresh grant. With
    /// --min-replicas N, wait until N replicas have it, or give it back.
    fn confirm_replicas(&mut self, lock: &LockName, token: &Token) -> Result<()> {
        let res = self.wait_replicas(&format!("acquire {:?}", lock.name()), "grant");
        if res.is_err() {
            // Unconfirmed is as good as refused: give the grant back.
            let _ = self.abandon(lock, token);
        }
        res
    }

    /// WAIT until `min_replicas` replicas have every write this connection
    /// made (the grant or renewal just done), within 4/5 of the timeout.
    /// WAIT is not consensus: it says the replicas received the write, not
    /// that a failover will promote one of them, nor that they keep it.
    fn wait_replicas(&mut self, what: &str, write: &str) -> Result<()> {
        let want = self.server.min_replicas;
        let within = self.server.timeout * 4 / 5;
        let res: redis::RedisResult<i64> = redis::cmd("WAIT")
            .arg(want)
            .arg(within.as_millis() as u64)
            .query(self.conn()?);
        self.used();
        let acked = res.map_err(|e| self.fail(e, format!("{what}: WAIT")))?;
        if acked >= i64::from(want) {
            return Ok(());
        }
        Err(Error::Unavailable {
            context: format!(
                "{what}: the {write} reached {acked} of the {want} replicas \
                 --min-replicas asks for within {}",
                human(within)
            ),
            // Not an outage: nothing to ride out or resend for.
            cause: redis::RedisError::from((redis::ErrorKind::Client, "too few replicas")),
        })
    }

    /// Acquire `key`, waiting as `req.wait` says. `on_wait` is called once,
    /// when the first attempt finds the lock busy and we are going to wait.
    /// `cancel`, if given, lets another thread stop the wait at once.
    pub(crate) fn acquire(
        &mut self,
        key: &str,
        req: &Request,
        cancel: Option<&Cancel>,
        on_wait: &mut dyn FnMut(&Busy),
    ) -> Result<Lease> {
        let lock = self.name(key)?;
        let lease = |token: Token, fence, count, sent: BootTime| Lease {
            key: key.to_string(),
            token,
            fence,
            count,
            ttl: req.ttl,
            valid_until: valid_until(sent, req.ttl),
        };
        if let Some(token) = &req.reenter {
            let mut late = 0;
            loop {
                let sent = BootTime::now();
                let Attempt::Granted { fence, count } =
                    self.attempt(&lock, token, req, false, true, 0, None)?
                else {
                    break;
                };
                let lease = lease(token.clone(), fence, count, sent);
                if !lease.valid_until.passed() {
                    return Ok(lease);
                }
                // The re-entry's reply came after its validity deadline: the
                // same path to two holders as a late fresh grant (see the
                // loop below) -- the lease may have run out on the server,
                // and another client taken the lock, while the reply was on
                // its way. Give back the hold it added (release one) and
                // re-enter again; if that release fails, stop rather than
                // pile up holds nobody releases (they end with the TTL).
                let took = sent.elapsed();
                late += 1;
                let released = self.release(key, token, false, None);
                if late >= MAX_FAILURES || released.is_err() {
                    return Err(late_grant(key, took, req.ttl));
                }
                std::thread::sleep(backoff(late));
            }
        }
        let cancelled = || cancel.is_some_and(Cancel::is_cancelled);
        let started = Instant::now();
        let deadline = match req.wait {
            Wait::For(d) => Some(started.checked_add(d).unwrap_or(started + MAX_WAIT)),
            Wait::No | Wait::Forever => None,
        };
        let queue = !matches!(req.wait, Wait::No | Wait::For(Duration::ZERO));
        let heartbeat = heartbeat(req.ttl);
        let mut token = Token::generate();
        let mut announced = false;
        let mut failures = 0;
        let mut outage = Outage::default();
        loop {
            if cancelled() {
                return Err(self.give_up(&lock, &token, cancel));
            }
            let sent = BootTime::now();
            let busy = match self.attempt(&lock, &token, req, queue, false, 0, deadline) {
                Ok(Attempt::Granted { fence, count }) => {
                    if cancelled() {
                        return Err(self.give_up(&lock, &token, cancel));
                    }
                    let lease = lease(token, fence, count, sent);
                    if !lease.valid_until.passed() {
                        return Ok(lease);
                    }
                    // The grant arrived after its validity deadline (sent +
                    // TTL - drift): a stalled or paused Redis, a slow
                    // network, a starved client. The script may have run as
                    // soon as the request was sent, so the lease may already
                    // have ended on the server and a waiter taken the lock
                    // while the reply was on its way: using it would make
                    // two holders. Never use it: give it back, as after a
                    // timeout, and try again with a new token. The lock is
                    // not busy, the server was slow, so this counts as a
                    // transient failure: bounded retries, for -n too; a
                    // waiting acquire also stops at its deadline.
                    let took = sent.elapsed();
                    let _ = self.abandon(&lock, &lease.token);
                    failures += 1;
                    let out_of_time = queue && deadline.is_some_and(|d| Instant::now() >= d);
                    if failures >= MAX_FAILURES || out_of_time {
                        return Err(late_grant(key, took, req.ttl));
                    }
                    token = Token::generate();
                    std::thread::sleep(backoff(failures));
                    continue;
                }
                Ok(Attempt::Busy(b, _)) => b,
                Ok(Attempt::NotHeld) => {
                    return Err(Error::Protocol("acquire: unexpected re-entry reply".into()));
                }
                Err(e) => {
                    // Resent for a while already (see eval). Going on, the
                    // same token asks again: if one of the lost replies was
                    // a grant, the script hands that grant back (a fresh
                    // acquire's token holds nothing else), so no grant is
                    // left orphaned. Giving up, the token is given back.
                    if cancelled() {
                        return Err(self.give_up(&lock, &token, cancel));
                    }
                    if !self.answered || !outage.ride_out(self.passing(&e), queue, deadline) {
                        if matches!(e, Error::Unavailable { .. }) {
                            let _ = self.abandon(&lock, &token);
                        }
                        return Err(e);
                    }
                    continue;
                }
            };
            failures = 0;
            outage.over();
            let holder = busy.holder.as_ref().map(|_| busy.to_string());
            if !queue {
                return Err(Error::Busy {
                    key: key.to_string(),
                    holder,
                });
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                let _ = self.abandon(&lock, &token);
                return Err(Error::Timeout {
                    key: key.to_string(),
                    waited: now - started,
                    holder,
                });
            }
            if !announced {
                on_wait(&busy);
                announced = true;
            }
            // Tell a canceller where to poke us (only now: an uncontended
            // acquire never needs it), then look at the flag once more: the
            // script empties our wake-up list, which may have swallowed a
            // poke.
            if let Some(c) = cancel {
                c.watch(&self.server, &lock.wake_key(&token));
            }
            if cancelled() {
                return Err(self.give_up(&lock, &token, cancel));
            }
            // Sleep until woken through Redis, but never past the first
            // lease's end (a crashed holder sends no wake-up), the heartbeat
            // that keeps our place in the queue, or our own deadline.
            let mut nap = heartbeat;
            if busy.expires_in > Duration::ZERO {
                nap = nap.min(busy.expires_in + Duration::from_millis(1));
            }
            if let Some(d) = deadline {
                nap = nap.min(d - now);
            }
            if let Err(e) = self.nap(&lock.wake_key(&token), nap) {
                // A signal cuts a blocking read with a socket timeout short
                // (EINTR, never restarted), a moment before the signal
                // thread flags the cancellation; a dropped connection may
                // be a blip, or a failover. The connection is gone either
                // way: look again with a new one.
                if cancelled() {
                    return Err(self.give_up(&lock, &token, cancel));
                }
                if !self.answered || !outage.ride_out(self.passing(&e), queue, deadline) {
                    let _ = self.abandon(&lock, &token);
                    return Err(e);
                }
            }
        }
    }

    /// Is `e` an outage that may pass (see `resendable`)?
    fn passing(&self, e: &Error) -> bool {
        matches!(e, Error::Unavailable { cause, .. }
            if resendable(cause, self.server.is_cluster(), self.server.follows_failovers()))
    }

    fn give_up(&mut self, lock: &LockName, token: &Token, cancel: Option<&Cancel>) -> Error {
        let _ = self.abandon(lock, token);
        cancel
            .map(Cancel::interrupted)
            .unwrap_or(Error::Interrupted(0))
    }

    /// Block on our wake-up list for at most `nap`.
    fn nap(&mut self, wake_key: &str, nap: Duration) -> Result<()> {
        let nap = nap.max(Duration::from_millis(1));
        let timeout = self.server.timeout;
        let conn = self.conn()?;
        let _ = conn.set_read_timeout(Some(nap + timeout));
        let res: redis::RedisResult<Option<(String, String)>> = redis::cmd("BLPOP")
            .arg(wake_key)
            .arg(format!("{:.3}", nap.as_secs_f64()))
            .query(conn);
        let _ = conn.set_read_timeout(Some(timeout));
        self.used();
        res.map(drop)
            .map_err(|e| self.fail(e, "wait for the lock".into()))
    }

    /// Leave the wait queue and drop every hold of `token`, at once (a
    /// give-up: one timeout's worth of resends, no min-hold).
    pub(crate) fn abandon(&mut self, lock: &LockName, token: &Token) -> Result<i64> {
        let timeout = self.server.timeout;
        self.release_script(lock, token, true, None, timeout)
    }

    /// Release one hold of `token` on `key`, or with `all` every hold
    /// (and any place in the wait queue). With `min_hold` Some(d), the last
    /// hold's lease ends no sooner than d, or the min-hold given at the
    /// grant, after the grant; None releases at once whatever was asked.
    pub(crate) fn release(
        &mut self,
        key: &str,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
    ) -> Result<Released> {
        let lock = self.name(key)?;
        match self.release_script(&lock, token, all, min_hold, RESEND_WINDOW)? {
            0 => Ok(Released::Released),
            n if n > 0 => Ok(Released::StillHeld(n as u64)),
            -1 => Ok(Released::NotHeld),
            -2 => Err(Error::NotOwner { key: key.into() }),
            n => Err(Error::Protocol(format!("release returned {n}"))),
        }
    }

    /// One run of the release script (see lua/release.lua for the reply).
    fn release_script(
        &mut self,
        lock: &LockName,
        token: &Token,
        all: bool,
        min_hold: Option<Duration>,
        resend_for: Duration,
    ) -> Result<i64> {
        let id = request_id();
        let hold = ms(min_hold.unwrap_or_default()).to_string();
        self.eval(
            &RELEASE,
            &lock.request_keys(token, &id),
            &[
                token.as_str(),
                if all { "1" } else { "0" },
                &id,
                &hold,
                if min_hold.is_some() { "1" } else { "0" },
                &record_ms(self.server.timeout),
            ],
            || format!("release {:?}", lock.name()),
            resend_for,
        )
    }

    /// Extend the lease of `token` to `ttl` from now. Returns the point
    /// (CLOCK_BOOTTIME) until which the lease is safe to rely on.
    pub(crate) fn renew(&mut self, key: &str, token: &Token, ttl: Duration) -> Result<BootTime> {
        let lock = self.name(key)?;
        let sent = BootTime::now();
        let timeout = self.server.timeout;
        // Naturally idempotent (it sets the lease end to at least now +
        // TTL), and validity counts from the first send: resend freely.
        let n: i64 = self.eval(
            &RENEW,
            &lock.keys(None),
            &[token.as_str(), &ms(ttl).to_string()],
            || format!("renew {key:?}"),
            timeout,
        )?;
        match n {
            n if n > 0 => {
                // With --min-replicas a renewal counts only once replicas
                // have it, so a failover cannot roll it back unnoticed.
                if self.server.min_replicas > 0 {
                    self.wait_replicas(&format!("renew {key:?}"), "renewal")?;
                }
                let left = Duration::from_millis(n as u64);
                Ok(valid_until(sent, left))
            }
            -1 => Err(Error::Lost {
                key: key.into(),
                why: "this token holds it no more (it expired or was released)".into(),
            }),
            -2 => Err(Error::NotOwner { key: key.into() }),
            n => Err(Error::Protocol(format!("renew returned {n}"))),
        }
    }

    /// Does `token` hold `key` now? Its lease's time left and fence if so;
    /// [`Error::Lost`] if it holds nothing, [`Error::NotOwner`] if another
    /// owner holds the lock exclusively.
    pub(crate) fn check(&mut self, key: &str, token: &Token) -> Result<Held> {
        let lock = self.name(key)?;
        let reply: Vec<i64> = self.eval(
            &CHECK,
            &lock.keys(None),
            &[token.as_str()],
            || format!("check {key:?}"),
            RESEND_WINDOW,
        )?;
        match reply[..] {
            [ms, fence] if ms >= 0 => Ok(Held {
                ttl: Duration::from_millis(ms as u64),
                fence: fence as u64,
            }),
            [-1] => Err(Error::Lost {
                key: key.into(),
                why: "this token holds it no more (it expired or was released)".into(),
            }),
            [-2] => Err(Error::NotOwner { key: key.into() }),
            _ => Err(Error::Protocol(format!("check returned {reply:?}"))),
        }
    }

    /// Who holds `key`, how long they keep it, who waits.
    pub(crate) fn status(&mut self, key: &str) -> Result<Status> {
        let lock = self.name(key)?;
        let reply: Vec<Value> = self.eval(
            &STATUS,
            &lock.keys(None),
            &[],
            || format!("status {key:?}"),
            RESEND_WINDOW,
        )?;
        parse_status(key, reply)
    }

    /// Every live lock whose key matches the glob `pattern`.
    pub(crate) fn list(&mut self, pattern: &str) -> Result<Vec<Status>> {
        if pattern.chars().any(char::is_control) {
            return Err(Error::Usage(format!(
                "pattern {pattern:?} contains control characters"
            )));
        }
        let glob = format!("{}{{{pattern}}}", escape_glob(&self.prefix));
        let res = self.conn()?.scan(&glob, "hash");
        self.used();
        let keys = res.map_err(|e| self.fail(e, "list locks".into()))?;
        let start = self.prefix.len() + 1;
        let mut names: Vec<String> = keys
            .into_iter()
            .filter(|k| k.len() > start && k.ends_with('}'))
            .map(|k| k[start..k.len() - 1].to_string())
            .collect();
        names.sort();
        names.dedup();
        let mut out = Vec::new();
        for n in names {
            // Skip hashes that merely look like ours (an empty name, a
            // foreign key under the prefix).
            let s = match self.status(&n) {
                Ok(s) => s,
                Err(Error::Usage(_) | Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            };
            if s.held || s.waiters > 0 {
                out.push(s);
            }
        }
        Ok(out)
    }
}

fn parse_status(key: &str, reply: Vec<Value>) -> Result<Status> {
    let bad = || Error::Protocol(format!("status returned {reply:?}"));
    let num = |v: &Value| u64::from_redis_value(v.clone()).ok();
    let text = |v: Option<&Value>| {
        v.and_then(|v| String::from_redis_value(v.clone()).ok())
            .unwrap_or_default()
    };
    let head: Vec<u64> = reply.iter().skip(1).take(4).filter_map(num).collect();
    let [limit, fence, waiters, waiting_writers] = head[..] else {
        return Err(bad());
    };
    let kind = match (text(reply.first()).as_str(), limit) {
        ("rw", _) => "rw",
        ("x", 1) => "exclusive",
        ("x", _) => "semaphore",
        _ => "",
    };
    let mut holders = Vec::new();
    for h in &reply[5..] {
        let Value::Array(f) = h else {
            return Err(bad());
        };
        let info: HolderInfo = serde_json::from_str(&text(f.first())).unwrap_or_default();
        let n = |i: usize| f.get(i).and_then(num).unwrap_or(0);
        let mode = match text(f.get(5)).as_str() {
            "r" => "read",
            "w" => "write",
            _ => "exclusive",
        };
        holders.push(HolderStatus {
            mode: mode.to_string(),
            host: info.host,
            pid: info.pid,
            cmd: info.cmd,
            since: format_ms(n(1)),
            since_ms: n(1),
            ttl_ms: n(2),
            count: n(3),
            fence: n(4),
        });
    }
    Ok(Status {
        key: key.to_string(),
        kind: kind.to_string(),
        held: !holders.is_empty(),
        limit,
        fence,
        waiters,
        waiting_writers,
        holders,
    })
}

fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// Reject TTLs that are zero, too short to renew, or absurdly long.
pub fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::Usage(format!(
            "TTL {} is out of range: use {} to {}",
            human(ttl),
            human(MIN_TTL),
            human(MAX_TTL)
        )));
    }
    Ok(())
}

/// Human-readable status, one line per holder.
pub fn render_status(st: &Status) -> String {
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
        if st.waiting_writers > 0 {
            let _ = write!(out, " ({} writers)", st.waiting_writers);
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
        if h.count > 1 {
            let _ = write!(out, " held {}x", h.count);
        }
        if let Some(cmd) = &h.cmd {
            let _ = write!(out, " cmd {cmd}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_share_one_hash_tag() {
        let l = LockName::new("rlock:", "a}b").unwrap();
        let tok = Token::generate();
        for k in l.keys(Some(&tok)) {
            let open = k.find('{').unwrap();
            let close = open + k[open..].find('}').unwrap();
            assert_eq!(&k[open + 1..close], "a", "{k}");
        }
        assert!(LockName::new("rlock:", "").is_err());
        assert!(LockName::new("rlock:", "a\nb").is_err());
        assert!(LockName::new("rlock:", "}x").is_err());
        assert!(LockName::new("p{}:", "x").is_err());
        assert!(LockName::new("p{t}:", "x").is_ok());
        assert!(LockName::new("rlock:", &"x".repeat(MAX_KEY_LEN + 1)).is_err());
    }

    #[test]
    fn tokens_are_uuids_and_hidden_in_debug() {
        let t = Token::generate();
        assert_eq!(
            uuid::Uuid::parse_str(t.as_str()).unwrap().get_version_num(),
            4
        );
        assert_eq!(format!("{t:?}"), "Token(***)");
        assert!(Token::parse("nope").is_err());
        assert_eq!(Token::parse(t.as_str()).unwrap(), t);
    }

    #[test]
    fn ttl_bounds() {
        assert!(check_ttl(Duration::ZERO).is_err());
        assert!(check_ttl(Duration::from_secs(30)).is_ok());
        assert!(check_ttl(MAX_TTL + Duration::from_secs(1)).is_err());
        assert_eq!(
            check_ttl(Duration::from_micros(49_900))
                .unwrap_err()
                .to_string(),
            "TTL 49ms is out of range: use 50ms to 7days"
        );
    }

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
        let out = render_status(&st);
        assert!(out.contains(" ttl 29.5s fence 3"), "{out}");
    }

    #[test]
    fn glob_escaping() {
        assert_eq!(escape_glob("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
