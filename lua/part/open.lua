-- part/open.lua: the open grants' count (docs/internals.md, "History").
-- Put in by build.rs at an `--@open` line (common.lua has one).
--
-- How many grants have no end event yet: grants less released, overruns,
-- expired, and `closed` (grants a loss or a break ended), read in one
-- command. No record is kept per grant: an end event counts itself, and
-- the grants still open whose holder is gone are found from their
-- `granted` entries when they are settled (settle in common.lua). Never
-- below 0 (a hold whose state hash was deleted by hand may be ended
-- twice). Second, the history's expiry deadline, field 'e' (nil: none),
-- read by the same command for log_event (lua/part/log.lua).
local function open_grants()
  local n = redis.call('HMGET', KEYS[8], 'grants', 'released', 'overruns', 'expired', 'closed',
    'e')
  local open = tonumber(n[1]) or 0
  for i = 2, 5 do open = open - (tonumber(n[i]) or 0) end
  return math.max(open, 0), n[6] or 0
end
