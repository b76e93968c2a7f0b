-- release.lua: drop one hold (or, with ARGV[2] = '1', every re-entry and any
-- place in the wait queue at once), then say which waiters to wake.
--
-- KEYS[1..8] as in common.lua (KEYS[8]: P{K}:r:<request id>)
-- ARGV[1] token
-- ARGV[2] '1' to abandon: release all re-entries and leave the queue
-- ARGV[3] request id, the same for every resend of one call
-- ARGV[4] min-hold in ms given at release ('0': none)
-- ARGV[5] '1': honour min-hold (this one, or the one given at the grant):
--         the last hold's lease then ends at the later of now and the grant
--         + min-hold, instead of at once; the holder stays, with count 0
--         ("parked"), and nobody renews it. '0': release now (a failed
--         command, an abandoned acquire)
-- ARGV[6] how long (ms) the request record KEYS[8] is kept: longer than
--         the client may resend
--
-- Resends (see acquire.lua): a release that changed anything leaves its
-- answer in P{K}:r:<request id>, and a resend of one hold's release finds
-- it before it would drop another (a hold is never dropped twice, even
-- while sibling holders of the same token release theirs). A release of
-- every hold (ARGV[2] = '1') needs the record only once the lock is free:
-- a resend then finds the token holding nothing, then the record, and
-- answers 0 (released) rather than NOT_HELD; while the token still holds,
-- releasing every hold (or parking it, to the same end) again is the same
-- as once. The record outlives every resend (ARGV[6]).
--
-- Returns {n, wake...}, n one of
--   n >= 0        holds this token still has (0: the lock is released)
--   NOT_HELD      this token holds nothing (already released, or expired);
--                 the lock may have other holders if it is shared
--   OTHER_OWNER   an exclusive lock (or a writer) is held by another token
-- and `wake...` the tokens of waiters that may now take the lock.
local tok, done, all = ARGV[1], KEYS[8], ARGV[2] == '1'
local record_ms = tonumber(ARGV[6]) or 10000
local exp = redis.call('ZSCORE', HOLDERS, tok)
local now = now_ms()
if exp and tonumber(exp) > now then
  if not all then
    -- Once per request: a sibling may have released since this one's
    -- first send, so the count alone cannot tell a resend.
    local prev = redis.call('GET', done)
    if prev then return {tonumber(prev)} end
  end
  local held = redis.call('HMGET', STATE, 'c:' .. tok, 'm:' .. tok, 'u:' .. tok, 's:' .. tok)
  if not all and (tonumber(held[1]) or 0) > 1 then
    local n = redis.call('HINCRBY', STATE, 'c:' .. tok, -1)
    redis.call('SET', done, n, 'PX', record_ms)
    return {n}
  end
  local hold_end = 0
  if ARGV[5] == '1' then
    hold_end = math.max(tonumber(held[3]) or 0, (tonumber(held[4]) or 0) + (tonumber(ARGV[4]) or 0))
  end
  redis.call('SET', done, 0, 'PX', record_ms)
  if hold_end > now then
    -- Parked until the min-hold ends: held, by nobody who renews it (a
    -- later release keeps the end, a renewal would move it).
    redis.call('HSET', STATE, 'c:' .. tok, 0, 'u:' .. tok, hold_end)
    redis.call('ZADD', HOLDERS, hold_end, tok)
    tidy(now)
    return {0}
  end
  -- Fast path: the only holder, nobody waiting: the lock's state goes.
  if redis.call('ZCARD', HOLDERS) == 1 and redis.call('EXISTS', QUEUE) == 0 then
    redis.call('DEL', STATE, HOLDERS)
    return {0}
  end
  forget_holder(tok, held[2])
  prune(now)
  local wake = to_wake(nil)
  tidy(now)
  return with_wake({0}, wake)
end

local prev = redis.call('GET', done)
if prev then return {tonumber(prev)} end
if all then
  leave_queue(tok)
  redis.call('DEL', KEYS[7])
end
prune(now)
local result = not_held_reply()
local wake = to_wake(nil)
tidy(now)
return with_wake({result}, wake)
