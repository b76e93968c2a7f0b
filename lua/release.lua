-- release.lua: drop one hold (or, with ARGV[2] = '1', every re-entry and any
-- place in the wait queue at once), then say which waiters to wake.
--
-- KEYS[1..10] as in common.lua (KEYS[10]: P{K}:r:<request id>)
-- KEYS[11] P{K}:b  HASH  break.lua's notices (see renew.lua)
-- KEYS[12] P{K}:w:<ARGV[12]>, KEYS[13] P{K}:w:<ARGV[13]>: the wake-up
--          lists of the hinted waiters, each only when its token is given
-- ARGV[1] token
-- ARGV[2] '1' to abandon: release all re-entries and leave the queue
-- ARGV[3] request id, the same for every resend of one call
-- ARGV[4] min-hold in ms given at release ('0': none)
-- ARGV[5] '1': honour min-hold (this one, or the one given at the grant):
--         the last hold's lease then ends at the later of now and the grant
--         + min-hold, instead of at once; the holder stays, with count 0
--         ("parked"), and nobody renews it. '0': release now (a failed
--         command, an abandoned acquire)
-- ARGV[6] how long (ms) the request record KEYS[10] is kept: longer than
--         the client may resend
-- ARGV[7] how the hold ended, for the history: '' released, 'overran'
--         (stopped by --max-hold: an `overran` event instead of
--         `released`), 'timeout' (a waiter gave up: a `timeout` event if
--         it was queued)
-- ARGV[8] exit code of exec's command ('' if none)
-- ARGV[9] the caller's holder info, JSON (for `timeout`)
-- ARGV[10] how long (ms) the caller waited (for `timeout`)
-- ARGV[11..13] only with KEYS[12] (a release without hints sends none):
--          ARGV[11] how long (ms) a wake-up waits in a list (as wake.lua's
--          ARGV[1]); ARGV[12] the waiter next in line as this hold's grant
--          named it ('^' .. token, lua/acquire.lua "Next in line"), without
--          the '^'; ARGV[13] the one after it ('^~' .. token), or ''
-- then the history cap and retention in ms, always the last two (see
-- common.lua): ARGV[11], ARGV[12] without hints, ARGV[14], ARGV[15] with
--
-- Resends (see acquire.lua): a release that dropped one of several holds
-- leaves its answer in P{K}:r:<request id>, and a resend finds it before
-- it would drop another (a hold is never dropped twice, even while sibling
-- holders of the same token release theirs); the record outlives every
-- resend (ARGV[6]). Releasing the last hold, or every hold, again is the
-- same as once: parked again to the same end, or found holding nothing.
-- The client takes NOT_HELD (or OTHER_OWNER: someone took the freed lock)
-- in answer to a resend as "released": its first send may have done it
-- (src/lock/node/ops.rs, `release_script`).
--
-- Returns {n, wake...}, n one of
--   n >= 0        holds this token still has (0: the lock is released)
--   NOT_HELD      this token holds nothing (already released, or expired);
--                 the lock may have other holders if it is shared
--   OTHER_OWNER   an exclusive lock (or a writer) is held by another token
-- and `wake...` the tokens of waiters that may now take the lock (those
-- hinted in KEYS[12], KEYS[13] are woken here and left out: see
-- wake_hinted); or
-- {BROKEN, notice, wake...}: this token's hold was broken (`rlock break`),
-- notice being the JSON {by, reason} break.lua left: the hold was being
-- broken and this release ended it (as a release), or it had ended
-- already. A break that lands while exec's command ends is found here,
-- not by a renewal. The notice is not deleted (a resend finds it again); it
-- expires with the broken lease (break.lua).
--
-- A hold is its lease in P{K}:h and its fields in P{K}: a lease whose
-- count field is gone (P{K} deleted by hand) holds nothing.
--@num
local tok, done, all = ARGV[1], KEYS[10], ARGV[2] == '1'
local now
local function clock()
  if not now then now = clock_ms() end
  return now
end

-- When the token's last hold ends (`h`: its c:, u:, s: fields): now, or
-- with ARGV[5] = '1' the later of the min-hold given at the grant and
-- grant + ARGV[4].
local function hold_end(h)
  -- (ARGV[4] '0', no min-hold, is not parsed: tonumber calls strtod)
  if ARGV[5] ~= '1' or not (h[2] or (ARGV[4] ~= '0' and (tonumber(ARGV[4]) or 0) > 0)) then
    return 0
  end
  return math.max(tonumber(h[2]) or 0, (tonumber(h[3]) or 0) + (tonumber(ARGV[4]) or 0))
