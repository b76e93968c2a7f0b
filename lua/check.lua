-- check.lua: does a token hold the lock now? (For scripts about to do
-- something irreversible.) Changes nothing but dropping expired entries.
--
-- KEYS[1..8] as in common.lua
-- ARGV[1] token
-- ARGV[2] history cap, ARGV[3] history retention in ms (see common.lua):
--         leases found run out are recorded as expired
--
-- Returns
--   {ms_left, fence}  the token holds it for ms_left more (server clock)
--   {NOT_HELD}        this token holds nothing (released, or expired), or
--                     its hold is being broken (`rlock break`)
--   {OTHER_OWNER}     an exclusive lock (or a writer) is held by another
--@common
local tok = ARGV[1]
local exp = redis.call('ZSCORE', HOLDERS, tok)
local now = now_ms()
if exp and tonumber(exp) > now then
  local held = redis.call('HMGET', STATE, 'c:' .. tok, 'f:' .. tok, 'k:' .. tok)
  if held[1] == '0' or held[3] then
    -- Released, parked until its min-hold ends; or being broken
    -- (break.lua): held only until its holder has stopped.
    return {NOT_HELD}
  end
  return {tonumber(exp) - now, tonumber(held[2]) or 0}
end
local _, foreign = lock_kind()
if foreign then return foreign end
prune(now)
return {not_held_reply()}
