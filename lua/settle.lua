-- settle.lua: record as expired the leases of a lock that ran out
-- unnoticed (prune and settle in common.lua), then return its last events,
-- oldest first. A history read sends it only when lua/history.lua (which
-- writes nothing) found such leases and the user may write: a monitor
-- user's reads leave them to the next writer (an acquire's prune and
-- settle) and show them as history.lua computes them.
--
-- KEYS[1..8] as in common.lua
-- ARGV[1] how many events at most
-- ARGV[2] history cap, ARGV[3] history retention in ms (see common.lua)
--
-- Returns the last ARGV[1] entries (see log_event in common.lua), oldest
-- first.
--@common
local _, foreign = lock_kind()
if foreign then return foreign end
local now = clock_ms()
if redis.call('EXISTS', STATE) == 1 then
  writes_at_maxmemory()
  prune(now)
end
settle(now, false)
local count = tonumber(ARGV[1]) or 20
if count < 1 then return {} end
return redis.call('LRANGE', LOG, -count, -1)