end

-- The history's end of `tok`'s hold (`h`: its c:, u:, s:, i:, f: fields):
-- `released` (or `overran`, counted in overruns), which closes its grant
-- (open_grants, lua/part/log.lua). `e`: as log_event's.
--@log
local function ended(h, e)
  local entry = {'d', math.max(clock() - (tonumber(h[3]) or clock()), 0)}
  if tonumber(ARGV[8]) then
    entry[#entry + 1] = 'x'
    entry[#entry + 1] = tonumber(ARGV[8])
  end
  log_event(clock(), ARGV[7] == 'overran' and 'overran' or 'released', h[5] or '0', h[4] or '',
    entry, e)
end

-- Fast path, before the prelude (see build.rs): the last hold
-- (or every hold) of the only holder, its lease still running, nobody
-- waiting (KEYS[3] exists only while someone waits), no min-hold left:
-- the lock's state goes. One hold's release first looks for its
-- request's record: if a resend finds one, the count it sees is after
-- that release. Only a release that dropped one of several holds leaves
-- a record, and it marks the hold ('n:<token>', below): an unmarked hold
-- has none to look for.
local first = redis.call('ZRANGE', KEYS[2], '0', '1', 'WITHSCORES')
if first[1] == tok and not first[3] and tonumber(first[2]) > clock()
    and redis.call('EXISTS', KEYS[3]) == 0 then
  local h = redis.call('HMGET', KEYS[1], 'c:' .. tok, 'u:' .. tok, 's:' .. tok, 'i:' .. tok,
    'f:' .. tok, 'k:' .. tok, 'n:' .. tok)
  local ends = hold_end(h)
  -- (A hold being broken takes the path below, which says so.)
  if h[1] and not h[6]
      and (all or (tonumber(h[1]) == 1 and not (h[7] and redis.call('GET', done))))
      and (ends == 0 or ends <= clock()) then
    -- The first write adds no memory and reads P{K}:n's type (an HDEL of
    -- a field no hash has: see common.lua); the entry's RPUSH then reads
    -- P{K}:log's (a key of another type stops the script before anything
    -- is written), and the state goes last.
    redis.call('HDEL', KEYS[8], '-')
    ended(h)
    redis.call('DEL', KEYS[1], KEYS[2])
    return {0}
  end
end
--@common

