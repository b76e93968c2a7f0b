-- lost.lua: record in the history that a holder (exec, a keeper) found
-- its lock gone at a renewal, and why: a `lost` event.
--
-- KEYS[1..8] as in common.lua
-- ARGV[1] the token that held the lock
-- ARGV[2] its holder info, JSON (used when the grant's own record is gone)
-- ARGV[3] the reason, a short text
-- ARGV[4] history cap, ARGV[5] history retention in ms (see common.lua)
--
-- Returns 1. The grant's open record, if still there, gives the fence
-- and the info stored with the grant, and is closed: the loss is its end.
-- Sent once per loss; a resend may record it twice.
--@common
local now = now_ms()
writes_at_maxmemory()
local f, _, info = close_grant(ARGV[1])
log_event(now, 'lost', f, info or ARGV[2], {'r', ARGV[3]})
return 1
