-- wait.lua: a waiter's heartbeat. It keeps the caller's place in the queue
-- and says when to look again; it touches the caller's own entry only, so
-- an idle waiter costs a few commands every few seconds.
--
-- KEYS[1..8] as in common.lua
-- ARGV[1] token
-- ARGV[2] waiter lease in ms (as ARGV[6] of acquire.lua)
-- ARGV[3] the first holder's fingerprint as the caller last saw it (see
--         acquire.lua's BUSY reply), or '' not to be told of changes
--
-- Returns
--   {ms, holder_ttl_ms, holder_id}
--              nothing can change for the caller for ms, unless it is woken:
--              the first holder's lease or the first other waiter's lease
--              ends then (0: now, so run acquire.lua); holder_ttl_ms is the
--              first holder's lease time left, holder_id its fingerprint
--   {ms, holder_ttl_ms, holder_id, holder_info, holder_since_ms, position,
--    holders}  the same, when the first holder is not the one in ARGV[3]:
--              who holds it now, and the caller's place in the queue
--   {NOT_HELD} the caller is not queued (dropped, superseded, or the
--              lock's state expired): run acquire.lua
-- The idle case reads what it must anyway (the first holder's and the
-- first waiter's lease ends); only a change of holder costs more.
--@common
local tok = ARGV[1]
local now = clock_ms()
-- A queued waiter keeps its place at maxmemory (see common.lua); it is
-- refused when its turn comes, by acquire.lua, if memory is still full.
writes_at_maxmemory()
-- XX: only refresh a place the caller has; CH: count it as done. A
-- heartbeat never lands in the same millisecond as the one before. (A
-- claim, see to_wake in common.lua, ends here too: the caller is alive, and
-- with the lock free this returns 0, so it runs acquire.lua at once.)
if redis.call('ZADD', ALIVE, 'XX', 'CH', now + tonumber(ARGV[2]), tok) == 0 then
  return {NOT_HELD}
end
local h = redis.call('ZRANGE', HOLDERS, 0, 0, 'WITHSCORES')
if not h[2] then return {0, 0, ''} end
local holder_ttl = math.max(tonumber(h[2]) - now, 0)
local left = holder_ttl
-- The caller's lease is the latest now: one that ends first is another's
-- (a waiter that stopped calling in is skipped once it ends).
local a = redis.call('ZRANGE', ALIVE, 0, 0, 'WITHSCORES')
if a[1] ~= tok then left = math.min(left, tonumber(a[2]) - now) end
local out = {math.max(left, 0), holder_ttl, holder_fingerprint(h[1])}
if ARGV[3] ~= '' and ARGV[3] ~= out[3] then
  local i = redis.call('HMGET', STATE, 'i:' .. h[1], 's:' .. h[1])
  out[4], out[5] = i[1] or '', tonumber(i[2]) or 0
  out[6] = redis.call('ZRANK', QUEUE, tok) or 0
  out[7] = redis.call('ZCARD', HOLDERS)
end
return out