-- Wake the waiters of `wake` (to_wake's list) whose wake-up lists this
-- call has (KEYS[12], KEYS[13]: the hints of the grant), as wake.lua
-- would: '1' for a token, 's' for a scout's '~' .. token; the list
-- expires in ARGV[11] ms, and one without a TTL is not rlock's (see
-- common.lua): left alone, as a push Redis refuses (a key of another
-- type) is, after everything else was written. The rest is returned, for
-- the client to wake with wake.lua. A hint to_wake does not name is not
-- used: to_wake decides, and a wake-up is only a signal to look.
local function wake_hinted(wake)
  if not KEYS[12] then return wake end
  local ttl, out = tonumber(ARGV[11]) or 10000, {}
  for _, w in ipairs(wake) do
    local key, signal
    for i = 12, 13 do
      local t = KEYS[i] and ARGV[i] or ''
      if t ~= '' and w == t then key, signal = KEYS[i], '1'
      elseif t ~= '' and w == '~' .. t then key, signal = KEYS[i], 's' end
      if key then break end
    end
    if not key then
      out[#out + 1] = w
    elseif redis.pcall('PTTL', key) ~= -1 then
      local pushed = redis.pcall('RPUSH', key, signal)
      if type(pushed) == 'number' then redis.call('PEXPIRE', key, ttl) end
    end
  end
  return out
end

-- The history's keys are read before a hold's end writes anything (the
-- slow paths): data rlock did not write there (another type) stops the
-- script first. Returns an error reply, or nil and P{K}:n's field 'e'
-- (the history's expiry deadline, for log_event: nothing writes P{K}:n
-- before the hold's end event).
local function history_readable()
  local e = redis.call('HGET', KEYS[8], 'e')
  local t = redis.call('TYPE', KEYS[7]).ok
  if t ~= 'none' and t ~= 'list' then
    return redis.error_reply('NOTRLOCK key ' .. KEYS[7] .. ' holds data rlock did not write')
  end
  return nil, e
end

-- A release goes on at maxmemory (see common.lua): it adds at most a
-- request record.
writes_at_maxmemory()
clock()
local exp = (first[1] == tok and first[2]) or redis.call('ZSCORE', HOLDERS, tok)
-- (Its fields, read once: held while its count field is there.)
local h = exp and tonumber(exp) > now
  and redis.call('HMGET', STATE, 'c:' .. tok, 'u:' .. tok, 's:' .. tok, 'i:' .. tok,
    'f:' .. tok, 'm:' .. tok, 'k:' .. tok)
if h and h[1] then
  local bad, e = history_readable()
  if bad then return bad end
  if not all then
    -- Once per request: a sibling may have released since this one's
    -- first send, so the count alone cannot tell a resend.
    local prev = redis.call('GET', done)
    if prev then return {tonumber(prev)} end
  end
  if not all and (tonumber(h[1]) or 0) > 1 then
    -- One hold fewer, and the mark that a record may exist (read by the
    -- fast path above; forget_holder deletes it with the holder).
    local n = tonumber(h[1]) - 1
    redis.call('HSET', STATE, 'c:' .. tok, n, 'n:' .. tok, 1)
    redis.call('SET', done, n, 'PX', tonumber(ARGV[6]) or 10000)
    return {n}
  end
  if h[1] == '0' and ARGV[5] == '1' then
    -- Released already, parked until its min-hold ends: a later release
    -- (a resend, or another release with a longer min-hold) keeps that
    -- end. The token holds nothing to release; as a renewal, a release
    -- must not move a lease nobody holds.
    return {0}
  end
  -- A hold being broken is not parked: the break wants the lock passed on.
  local park = h[7] and 0 or hold_end(h)
  if park > now then
    -- Parked until the min-hold ends: held, by nobody who renews it (a
    -- later release keeps the end, a renewal would move it).
    redis.call('HSET', STATE, 'c:' .. tok, 0, 'u:' .. tok, park)
    redis.call('ZADD', HOLDERS, park, tok)
    ended(h, e)
    tidy(now)
    return {0}
  end
  forget_holder(tok, h[6])
  ended(h, e)
  local queued = prune(now)
  -- The waiters woken get a claim (a short waiter lease), the one behind
  -- them a wake-up to check: a dead waiter at the head costs the live ones
  -- at most the claim. Only leases are shortened here, nothing is granted:
  -- see to_wake in common.lua for why that never makes two holders.
  local wake = wake_hinted(to_wake(nil, now, queued))
  tidy(now)
  -- Released as any hold (its history says how it ended); the releaser
  -- is told of the break it had not noticed yet.
  if h[7] then
    -- (Its notice was for a holder that might miss the mark: told now.)
    if redis.call('TYPE', KEYS[11]).ok == 'hash' then redis.call('HDEL', KEYS[11], 'b:' .. tok) end
    return with_wake({BROKEN, h[7]}, wake)
  end
  return with_wake({0}, wake)
end

local prev = redis.call('GET', done)
if prev then return {tonumber(prev)} end
local _, foreign, remains = lock_kind()
if foreign then return foreign end
-- (TYPE first: a key of another type must not fail the HGET.)
local notice
if redis.call('TYPE', KEYS[11]).ok == 'hash' then
  notice = redis.call('HGET', KEYS[11], 'b:' .. tok)
end
if all then
  if ARGV[7] == 'timeout' and redis.call('ZSCORE', QUEUE, tok) then
    log_event(now, 'timeout', 0, ARGV[9] or '', {'w', tonumber(ARGV[10]) or 0})
  end
  leave_queue(tok)
  redis.call('DEL', KEYS[9])
end
local queued = prune(now)
clear_remains(remains)
forget_remains(tok)
local result = not_held_reply()
-- (The queue's size as prune left it, unless remains went with it.)
local wake = wake_hinted(to_wake(nil, now, not remains and queued or nil))
tidy(now)
if notice then return with_wake({BROKEN, notice}, wake) end
return with_wake({result}, wake)
