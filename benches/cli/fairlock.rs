//! Redisson's fair lock (RedissonFairLock) as a reference cost for
//! section 10: its lock and unlock scripts, rewritten here in Lua of our
//! own that runs the same Redis commands in the same order, sent with the
//! keys and arguments Redisson passes.
//!
//! Followed: redisson/redisson, `redisson/src/main/java/org/redisson/
//! RedissonFairLock.java` as of commit a5077398eb87 (the file's last
//! change in the repository at 66863978b4a9, after Redisson 4.7.0):
//! `tryLockInnerAsync` with `EVAL_LONG` (what `lock()` and `tryLock(wait,
//! lease, unit)` send) and `unlockInnerAsync`. On one server Redisson
//! sends them as plain scripts (`syncedEval` adds WAIT only with
//! replicas); after the unlock script it sends `DEL` of the unlock latch
//! (RedissonBaseLock.unlockInnerAsync), a third command per cycle, which
//! the bench leaves out (see `FairLock::cycle`).
//!
//! An uncontended cycle runs 8 commands in the lock script (LINDEX of the
//! queue, EXISTS of the lock, EXISTS of the queue, LPOP, ZREM, ZRANGE of
//! the timeouts, HSET, PEXPIRE) and 8 in the unlock script (GET of the
//! latch, LINDEX, EXISTS, HEXISTS, HINCRBY, DEL, SET of the latch PX,
//! LINDEX): no history, no fence, no index, no server clock (the client's
//! time is an argument).

/// KEYS: lock hash, thread queue (list), timeout zset.
/// ARGV: lease ms, lock name (`<uuid>:<thread id>`), thread wait ms,
/// client time ms. Returns nil when taken, else the ms to wait.
pub(crate) const LOCK: &str = r"
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local lease, me, wait, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
-- drop waiters at the head whose turn timed out
while true do
  local head = redis.call('lindex', queue, 0)
  if head == false then break end
  local t = redis.call('zscore', timeouts, head)
  if t == false or tonumber(t) > now then break end
  redis.call('zrem', timeouts, head)
  redis.call('lpop', queue)
end
-- free, and nobody or this thread first in line: take it
if redis.call('exists', lock) == 0
    and (redis.call('exists', queue) == 0 or redis.call('lindex', queue, 0) == me) then
  redis.call('lpop', queue)
  redis.call('zrem', timeouts, me)
  local rest = redis.call('zrange', timeouts, 0, -1)
  for i = 1, #rest do redis.call('zincrby', timeouts, -wait, rest[i]) end
  redis.call('hset', lock, me, 1)
  redis.call('pexpire', lock, lease)
  return nil
end
-- re-entry
if redis.call('hexists', lock, me) == 1 then
  redis.call('hincrby', lock, me, 1)
  redis.call('pexpire', lock, lease)
  return nil
end
-- queued already: the lock's time left
if redis.call('zscore', timeouts, me) ~= false then
  return math.max(0, redis.call('pttl', lock))
end
-- join the queue behind the last waiter (or the holder)
local last = redis.call('lindex', queue, -1)
local ttl
if last ~= false and last ~= me and redis.call('zscore', timeouts, last) ~= false then
  ttl = tonumber(redis.call('zscore', timeouts, last)) - now
else
  ttl = redis.call('pttl', lock)
end
if redis.call('zadd', timeouts, ttl + wait + now, me) == 1 then
  redis.call('rpush', queue, me)
end
return ttl
";

/// KEYS: lock hash, thread queue, timeout zset, channel prefix, unlock
/// latch (`redisson_unlock_latch:{name}:<request id>`).
/// ARGV: unlock message, lease ms, lock name, client time ms, publish
/// command, latch ms. Returns 1 released, 0 still held (re-entered), nil
/// not held; a resend finds the latch.
pub(crate) const UNLOCK: &str = r"
local lock, queue, timeouts, channel, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local msg, lease, me, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local seen = redis.call('get', latch)
if seen ~= false then return tonumber(seen) end
while true do
  local head = redis.call('lindex', queue, 0)
  if head == false then break end
  local t = redis.call('zscore', timeouts, head)
  if t == false or tonumber(t) > now then break end
  redis.call('zrem', timeouts, head)
  redis.call('lpop', queue)
