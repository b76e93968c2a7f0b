-- renew.lua: extend the lease of a token that still holds the lock.
-- An expired lease is never revived, and a lease is never shortened: a
-- nested holder with a short TTL, or `rlock renew` with the default TTL,
-- must not cut the lease an outer holder relies on.
--
-- KEYS[1..8] as in common.lua
-- KEYS[9] P{K}:b  HASH  break.lua's notices, b:<token> (older releases
--                left them in KEYS[8], P{K}:n: read there too)
-- ARGV[1] token
-- ARGV[2] lease TTL in ms, counted from now (server clock)
-- ARGV[3] pid of the command the holder runs, to note for status
--         ('' for none, or once noted)
-- ARGV[4] history cap, ARGV[5] history retention in ms (see common.lua):
--         a renewal that finds leases run out records them as expired
--
-- Returns
--   ms > 0        renewed; the lease now ends ms from now (at least ARGV[2])
--   NOT_HELD      this token holds nothing (released, or expired, or the
--                 lock's keys deleted by hand; other holders of a shared
--                 lock do not change that)
--   OTHER_OWNER   an exclusive lock (or a writer) is held by another token
--   {NOT_HELD, notice}  this token's hold was broken (`rlock break`):
--                 notice is the JSON {by, reason} break.lua left, read
--                 once (deleted here: only this token's holder asks); or
--                 its hold is being broken (marked, still held until its
--                 holder releases it or its lease ends: not extended)
--
-- A hold is its lease in P{K}:h and its fields in P{K}: the HGET of its
-- count, which tells a parked hold, also tells that the state hash is
-- still there (a DEL by hand, see lock_kind in common.lua): no read more
-- on the path every renewal takes.
--@common
local tok, ttl = ARGV[1], tonumber(ARGV[2])
local exp = redis.call('ZSCORE', HOLDERS, tok)
local now = clock_ms()
if exp and tonumber(exp) > now then
  local h = redis.call('HMGET', STATE, 'c:' .. tok, 'k:' .. tok, 'p:' .. tok)
  local count = h[1]
  if count == '0' then
    -- Released, parked until its min-hold ends (release.lua): not renewable.
    return NOT_HELD
  end
  if count and h[2] then
    -- Being broken (break.lua): never extended; the holder stops what it
    -- runs and releases, or the lease runs out.
    return {NOT_HELD, h[2]}
  end
  if count then
    if ARGV[3] ~= '' and not h[3] then
      -- Into the state hash, which exists (it has c:<token>) and has its
      -- TTL; forget_holder deletes the field with the holder's others. The
      -- first pid noted stays: a nested exec re-entering with this token
      -- runs inside the command that was noted first. (A few bytes, once
      -- per hold: like a release's request record, it goes on at maxmemory.)
      writes_at_maxmemory()
      redis.call('HSET', STATE, 'p:' .. tok, ARGV[3])
    end
    exp = tonumber(exp)
    if now + ttl > exp then
      exp = now + ttl
      writes_at_maxmemory() -- a renewal adds no memory (see common.lua)
      redis.call('ZADD', HOLDERS, exp, tok)
      -- When (`rlock metrics`, rlock_lock_renewed_seconds_ago; the field
      -- goes with the holder's others, forget_holder).
      redis.call('HSET', STATE, 'r:' .. tok, now)
      tidy(now)
    end
    return exp - now
  end
  -- A lease without its fields: the hold is gone (below).
end
local _, foreign, remains = lock_kind()
if foreign then return foreign end
-- (TYPE first: a key of another type must not fail the HGET.)
local notice
for _, k in ipairs({KEYS[9], KEYS[8]}) do
  if not notice and redis.call('TYPE', k).ok == 'hash' and not no_ttl(k) then
    notice = redis.call('HGET', k, 'b:' .. tok)
    if notice then
      writes_at_maxmemory()
      redis.call('HDEL', k, 'b:' .. tok)
    end
  end
end
writes_at_maxmemory()
prune(now)
clear_remains(remains)
forget_remains(tok)
if notice then return {NOT_HELD, notice} end
return not_held_reply()
