-- renew.lua: extend the lease of a token that still holds the lock.
-- An expired lease is never revived, and a lease is never shortened: a
-- nested holder with a short TTL, or `rlock renew` with the default TTL,
-- must not cut the lease an outer holder relies on.
--
-- KEYS[1..8] as in common.lua
-- ARGV[1] token
-- ARGV[2] lease TTL in ms, counted from now (server clock)
-- ARGV[3] history cap, ARGV[4] history retention in ms (see common.lua):
--         a renewal that finds leases run out records them as expired
--
-- Returns
--   ms > 0        renewed; the lease now ends ms from now (at least ARGV[2])
--   NOT_HELD      this token holds nothing (released, or expired; other
--                 holders of a shared lock do not change that)
--   OTHER_OWNER   an exclusive lock (or a writer) is held by another token
--@common
local tok, ttl = ARGV[1], tonumber(ARGV[2])
local exp = redis.call('ZSCORE', HOLDERS, tok)
local now = now_ms()
if exp and tonumber(exp) > now then
  if redis.call('HGET', STATE, 'c:' .. tok) == '0' then
    -- Released, parked until its min-hold ends (release.lua): not renewable.
    return NOT_HELD
  end
  exp = tonumber(exp)
  if now + ttl > exp then
    exp = now + ttl
    writes_at_maxmemory() -- a renewal adds no memory (see common.lua)
    redis.call('ZADD', HOLDERS, exp, tok)
    tidy(now)
  end
  return exp - now
end
local _, foreign = lock_kind()
if foreign then return foreign end
prune(now)
return not_held_reply()