end
local function wake_next()
  local nxt = redis.call('lindex', queue, 0)
  if nxt ~= false then redis.call(ARGV[5], channel .. ':' .. nxt, msg) end
end
if redis.call('exists', lock) == 0 then
  wake_next()
  redis.call('set', latch, 1, 'px', ARGV[6])
  return 1
end
if redis.call('hexists', lock, me) == 0 then return nil end
if redis.call('hincrby', lock, me, -1) > 0 then
  redis.call('pexpire', lock, lease)
  redis.call('set', latch, 0, 'px', ARGV[6])
  return 0
end
redis.call('del', lock)
redis.call('set', latch, 1, 'px', ARGV[6])
wake_next()
return 1
";

/// One client's view of a fair lock named `name`: the key names Redisson
/// derives from it (`prefixName`) and its thread's lock name.
pub(crate) struct FairLock {
    lock: String,
    queue: String,
    timeouts: String,
    channel: String,
    latch_prefix: String,
    thread: String,
    lock_sha: String,
    unlock_sha: String,
    /// Unlocks sent: each gets a request id (latch) of its own, as in
    /// Redisson, since a latch found (a resend) makes the unlock a no-op.
    unlocks: std::cell::Cell<u64>,
}

/// Redisson's `lock()` default lease (the watchdog's 30 s) and thread wait
/// (5 minutes), and the latch's life: (timeout 3 s + retry delay) x
/// retry attempts with the default configuration, about 18 s.
const LEASE_MS: u64 = 30_000;
const THREAD_WAIT_MS: u64 = 300_000;
const LATCH_MS: u64 = 18_000;

impl FairLock {
    pub(crate) fn new(conn: &mut redis::Connection, name: &str) -> Self {
        let load = crate::server::script_load;
        Self {
            lock: name.to_string(),
            queue: format!("redisson_lock_queue:{{{name}}}"),
            timeouts: format!("redisson_lock_timeout:{{{name}}}"),
            channel: format!("redisson_lock__channel:{{{name}}}"),
            latch_prefix: format!("redisson_unlock_latch:{{{name}}}:"),
            thread: "5c3ad4a0-6bd1-4b87-9f36-3b3f7a1e2c41:1".to_string(),
            lock_sha: load(conn, LOCK),
            unlock_sha: load(conn, UNLOCK),
            unlocks: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn lock_sha(&self) -> &str {
        &self.lock_sha
    }

    pub(crate) fn unlock_sha(&self) -> &str {
        &self.unlock_sha
    }

    /// Client time in ms, as Redisson's `System.currentTimeMillis()`.
    fn now_ms() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    }

    /// `lock()` then `unlock()` of a free lock, as Redisson sends them,
    /// but for the latch's DEL after the
    /// unlock: the cycle is compared by its two scripts alone, the
    /// stricter reference (the latch expires by its PX).
    pub(crate) fn cycle(&self, conn: &mut redis::Connection) {
        let got: Option<i64> = redis::cmd("EVALSHA")
            .arg(&self.lock_sha)
            .arg(3)
            .arg(&self.lock)
            .arg(&self.queue)
            .arg(&self.timeouts)
            .arg(LEASE_MS)
            .arg(&self.thread)
            .arg(THREAD_WAIT_MS)
            .arg(Self::now_ms().to_string())
            .query(conn)
            .expect("FairLock lock");
        assert_eq!(got, None, "the fair lock was free");
        let n = self.unlocks.get() + 1;
        self.unlocks.set(n);
        let latch = format!("{}{n:032x}", self.latch_prefix);
        let freed: Option<i64> = redis::cmd("EVALSHA")
            .arg(&self.unlock_sha)
            .arg(5)
            .arg(&self.lock)
            .arg(&self.queue)
            .arg(&self.timeouts)
            .arg(&self.channel)
            .arg(&latch)
            .arg(0)
            .arg(LEASE_MS)
            .arg(&self.thread)
            .arg(Self::now_ms().to_string())
            .arg("publish")
            .arg(LATCH_MS)
            .query(conn)
            .expect("FairLock unlock");
        assert_eq!(freed, Some(1), "the fair lock was released");
    }
}
