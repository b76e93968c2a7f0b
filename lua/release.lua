-- release.lua: drop one hold (or, with ARGV[2] = '1', every re-entry and any
-- place in the wait queue at once), then wake the waiters next in line.
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
-- answer in P{K}:r:<request id>, and a resend finds it there and changes
-- nothing more: a hold is never dropped twice, even while sibling holders
-- of the same token release theirs, and a resend of the release that freed
-- the lock answers 0 (released) rather than -1 (gone). The record outlives
-- every resend (ARGV[6]).
--
-- Returns
--   n >= 0   holds this token still has (0: the lock is released)
--   -1       this token holds nothing (already released, or expired); the
--            lock may have other holders if it is shared
--   -2       an exclusive lock (or a writer) is held by another token
local tok, done = ARGV[1], KEYS[8]
local bad = check_types()
if bad then return bad end
local prev = redis.call('GET', done)
if prev then return tonumber(prev) end
local now = now_ms()
prune(now)
local held = redis.call('ZSCORE', HOLDERS, tok)
if ARGV[2] == '1' then
  leave_queue(tok)
  redis.call('DEL', KEYS[7])
end

local result
if held then
  result = 0
  if ARGV[2] ~= '1' then
    result = redis.call('HINCRBY', STATE, 'c:' .. tok, -1)
  end
  local hold_end = 0
  if result <= 0 and ARGV[5] == '1' then
    hold_end = math.max(tonumber(redis.call('HGET', STATE, 'u:' .. tok)) or 0,
      (tonumber(redis.call('HGET', STATE, 's:' .. tok)) or 0) + (tonumber(ARGV[4]) or 0))
  end
  if result <= 0 and hold_end > now then
    -- Parked until the min-hold ends: held, by nobody who renews it (a
    -- later release keeps the end, a renewal would move it).
    result = 0
    redis.call('HSET', STATE, 'c:' .. tok, 0, 'u:' .. tok, hold_end)
    redis.call('ZADD', HOLDERS, hold_end, tok)
  elseif result <= 0 then
    result = 0
    forget_holder(tok)
  end
  redis.call('SET', done, result, 'PX', tonumber(ARGV[6]) or 10000)
else
  result = not_held_reply()
end
wake()
tidy(now)
return result
