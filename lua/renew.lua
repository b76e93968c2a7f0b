-- renew.lua: extend the lease of a token that still holds the lock.
-- An expired lease is never revived: prune runs first.
--
-- KEYS[1..5] as in common.lua
-- ARGV[1] token
-- ARGV[2] new lease TTL in ms, counted from now (server clock)
--
-- Returns
--   ttl_ms   renewed; the lease now ends ttl_ms from now
--   -1       nobody holds the lock (released, or expired)
--   -2       the lock is held, but not by this token
local tok, ttl = ARGV[1], tonumber(ARGV[2])
local bad = check_types()
if bad then return bad end
local now = now_ms()
prune(now)
if redis.call('ZSCORE', HOLDERS, tok) then
  redis.call('ZADD', HOLDERS, now + ttl, tok)
  tidy(now)
  return ttl
end
if redis.call('ZCARD', HOLDERS) == 0 then
  return -1
end
return -2
