-- check.lua: does a token hold the lock now? (For scripts about to do
-- something irreversible.) Changes nothing but dropping expired entries.
--
-- KEYS[1..6] as in common.lua
-- ARGV[1] token
--
-- Returns
--   {ms_left, fence}  the token holds it for ms_left more (server clock)
--   {-1}              this token holds nothing (released, or expired)
--   {-2}              an exclusive lock (or a writer) is held by another
local tok = ARGV[1]
local bad = check_types()
if bad then return bad end
local now = now_ms()
prune(now)
local exp = redis.call('ZSCORE', HOLDERS, tok)
if exp and redis.call('HGET', STATE, 'c:' .. tok) ~= '0' then
  return {tonumber(exp) - now, tonumber(redis.call('HGET', STATE, 'f:' .. tok)) or 0}
end
return {not_held_reply()}
