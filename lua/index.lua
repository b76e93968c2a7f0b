-- index.lua: note a lock in use in its shard of the index of locks in use
-- (`rlock list` reads the index instead of scanning the keyspace; see
-- docs/internals.md, "The index of locks in use").
--
-- KEYS[1] the shard: P{i<n>}:index, a ZSET lock name -> "keep until"
--         (server ms). Not in the lock's slot (src/lock/keys.rs,
--         `index_key`), hence a script of its own, sent right after the
--         lock's script on the same connection.
-- ARGV[1] the lock's name (as given, without the prefix)
-- KEYS[2] the same shard's list of locks with history: P{i<n>}:known, a
--         ZSET lock name -> "history kept until" (server ms), in the
--         shard's slot. `rlock metrics` and `rlock history --all` read it
--         (every lock whose counters may still exist, held or idle).
-- ARGV[2] how long from now the entry must last (ms): the lease or the
--         waiter lease that touched it, plus the refresh interval's cover
-- ARGV[3] the history's retention (ms; see common.lua): the known entry
--         lasts ARGV[2] + ARGV[3]. Every event of a hold or a wait falls
--         before its index deadline, and its history outlives the event
--         by the retention: so the known entry outlives the history of
--         every event written under this touch's cover (with the same
--         retention; an `expired` recorded later, when read, may outlive
--         it: docs/guide.md, "Metrics").
--
-- Every touch moves the entry's score strictly up (at least old + 1), so
-- a `list` that read the old score never removes an entry touched since
-- (index_drop.lua removes only an unchanged score). Entries past their
-- deadline leave here. The shard never expires before any deadline in
-- it: its expiry is moved only when this touch's deadline passes it, and
-- then an eighth of ARGV[2] beyond, so that steady touches of a shard
-- move it about once per eighth of the keep: a touch is 5 commands (the
-- 5th the known list's ZADD), with no read of the shard's last entry.
-- Returns the entry's new score.
--
-- Runs without the prelude: it touches no lock key. A shard key of
-- another type fails the ZADD before anything is written (and at
-- maxmemory the ZADD is refused, nothing written). ZADD GT: Redis 6.2+.
local shard, name = KEYS[1], ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ms = tonumber(ARGV[2])
local score = now + ms
-- GT moves an entry only up; CH counts an entry added or moved.
if redis.call('ZADD', shard, 'GT', 'CH', score, name) == 0 then
  -- Already at that deadline or later (a longer lease touched it this
  -- very millisecond): one above it.
  score = tonumber(redis.call('ZSCORE', shard, name)) + 1
  redis.call('ZADD', shard, score, name)
end
redis.call('ZREMRANGEBYSCORE', shard, '-inf', '(' .. now)
-- PTTL through pcall: to a user whose ACL lacks +pttl (it is optional,
-- see docs/deployments.md) the shard's expiry is moved every time, as
-- before. -1 (no expiry: not possible for a shard rlock wrote) too.
local known, keep = KEYS[2], tonumber(ARGV[3])
-- One more command per touch (GT: an entry is never moved down, a longer
-- retention's deadline stays).
if known then redis.call('ZADD', known, 'GT', score + keep, name) end
local ttl = redis.pcall('PTTL', shard)
if type(ttl) ~= 'number' or ttl < score - now then
  redis.call('PEXPIREAT', shard, score + math.floor(ms / 8))
  -- The known list is trimmed and its expiry moved only here (about once
  -- per eighth of ARGV[2] per shard), never shortened: it covers every
  -- deadline in it.
  if known then
    redis.call('ZREMRANGEBYSCORE', known, '-inf', '(' .. now)
    local want = score + keep + math.floor(ms / 8)
    local kttl = redis.pcall('PTTL', known)
    if type(kttl) ~= 'number' or kttl < want - now then
      redis.call('PEXPIREAT', known, want)
    end
  end
end
return score
