-- part/touch.lua: note a lock in use in its shard of the index of locks in
-- use (docs/internals.md, "The index of locks in use"). Put in by build.rs
-- at a `--@touch` line: lua/index.lua, and acquire.lua where the shard
-- can share the acquire's call.
--
-- `call` is redis.call, or redis.pcall in a script whose own writes must
-- not fail on the index's account (a shard key of another type, which
-- index.lua's own call reports); `now` the server's clock (ms). `shard`
-- P{i<n>}:index, a ZSET lock name -> "keep until" (server ms); `known`
-- (nil: none) the same shard's list of locks with history, P{i<n>}:known,
-- a ZSET lock name -> "history kept until" (server ms); `ms` how long from
-- now the entry must last (the lease or the waiter lease that touched it,
-- plus the refresh interval's cover); `keep` the history's retention
-- (ms): the known entry lasts ms + keep. Every event of a hold or a wait
-- falls before its index deadline, and its history outlives the event by
-- the retention: so the known entry outlives the history of every event
-- written under this touch's cover (with the same retention; an
-- `expired` recorded later, when read, may outlive it: docs/guide.md,
-- "Metrics").
--
-- Every touch moves the entry's score strictly up (at least old + 1), so
-- a `list` that read the old score never removes an entry touched since
-- (index_drop.lua removes only an unchanged score). Entries past their
-- deadline leave here. The shard never expires before any deadline in
-- it: its expiry is moved only when this touch's deadline passes it, and
-- then an eighth of `ms` beyond, so that steady touches of a shard move
-- it about once per eighth of the keep: a touch is 4 commands (the 3rd
-- the known list's ZADD), with no read of the shard's last entry.
-- Returns the entry's new score. ZADD GT: Redis 6.2+. (Numbers go to
-- Redis as strings: lua/part/num.lua.)
--@num
local function index_touch(call, now, shard, known, name, ms, keep)
  local score = now + ms
  -- GT moves an entry only up; CH counts an entry added or moved.
  if call('ZADD', shard, 'GT', 'CH', int(score), name) == 0 then
    -- Already at that deadline or later (a longer lease touched it this
    -- very millisecond, or touches come faster than the clock): one
    -- above it, read and written by one command (INCR answers the score).
    score = tonumber(call('ZADD', shard, 'INCR', '1', name))
  end
  call('ZREMRANGEBYSCORE', shard, '-inf', '(' .. int(now))
  -- One more command per touch (GT: an entry is never moved down, a
  -- longer retention's deadline stays).
  if known then call('ZADD', known, 'GT', int(score + keep), name) end
  -- PTTL through pcall: to a user whose ACL lacks +pttl (it is optional,
  -- see docs/deployments.md) the shard's expiry is moved every time, as
  -- before. -1 (no expiry: not possible for a shard rlock wrote) too.
  local ttl = redis.pcall('PTTL', shard)
  if type(ttl) ~= 'number' or ttl < score - now then
    call('PEXPIREAT', shard, score + math.floor(ms / 8))
    -- The known list is trimmed and its expiry moved only here (about
    -- once per eighth of `ms` per shard), never shortened: it covers
    -- every deadline in it.
    if known then
      call('ZREMRANGEBYSCORE', known, '-inf', '(' .. now)
      local want = score + keep + math.floor(ms / 8)
      local kttl = redis.pcall('PTTL', known)
      if type(kttl) ~= 'number' or kttl < want - now then
        call('PEXPIREAT', known, want)
      end
    end
  end
  return score
end
