-- redlock_wait.lua: note (or drop) a RedLock waiter on one master, so that
-- `status`, `list` and `top` show who waits (src/lock/quorum/acquire.rs).
-- RedLock keeps no queue (a waiter retries on every master); this is a
-- list of who waits, not a place in line: no acquire reads it.
--
-- KEYS[1] P{K}:rw, a hash: one field per waiter, its waiter id, holding
--         '<deadline_ms>:<since_ms>:<info_json>' (server ms): until when
--         it counts as waiting unless noted again, since when it waits
--         (its first note here), and its info as its acquire sends it.
--         The waiter id is random, made by the waiting acquire; it is not
--         a lock token and grants nothing (reads show its SHA-1 only).
-- ARGV[1] the waiter id
-- ARGV[2] how long (ms) it counts as waiting from now; '0' drops it
-- ARGV[3] its info JSON (dropped past 1 KB, as a queued waiter's is)
--
-- Waiters past their deadline are pruned here; the key expires at the
-- latest deadline left, and is deleted when no waiter is left, so it is
-- never without an expiry. Returns how many waiters are left, or an
-- error, changing nothing, if the key holds data rlock did not write
-- (another type, or no expiry).
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'none' and (ty ~= 'hash' or redis.call('PTTL', KEYS[1]) < 0) then
  return redis.error_reply('NOTRLOCK key ' .. KEYS[1] .. ' holds data rlock did not write')
end
--@num
local now = clock_ms()
local id, keep = ARGV[1], tonumber(ARGV[2]) or 0
local since, latest, left = now, 0, 0
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  local d, s = string.match(h[i + 1], '^(%d+):(%d+):')
  d = tonumber(d) or 0
  if h[i] == id then
    since = tonumber(s) or now
  elseif d <= now then
    redis.call('HDEL', KEYS[1], h[i])
  else
    left = left + 1
    if d > latest then latest = d end
  end
end
if keep > 0 then
  local info = ARGV[3]
  if #info > 1024 then info = '' end
  redis.call('HSET', KEYS[1], id, (now + keep) .. ':' .. since .. ':' .. info)
  left = left + 1
  if now + keep > latest then latest = now + keep end
else
  redis.call('HDEL', KEYS[1], id)
end
if left == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], latest - now)
end
return left
