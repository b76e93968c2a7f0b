-- wait.lua: a waiter's heartbeat. It keeps the caller's place in the queue
-- and says when to look again; it touches the caller's own entry only, so
-- an idle waiter costs a few commands every few seconds.
--
-- KEYS[1..6] as in common.lua
-- ARGV[1] token
-- ARGV[2] waiter lease in ms (as ARGV[6] of acquire.lua)
--
-- Returns
--   ms >= 0    nothing can change for the caller for ms, unless it is woken:
--              the first holder's lease or the first other waiter's lease
--              ends then (0: now, so run acquire.lua)
--   NOT_HELD   the caller is not queued (dropped, or the lock's state
--              expired): run acquire.lua
local tok = ARGV[1]
local now = now_ms()
-- XX: only refresh a place the caller has; CH: count it as done. A
-- heartbeat never lands in the same millisecond as the one before.
if redis.call('ZADD', ALIVE, 'XX', 'CH', now + tonumber(ARGV[2]), tok) == 0 then
  return NOT_HELD
end
local h = redis.call('ZRANGE', HOLDERS, 0, 0, 'WITHSCORES')
if not h[2] then return 0 end
local left = tonumber(h[2]) - now
-- The caller's lease is the latest now: one that ends first is another's
-- (a waiter that stopped calling in is skipped once it ends).
local a = redis.call('ZRANGE', ALIVE, 0, 0, 'WITHSCORES')
if a[1] ~= tok then left = math.min(left, tonumber(a[2]) - now) end
return math.max(left, 0)
