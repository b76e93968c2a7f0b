-- lost.lua: record in the history that a holder (exec, a keeper) found
-- its lock gone at a renewal, and why: a `lost` event.
--
-- KEYS[1..8] as in common.lua
-- ARGV[1] the token that held the lock
-- ARGV[2] its holder info, JSON (used when the grant's own record is gone)
-- ARGV[3] the reason, a short text
-- ARGV[4] history cap, ARGV[5] history retention in ms (see common.lua)
--
-- Returns 1. A loss ends the grant when its holder is gone without an
-- end event (its state ran out or was deleted with nobody calling): the
-- open grant no live hold has whose `granted` entry has this holder's
-- info gives the fence and the info, and is closed (counter `closed`,
-- see open_grants). Otherwise (its lease ran out where a call saw it:
-- `expired` already; or it is still held) the loss closes nothing, and
-- its info is ARGV[2]. Sent once per loss; a resend may record it twice.
--@common
local now = clock_ms()
writes_at_maxmemory()
if redis.call('EXISTS', STATE) == 1 then prune(now) end
local f, info, closes = 0, ARGV[2], false
local count, live = gone_grants()
if count > 0 then
  for _, e in ipairs(open_entries(count, live)) do
    if e[2] == ARGV[2] then
      f, info, closes = e[1], e[2], true
      break
    end
  end
end
log_event(now, 'lost', f, info, {'r', ARGV[3]})
if closes then redis.call('HINCRBY', STATS, 'closed', 1) end
return 1
