-- release.lua: drop one hold (or, with ARGV[2] = '1', every re-entry and any
-- place in the wait queue at once), then wake the waiters next in line.
--
-- KEYS[1..7] as in common.lua
-- ARGV[1] token
-- ARGV[2] '1' to abandon: release all re-entries and leave the queue
--
-- Returns
--   n >= 0   holds this token still has (0: the lock is released)
--   -1       nobody holds the lock (already released, or expired)
--   -2       the lock is held, but not by this token
local tok = ARGV[1]
local bad = check_types()
if bad then return bad end
local now = now_ms()
prune(now)
if ARGV[2] == '1' then
  leave_queue(tok)
  redis.call('DEL', KEYS[7])
end

local result
if redis.call('ZSCORE', HOLDERS, tok) then
  result = 0
  if ARGV[2] ~= '1' then
    result = redis.call('HINCRBY', STATE, 'c:' .. tok, -1)
  end
  if result <= 0 then
    result = 0
    forget_holder(tok)
  end
elseif redis.call('ZCARD', HOLDERS) == 0 then
  result = -1
else
  result = -2
end
wake()
tidy(now)
return result
