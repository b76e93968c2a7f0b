-- common.lua: prelude prepended (at compile time) to every other script.
--
-- One lock named K under prefix P is a handful of keys that all share the
-- hash tag {K}, so Redis Cluster can run every script on one node:
--
--   KEYS[1] P{K}        HASH    limit       -> N (slots; 1 = exclusive lock)
--                               c:<token>   -> re-entry count of that holder
--                               i:<token>   -> holder info (JSON from the client)
--                               s:<token>   -> held since (server ms)
--                               f:<token>   -> fencing value of that grant
--   KEYS[2] P{K}:h      ZSET    <token> -> lease expiry (server ms)
--   KEYS[3] P{K}:q      ZSET    <token> -> arrival order of a waiter (FIFO)
--   KEYS[4] P{K}:qa     ZSET    <token> -> waiter lease expiry (server ms)
--   KEYS[5] P{K}:fence  STRING  fencing counter; never expires, only grows
--   KEYS[6] P{K}:w:<token> LIST one waiter's wake-up signal (BLPOP target)
--
-- Every expiry decision uses the server's clock (TIME), never a client's.
-- All keys but the fence counter carry a PEXPIRE that covers the longest
-- lease in them, so a lock that everyone abandons disappears by itself.
local STATE, HOLDERS, QUEUE, ALIVE, FENCE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local WAKE_TTL_MS = 10000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function forget_holder(tok)
  redis.call('HDEL', STATE, 'c:' .. tok, 'i:' .. tok, 's:' .. tok, 'f:' .. tok)
  redis.call('ZREM', HOLDERS, tok)
end

local function leave_queue(tok)
  redis.call('ZREM', QUEUE, tok)
  redis.call('ZREM', ALIVE, tok)
end

-- Refuse to touch keys that hold someone else's data.
local function check_types()
  local want = {[STATE] = 'hash', [HOLDERS] = 'zset', [QUEUE] = 'zset', [ALIVE] = 'zset', [FENCE] = 'string'}
  for k, t in pairs(want) do
    local got = redis.call('TYPE', k).ok
    if got ~= 'none' and got ~= t then
      return redis.error_reply('WRONGTYPE key ' .. k .. ' holds a ' .. got)
    end
  end
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

-- Signal the waiters at the head of the queue that may now take a free slot.
local function wake(limit)
  if not limit then return end
  local free = limit - redis.call('ZCARD', HOLDERS)
  if free <= 0 then return end
  for _, tok in ipairs(redis.call('ZRANGE', QUEUE, 0, free - 1)) do
    local k = STATE .. ':w:' .. tok
    if redis.call('EXISTS', k) == 0 then
      redis.call('RPUSH', k, '1')
      redis.call('PEXPIRE', k, WAKE_TTL_MS)
    end
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
    redis.call('DEL', STATE, HOLDERS, QUEUE, ALIVE)
  else
    for _, k in ipairs({STATE, HOLDERS, QUEUE, ALIVE}) do
      redis.call('PEXPIRE', k, last - now)
    end
  end
end

