-- index.lua: note a lock in use in its shard of the index of locks in use
-- (`rlock list` reads the index instead of scanning the keyspace; see
-- docs/internals.md, "The index of locks in use").
--
-- KEYS[1] the shard: P{i<n>}:index, a ZSET lock name -> "keep until"
--         (server ms). Not in the lock's slot (src/lock/keys.rs,
--         `index_key`), hence a script of its own, sent right after the
--         lock's script on the same connection.
-- ARGV[1] the lock's name (as given, without the prefix)
-- ARGV[2] how long from now the entry must last (ms): the lease or the
--         waiter lease that touched it, plus the refresh interval's cover
--
-- Every touch moves the entry's score strictly up (at least old + 1), so
-- a `list` that read the old score never removes an entry touched since
-- (index_drop.lua removes only an unchanged score). Entries past their
-- deadline leave here; the shard expires with its latest deadline.
-- Returns the entry's new score.
--
-- Runs without the prelude: it touches no lock key. A shard key of
-- another type fails the ZSCORE before anything is written.
local shard, name = KEYS[1], ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = now + tonumber(ARGV[2])
local old = redis.call('ZSCORE', shard, name)
if old and tonumber(old) >= score then score = tonumber(old) + 1 end
redis.call('ZADD', shard, score, name)
redis.call('ZREMRANGEBYSCORE', shard, '-inf', '(' .. now)
local last = redis.call('ZRANGE', shard, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', shard, last[2])
return score
