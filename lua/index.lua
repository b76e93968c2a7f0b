-- index.lua: note a lock in use in its shard of the index of locks in use
-- (`rlock list` reads the index instead of scanning the keyspace; see
-- docs/internals.md, "The index of locks in use").
--
-- KEYS[1] the shard: P{i<n>}:index, a ZSET lock name -> "keep until"
--         (server ms). Not in the lock's slot (src/lock/keys.rs,
--         `index_key`), hence a script of its own on a Cluster, sent
--         right after the lock's script on the same connection.
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
-- The touch itself is index_touch (lua/part/touch.lua), which the acquire
-- script also runs where the shard can share its call (one server,
-- Sentinel, a RedLock master): then no index.lua follows it.
--
-- Runs without the prelude: it touches no lock key. A shard key of
-- another type fails the ZADD before anything is written (and at
-- maxmemory the ZADD is refused, nothing written). ZADD GT: Redis 6.2+.
--@touch
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return index_touch(redis.call, now, KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]),
  tonumber(ARGV[3]))
