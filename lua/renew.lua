-- renew.lua: extend the lease of a token that still holds the lock.
-- An expired lease is never revived, and a lease is never shortened: a
-- nested holder with a short TTL, or `rlock renew` with the default TTL,
-- must not cut the lease an outer holder relies on.
--
-- KEYS[1..8] as in common.lua (KEYS[8] P{K}:n also holds break.lua's
--                notices, b:<token>)
-- ARGV[1] token
-- ARGV[2] lease TTL in ms, counted from now (server clock)
-- ARGV[3] pid of the command the holder runs, to note for status
--         ('' for none, or once noted)
-- ARGV[4] history cap, ARGV[5] history retention in ms (see common.lua):
--         a renewal that finds leases run out records them as expired
--
-- Returns
--   ms > 0        renewed; the lease now ends ms from now (at least ARGV[2])
--   NOT_HELD      this token holds nothing (released, or expired; other
--                 holders of a shared lock do not change that)
--   OTHER_OWNER   an exclusive lock (or a writer) is held by another token
--   {NOT_HELD, notice}  this token's hold was broken (`rlock break`):
--                 notice is the JSON {by, reason} break.lua left, read
--                 once (deleted here: only this token's holder asks)
--@common
local tok, ttl = ARGV[1], tonumber(ARGV[2])
local exp = redis.call('ZSCORE', HOLDERS, tok)
local now = now_ms()
if exp and tonumber(exp) > now then
  local count = redis.call('HGET', STATE, 'c:' .. tok)
  if count == '0' then
    -- Released, parked until its min-hold ends (release.lua): not renewable.
    return NOT_HELD
  end
  if count and ARGV[3] ~= '' then
    -- Into the state hash, which exists (it has c:<token>) and has its
    -- TTL; forget_holder deletes the field with the holder's others. The
    -- first pid noted stays: a nested exec re-entering with this token
    -- runs inside the command that was noted first. (A few bytes, once
    -- per hold: like a release's request record, it goes on at maxmemory.)
    writes_at_maxmemory()
    redis.call('HSETNX', STATE, 'p:' .. tok, ARGV[3])
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
-- (TYPE first: a key of another type must not fail the HGET.)
if redis.call('TYPE', KEYS[8]).ok == 'hash' and not no_ttl(KEYS[8]) then
  local notice = redis.call('HGET', KEYS[8], 'b:' .. tok)
  if notice then
    redis.call('HDEL', KEYS[8], 'b:' .. tok)
    prune(now)
    return {NOT_HELD, notice}
  end
end
prune(now)
return not_held_reply()
