-- common.lua: prelude prepended (at compile time) to every other script.
--
-- One lock named K under prefix P is a handful of keys that all share the
-- hash tag {K}, so Redis Cluster can run every script on one node:
--
--   KEYS[1] P{K}        HASH    kind        -> 'x' (exclusive or semaphore)
--                                              or 'rw' (read-write lock)
--                               limit       -> N (kind x: slots; 1 = mutex)
--                               writer      -> token of the writer holding
--                                              (kind rw)
--                               c:<token>   -> re-entry count of that holder
--                               i:<token>   -> holder info (JSON from the client)
--                               s:<token>   -> held since (server ms)
--                               f:<token>   -> fencing value of that grant
--                               m:<token>   -> 'r' or 'w' (kind rw)
--                               u:<token>   -> min-hold: the lease lasts at
--                                              least until then (server ms)
--   KEYS[2] P{K}:h      ZSET    <token> -> lease expiry (server ms)
--   KEYS[3] P{K}:q      ZSET    <token> -> arrival order of a waiter (FIFO)
--   KEYS[4] P{K}:qa     ZSET    <token> -> waiter lease expiry (server ms)
--   KEYS[5] P{K}:fence  STRING  fencing counter; never expires, only grows
--   KEYS[6] P{K}:qw     ZSET    <token> -> arrival order, waiting writers only
--   KEYS[7] P{K}:w:<token> LIST one waiter's wake-up signal (BLPOP target)
--   KEYS[8] P{K}:r:<request> STRING what a release or a re-entry did (its
--                               answer), kept a little longer than the
--                               client may resend that call: see "Resends"
--                               in acquire.lua
--
-- Every holder, each reader included, has its own lease. Every expiry
-- decision uses the server's clock (TIME), never a client's. All keys but
-- the fence counter carry a PEXPIRE that covers the longest lease in them,
-- so a lock that everyone abandons disappears by itself.
local STATE, HOLDERS, QUEUE, ALIVE, FENCE, WRITERS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local WAKE_TTL_MS = 10000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Refuse to touch keys that hold someone else's data.
local function check_types()
  local want = {[STATE] = 'hash', [HOLDERS] = 'zset', [QUEUE] = 'zset',
    [ALIVE] = 'zset', [FENCE] = 'string', [WRITERS] = 'zset'}
  for k, t in pairs(want) do
    local got = redis.call('TYPE', k).ok
    if got ~= 'none' and got ~= t then
      return redis.error_reply('WRONGTYPE key ' .. k .. ' holds a ' .. got)
    end
  end
end

local function forget_holder(tok)
  redis.call('HDEL', STATE, 'c:' .. tok, 'i:' .. tok, 's:' .. tok, 'f:' .. tok, 'm:' .. tok,
    'u:' .. tok)
  redis.call('ZREM', HOLDERS, tok)
  if redis.call('HGET', STATE, 'writer') == tok then
    redis.call('HDEL', STATE, 'writer')
  end
end

-- A token that holds nothing gets -1 ("not held": released, or expired)
-- when the lock is shared (semaphore slots, readers), since other holders
-- say nothing about this token; -2 ("another owner") only when an
-- exclusive lock is held by someone else. So releasing twice is harmless
-- for every kind.
local function not_held_reply()
  if redis.call('ZCARD', HOLDERS) == 0 then return -1 end
  local kind = redis.call('HGET', STATE, 'kind')
  if kind == 'x' and tonumber(redis.call('HGET', STATE, 'limit')) == 1 then return -2 end
  if kind == 'rw' and redis.call('HEXISTS', STATE, 'writer') == 1 then return -2 end
  return -1
end

local function leave_queue(tok)
  redis.call('ZREM', QUEUE, tok)
  redis.call('ZREM', ALIVE, tok)
  redis.call('ZREM', WRITERS, tok)
end

-- Drop holders whose lease ran out and waiters that stopped calling in.
local function prune(now)
  for _, tok in ipairs(redis.call('ZRANGEBYSCORE', HOLDERS, '-inf', now)) do
    forget_holder(tok)
  end
  for _, tok in ipairs(redis.call('ZRANGEBYSCORE', ALIVE, '-inf', now)) do
    leave_queue(tok)
  end
end

-- The first waiting writer's arrival order, or nil.
local function first_writer()
  local w = redis.call('ZRANGE', WRITERS, 0, 0, 'WITHSCORES')
  if w[1] then return w[1], tonumber(w[2]) end
end

-- May `tok` (queue position `rank`, false if not queued) take the lock now?
local function may_enter(kind, mode, limit, tok, rank)
  local holders = redis.call('ZCARD', HOLDERS)
  if kind == 'x' then
    return (rank or redis.call('ZCARD', QUEUE)) < limit - holders
  end
  if mode == 'w' then
    return holders == 0 and (rank or redis.call('ZCARD', QUEUE)) == 0
  end
  -- A reader shares with readers, but not with a writer holding, nor with
  -- one waiting ahead of it: once a writer waits, new readers queue behind.
  if redis.call('HEXISTS', STATE, 'writer') == 1 then return false end
  local _, wseq = first_writer()
  if not wseq then return true end
  -- (rank is false, not nil, when ZRANK found nothing)
  return rank and tonumber(redis.call('ZSCORE', QUEUE, tok)) < wseq or false
end

local function poke(tok)
  local k = STATE .. ':w:' .. tok
  if redis.call('EXISTS', k) == 0 then
    redis.call('RPUSH', k, '1')
    redis.call('PEXPIRE', k, WAKE_TTL_MS)
  end
end

-- Signal the waiters at the head of the queue that may now take the lock:
-- up to the free slots (kind x), or the writer next in line, or every
-- reader queued ahead of the first waiting writer (kind rw).
local function wake()
  local kind = redis.call('HGET', STATE, 'kind')
  if kind == 'rw' then
    if redis.call('HEXISTS', STATE, 'writer') == 1 then return end
    local wtok, wseq = first_writer()
    if wtok and redis.call('ZRANGE', QUEUE, 0, 0)[1] == wtok then
      if redis.call('ZCARD', HOLDERS) == 0 then poke(wtok) end
      return
    end
    local upto = wseq and ('(' .. wseq) or '+inf'
    for _, tok in ipairs(redis.call('ZRANGEBYSCORE', QUEUE, '-inf', upto, 'LIMIT', 0, 1000)) do
      poke(tok)
    end
    return
  end
  local limit = tonumber(redis.call('HGET', STATE, 'limit'))
  if not limit then return end
  local free = limit - redis.call('ZCARD', HOLDERS)
  if free <= 0 then return end
  for _, tok in ipairs(redis.call('ZRANGE', QUEUE, 0, free - 1)) do
    poke(tok)
  end
end

-- Let the keys live exactly as long as the longest lease in them.
local function tidy(now)
  local last = 0
  local h = redis.call('ZRANGE', HOLDERS, -1, -1, 'WITHSCORES')
  if h[2] then last = tonumber(h[2]) end
  local a = redis.call('ZRANGE', ALIVE, -1, -1, 'WITHSCORES')
  if a[2] and tonumber(a[2]) > last then last = tonumber(a[2]) end
  if last <= now then
    redis.call('DEL', STATE, HOLDERS, QUEUE, ALIVE, WRITERS)
  else
    for _, k in ipairs({STATE, HOLDERS, QUEUE, ALIVE, WRITERS}) do
      redis.call('PEXPIRE', k, last - now)
    end
  end
end

