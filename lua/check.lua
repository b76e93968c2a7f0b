-- check.lua: does a token hold the lock now? (For scripts about to do
-- something irreversible.) Changes nothing but dropping expired entries.
--
-- KEYS[1..8] as in common.lua
-- KEYS[9] P{K}:b  HASH  break.lua's notices, b:<token> (see renew.lua)
-- ARGV[1] token
-- ARGV[2] history cap, ARGV[3] history retention in ms (see common.lua):
--         leases found run out are recorded as expired
--
-- Returns
--   {ms_left, fence}  the token holds it for ms_left more (server clock)
--   {NOT_HELD}        this token holds nothing (released, or expired)
--   {NOT_HELD, notice} its hold is being broken (`rlock break`): notice is
--                     the mark's JSON {by, reason, at}; or it was broken
--                     and has ended: the JSON {by, reason} of its notice,
--                     while that lasts (read, not deleted: the holder's
--                     renewal or release reads it too)
--   {OTHER_OWNER}     an exclusive lock (or a writer) is held by another
--@common
local tok = ARGV[1]
local exp = redis.call('ZSCORE', HOLDERS, tok)
local now = clock_ms()
if exp and tonumber(exp) > now then
  local held = redis.call('HMGET', STATE, 'c:' .. tok, 'f:' .. tok, 'k:' .. tok)
  if held[1] and held[3] then
    -- Being broken (break.lua): held only until its holder has stopped.
    return {NOT_HELD, held[3]}
  end
  if held[1] == '0' then
    -- Released, parked until its min-hold ends.
    return {NOT_HELD}
  end
  return {tonumber(exp) - now, tonumber(held[2]) or 0}
end
local _, foreign = lock_kind()
if foreign then return foreign end
prune(now)
-- (TYPE first: a key of another type must not fail the HGET.)
for _, k in ipairs({KEYS[9], KEYS[8]}) do
  if redis.call('TYPE', k).ok == 'hash' and not no_ttl(k) then
    local notice = redis.call('HGET', k, 'b:' .. tok)
    if notice then return {NOT_HELD, notice} end
  end
end
return {not_held_reply()}
