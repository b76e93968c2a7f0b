-- acquire.lua: grant the lock to a token, let its holder re-enter, or queue
-- the caller behind earlier waiters (FIFO).
--
-- KEYS[1..10] as in common.lua (KEYS[9] is the caller's own wake-up list,
-- KEYS[10] P{K}:r:<request id>)
-- ARGV[1] token (UUIDv4)
-- ARGV[2] lease TTL in ms
-- ARGV[3] limit: how many holders at once (kind x; 1 = exclusive)
-- ARGV[4] holder info, JSON (host, pid, cmd)
-- ARGV[5] '1': join or stay in the wait queue when busy; '0': do not queue
-- ARGV[6] waiter lease in ms: a queued caller that does not call again
--         (here or in wait.lua) within it is dropped from the queue
-- ARGV[7] '1': only re-enter; if the token does not hold the lock, change
--         nothing and return {NOT_HELD}
-- ARGV[8] mode: 'x' (exclusive/semaphore), 'r' (read) or 'w' (write)
-- ARGV[9] request id: the same for every resend of one call, new for the
--         next call (see "Resends" below)
-- ARGV[10] fence floor: a new grant's fence is above it. RedLock sends the
--         highest value any master has shown it (see src/lock/quorum/); one
--         Redis sends '0'
-- ARGV[11] min-hold in ms ('0': none): the lease of a new grant lasts at
--         least this long after the grant, whenever it is released (see
--         release.lua)
-- ARGV[12] how long (ms) a re-entry's request record KEYS[10] is kept:
--         longer than the client may resend
-- ARGV[13] --supersede ("newest wins", see "Supersede" below): '0' no;
--         '1' yes, this token's first call; '2' yes, a later call
-- ARGV[14] how long (ms) the caller has waited so far (for the history's
--         `granted` event)
-- ARGV[15] --priority: an integer from -1000 to 1000 ('0' the default);
--         a waiter with a higher one is served first (see "Priority")
-- ARGV[16] the lock's name for the index of locks in use, ARGV[17] how
--         long (ms) its entry must last (as index.lua's ARGV[1], ARGV[2]),
--         when KEYS[11] and KEYS[12] are the index shard and its list of
--         locks with history (as index.lua's KEYS): then every reply that
--         is not an error touches the entry in this call (index_touch,
--         lua/part/touch.lua; one server, Sentinel, a RedLock master).
--         Without them (a Cluster, where the shard lives in another slot)
--         index.lua follows the call instead
-- ARGV[18] history cap, ARGV[19] history retention in ms (see common.lua:
--         always the last two)
--
-- Returns one of (names as in common.lua)
--   {GRANTED, fence, count, wake..., hint...}   count > 1 means re-entered;
--                               hint: see "Next in line" below
--   {BUSY, wait_ms, position, holder_info, holder_since_ms, holders,
--    fence, holder_ttl_ms, holder_id, wake...}
--                               wait_ms is when the first lease of a
--                               holder or another waiter ends (0 if none),
--                               position is the caller's place in the queue
--                               (0 = next in line), fence is the last
--                               fencing value as kept (0 if none);
--                               holder_ttl_ms is the first holder's lease
--                               time left and holder_id a fingerprint of
--                               its token (a sha1 prefix, '' if nobody
--                               holds), for wait.lua to notice a change
--   {SUPERSEDED, by_info}       --supersede: a newer --supersede waiter
--                               (by_info, JSON) replaced the caller
--   {OTHER_LIMIT, limit}        the lock is in use with another limit
--   {NOT_HELD}                  re-entry only, and the token holds nothing
--   {OTHER_KIND, kind}          the lock is in use as another kind ('x'/'rw')
--   {NO_UPGRADE}                a reader asked to re-enter as a writer
-- `wake...`: tokens of other waiters that may now take the lock, for the
-- client to wake (common.lua).
--
-- Next in line: a grant made while others wait (the slow path only; the
-- fast path has nobody waiting) ends its reply with hints, '^' .. token
-- for the queue's head and '^~' .. token for the waiter after it: whom
-- to_wake (common.lua) names when an exclusive lock is released, the head
-- to wake and the one after it as the scout. A wake token never starts
-- with '^' (a UUID, or '~' and a UUID): a parser that does not know hints
-- tells them apart, and one that does not filter them pushes to a list
-- nobody reads, which expires. The holder keeps them with its lease and
-- its release declares their wake-up lists, so that release.lua wakes
-- them in its own call when to_wake names them (see release.lua). Only
-- a hint: to_wake decides whom a release wakes, and a stale one (that
-- waiter gave up, or another went ahead) is not used.
--
-- Resends: a client whose reply was lost (a timeout, a dropped connection,
-- a failover) cannot know whether the script ran, so it sends the same
-- call again with the same token and request id.
-- - A fresh acquire uses a token nobody else has: if that token holds the
--   lock already, it is this call's own earlier grant, returned with its
--   lease made to run at least TTL from now: the client counts the lease
--   from this call's send, and after an outage longer than the resends it
--   asks again with the same token (src/lock/node/acquire.rs), long after the
--   grant (its lease counted from the grant, the client would rely on the
--   lock after the server had let it go).
-- - A re-entry (ARGV[7] = '1') shares its token with the enclosing holder
--   and with sibling re-entries running at the same time, so it is known
--   by its request id instead: it leaves P{K}:r:<request id> holding the
--   count it produced, and a resend finds it there and counts nothing more.
-- - A call that only queued changes nothing when repeated (the queue is
--   keyed by token).
-- So every acquire may be sent any number of times.
--
-- Supersede ("newest wins", a CI queue that deploys only the latest
-- commit): at most one --supersede waiter is queued per lock, named by
-- STATE field 'sup' (a token; stale once that token left the queue, so it
-- is always checked against the queue). A --supersede caller joining the
-- queue for the first time (ARGV[13] = '1') removes the one queued before
-- it, leaves it the marker 'x:<its token>' = the newcomer's info, and
-- returns it to be woken; the removed waiter's next call (at once when
-- woken, else at its next heartbeat, which finds its place gone) finds the
-- marker and gets SUPERSEDED. A later call (ARGV[13] = '2') of a waiter
-- that lost its place (it missed heartbeats) and finds another
-- --supersede waiter queued is older than that one, so it is superseded
-- too. Holders are never touched. Everything here is in the slow path:
-- an uncontended acquire of a free lock pays nothing for it.
--
-- Priority (--priority P): a waiter's score in the queue (and in P{K}:qw)
-- is its priority band, then its arrival: -P * PRIO_BAND + n, n from the
-- counter 'qn' in the state hash (one more per join). A higher priority
-- is a lower score, served first; equal priorities keep arrival order;
-- priority 0 scores 1, 2, 3..., its arrival order alone. may_enter, to_wake
-- and first_writer in common.lua compare these scores as they compared
-- arrival orders, so a reader queued at a higher priority than the first
-- waiting writer goes before it, one at a lower priority behind it.
-- Holders are never pre-empted: the score orders waiters only. A steady
-- stream of higher priorities starves a lower one (its -w bounds its
-- wait). Scores stay below 1e14 in size (|P| <= 1000, n < PRIO_BAND), so
-- they pass through Lua numbers and '(' .. score exactly (%.14g).
local PRIO_BAND = 1e10

-- A waiter's info as kept for `status` (STATE field 'q:<token>'): the
-- holder info the client sent (its command is cut to 200 characters and
-- redacted there, src/redact), or, past WAITER_INFO_MAX bytes (a long
-- `set` of locks), only its host, pid, user, command and CI job, so that
-- a queue costs at most that much memory per waiter.
local WAITER_INFO_MAX = 1024
local function waiter_info(info)
  if #info <= WAITER_INFO_MAX then return info end
  local ok, t = pcall(cjson.decode, info)
  if not ok or type(t) ~= 'table' then return '' end
  local keep = {host = t.host, pid = t.pid, user = t.user, cmd = t.cmd, ci = t.ci}
  local out = cjson.encode(keep)
  if #out <= WAITER_INFO_MAX then return out end
  out = cjson.encode({host = t.host, pid = t.pid, user = t.user})
  return #out <= WAITER_INFO_MAX and out or ''
end
--@num
--@log
--@open
--@touch
local tok, ttl, limit, mode = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[8]
local kind = (mode == 'x') and 'x' or 'rw'
local now, now_s = clock_ms()

-- The index touch of a reply that is not an error (see ARGV[16]): after
-- every write of the lock's, through pcall, so that neither a shard key of
-- another type nor anything else of the index's fails the acquire (as
-- index.lua's own call would not: best effort, docs/internals.md).
local function touch()
  if KEYS[12] then
    index_touch(redis.pcall, now, KEYS[11], KEYS[12], ARGV[16], tonumber(ARGV[17]) or 0,
      tonumber(ARGV[#ARGV]) or 604800000)
  end
end

-- A new grant: returns its fence, or nil and an error reply.
--
-- The fence is one more than the last one while that is kept, the
-- server's clock (ms) when it is not (the first grant, or one after the
-- lock was idle), and above the floor (ARGV[10]). The last value is kept
-- until its grant's lease ends and the clock has passed it (the SET
-- below), so fences never go down (docs/guide.md, "Fencing tokens").
--
-- The fence key is read, and the holders key written, before anything
-- else is written: a key of another type stops the script there. That
-- first write is one Redis refuses at maxmemory (ZADD), so the fast path
-- grants nothing at maxmemory (see common.lua). `e`: the history's expiry
-- deadline as open_grants read it (nil: log_event reads it).
local function grant(e)
  local v = redis.call('GET', KEYS[5])
  local last = tonumber(v)
  if v and not last then
    return nil, redis.error_reply('ERR value is not an integer: the fencing key ' .. KEYS[5])
  end
  if v and redis.pcall('PTTL', KEYS[5]) == -1 then -- not ours: see common.lua
    return nil, redis.error_reply('NOTRLOCK key ' .. KEYS[5] .. ' holds data rlock did not write')
  end
  local fence = last and last + 1 or now
  -- ('0', the usual floor and min-hold, is not parsed: tonumber calls strtod)
  local floor = ARGV[10] ~= '0' and tonumber(ARGV[10]) or 0
  if fence <= floor then fence = floor + 1 end
  -- (Numbers go to Redis as strings: lua/part/num.lua.)
  local fence_s = fence == now and now_s or int(fence)
  -- The history's `granted` event (log_event, lua/part/log.lua): the
  -- grant is open until an end event counts it (open_grants). The RPUSH
  -- is the first write: at maxmemory, or on a P{K}:log rlock did not
  -- write (not a list), the script stops before anything is written.
  log_event(now, 'granted', fence_s, ARGV[4], {'w', tonumber(ARGV[14]) or 0}, e)
  redis.call('ZADD', KEYS[2], int(now + ttl), tok)
  local fields = {'kind', kind, 'c:' .. tok, '1', 'i:' .. tok, ARGV[4], 's:' .. tok, now_s,
    'f:' .. tok, fence_s}
  local function add(k, x) fields[#fields + 1] = k; fields[#fields + 1] = x end
  local min_hold = ARGV[11] ~= '0' and tonumber(ARGV[11]) or 0
  if min_hold > 0 then add('u:' .. tok, int(now + min_hold)) end
  if kind == 'x' then
    add('limit', int(limit))
  else
    add('m:' .. tok, mode)
    if mode == 'w' then add('writer', tok) end
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  redis.call('SET', KEYS[5], fence_s, 'PX', int(math.max(ttl, fence - now + 1)))
  return fence
end

-- Fast path, before the prelude (see build.rs): a fresh acquire
-- of a lock nobody holds or waits for. Its state keys are gone (see
-- common.lua): nothing to prune, queue or wake. (A zset without the hash
-- is not rlock's: the slow path refuses it.) A grant still open in the
-- history's counters (its state ran out unnoticed) takes the slow path,
-- which records it as expired first (settle in common.lua). The HMGET
-- of open_grants reads P{K}:n (a key of another type stops the script
-- there), and the history's expiry deadline with it.
if ARGV[7] ~= '1' and redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6]) == 0 then
  local open, e = open_grants()
  if open <= 0 then
    local fence, bad = grant(e)
    if bad then return bad end
    local ttl_s = int(ttl)
    redis.call('PEXPIRE', KEYS[1], ttl_s)
    redis.call('PEXPIRE', KEYS[2], ttl_s)
    touch()
    return {1, fence, 1}
  end
end

-- The rest runs as one function, `slow` (its body is not indented), so
-- that every reply it returns passes the index touch below; the prelude
-- goes in inside it, as locals (a Lua function has at most 60 upvalues).
local function slow()
--@common

-- The lock is held, waited for, or was until its leases ran out.
local cur_kind, foreign, remains = lock_kind()
if foreign then return foreign end
-- At maxmemory: refused here, nothing written (see common.lua).
refuse_at_maxmemory()
-- A damaged lock (its state hash deleted by hand) holds nothing: its
-- remains go, and it is taken as a free one.
clear_remains(remains)
-- The sizes of the holders and of the queue as they are now (`queued`
-- nil: unknown), for the reads below until a write changes them.
local queued = prune(now)
local holders = redis.call('ZCARD', HOLDERS)
settle(now, true, holders)
local supersede = ARGV[13] or '0'
if supersede ~= '0' then
  local by = redis.call('HGET', STATE, 'x:' .. tok)
  if by then
    redis.call('HDEL', STATE, 'x:' .. tok)
    return {SUPERSEDED, by}
  end
end
local in_use = holders > 0 or (queued or redis.call('ZCARD', QUEUE)) > 0
if cur_kind and cur_kind ~= kind and in_use then
  -- An exclusive lock is a write lock: flock(1)'s shared and exclusive
  -- locks on one file work together, so `rlock exec -s K` (a read) and
  -- `rlock exec K` do too. A semaphore and a read-write lock do not mix.
  if kind == 'x' and limit == 1 and cur_kind == 'rw' then
    kind, mode = 'rw', 'w'
  elseif kind == 'rw' and cur_kind == 'x'
      and tonumber(redis.call('HGET', STATE, 'limit')) == 1 then
    -- Turn the exclusive lock in use into a write lock: its holder is the
    -- writer, its waiters wait as writers, in their order.
    local bad = check_types()
    if bad then return bad end
    redis.call('HSET', STATE, 'kind', 'rw')
    redis.call('HDEL', STATE, 'limit')
    for _, h in ipairs(redis.call('ZRANGE', HOLDERS, 0, -1)) do
      redis.call('HSET', STATE, 'm:' .. h, 'w', 'writer', h)
    end
    local q = redis.call('ZRANGE', QUEUE, 0, -1, 'WITHSCORES')
    for i = 1, #q, 2 do
      redis.call('ZADD', WRITERS, q[i + 1], q[i])
    end
    -- P{K}:qw may be new: it expires with the rest now, whatever path
    -- returns (a re-entry may end below without tidying). Left without an
    -- expiry, a waiter that dies stays a waiting writer for ever, and every
    -- reader of this lock name queues behind it.
    tidy(now)
  else
    return {OTHER_KIND, cur_kind}
  end
end

local exp = redis.call('ZSCORE', HOLDERS, tok)
if exp then
  -- Re-entry. A writer may nest reads and writes; a reader only reads: an
  -- upgrade would wait for itself.
  local held = redis.call('HMGET', STATE, 'm:' .. tok, 'f:' .. tok, 'c:' .. tok, 'k:' .. tok)
  if ARGV[7] == '1' and (held[3] == '0' or held[4]) then
    -- Released, parked until its min-hold ends (release.lua): a late
    -- re-entry must not take back what its holder gave up. Being broken
    -- (break.lua): nothing may extend it.
    return {NOT_HELD}
  end
  if mode == 'w' and held[1] == 'r' then
    return {NO_UPGRADE}
  end
  local fence = tonumber(held[2]) or 0
  if ARGV[7] ~= '1' then
    -- A fresh acquire's token holds it: a resend of the call that made
    -- this grant, which may come long after it (see "Resends"): the lease
    -- runs TTL from now, as the client counts it. (Never shortened; a
    -- parked hold, released, stays as it is.)
    if held[3] ~= '0' and not held[4] and now + ttl > tonumber(exp) then
      redis.call('ZADD', HOLDERS, now + ttl, tok)
      tidy(now)
    end
    return {GRANTED, fence, tonumber(held[3])}
  end
  local done = redis.call('GET', KEYS[10])
  if done then
    return {GRANTED, fence, tonumber(done)} -- a resend of this re-entry
  end
  local n = redis.call('HINCRBY', STATE, 'c:' .. tok, 1)
  redis.call('SET', KEYS[10], n, 'PX', tonumber(ARGV[12]) or 10000)
  if now + ttl > tonumber(exp) then
    redis.call('ZADD', HOLDERS, now + ttl, tok)
    tidy(now)
  end
  return {GRANTED, fence, n}
end
if ARGV[7] == '1' then
  return {NOT_HELD}
end

-- Checked after re-entry: a nested holder re-enters whatever it asked for.
local cur = tonumber(redis.call('HGET', STATE, 'limit'))
if kind == 'x' and cur and cur ~= limit and in_use then
  return {OTHER_LIMIT, cur}
end

local superseded = {}
if supersede ~= '0' and ARGV[5] == '1' then
  queued = nil -- (it may leave the queue, or remove another waiter)
  -- It writes before grant() reads the fence key: check types first.
  local bad = check_types()
  if bad then return bad end
  local older = redis.call('HGET', STATE, 'sup')
  if older and older ~= tok and redis.call('ZSCORE', QUEUE, older) then
    if supersede == '1' and not redis.call('ZSCORE', QUEUE, tok) then
      leave_queue(older)
      redis.call('HSET', STATE, 'x:' .. older, ARGV[4])
      superseded[1] = older
      log_event(now, 'superseded', 0, redis.call('HGET', STATE, 'supi') or '',
        {'by', user_at_host(ARGV[4])})
    else
      leave_queue(tok)
      local by = redis.call('HGET', STATE, 'supi') or ''
      log_event(now, 'superseded', 0, ARGV[4], {'by', user_at_host(by)})
      return {SUPERSEDED, by}
    end
  end
  redis.call('HSET', STATE, 'sup', tok, 'supi', ARGV[4])
end

-- The hints of a grant (see "Next in line"): appended to its reply.
local function with_hints(reply)
  local q = redis.call('ZRANGE', QUEUE, 0, 1)
  if q[1] then reply[#reply + 1] = '^' .. q[1] end
  if q[2] then reply[#reply + 1] = '^~' .. q[2] end
  return reply
end

local rank = redis.call('ZRANK', QUEUE, tok)
redis.call('DEL', KEYS[9])
if may_enter(kind, mode, limit, tok, rank, holders, queued) then
  local fence, bad = grant()
  if bad then return bad end
  leave_queue(tok)
  local wake = with_wake(to_wake(tok, now), superseded)
  tidy(now)
  return with_hints(with_wake({GRANTED, fence, 1}, wake))
end

local position = rank or queued or redis.call('ZCARD', QUEUE)
if ARGV[5] == '1' then
  if not rank then
    -- Joining creates the queue keys: check their types first.
    local bad = check_types()
    if bad then return bad end
    -- Its score: priority band, then arrival (see "Priority" above). A
    -- queue of an earlier release scores its waiters 1, 2, 3... and keeps
    -- no counter: a new counter starts past them.
    local n = redis.call('HINCRBY', STATE, 'qn', 1)
    if n == 1 then
      -- (ZRANGE BYSCORE REV, Redis 6.2: a command the documented ACL
      -- line allows, unlike ZREVRANGEBYSCORE)
      local last = redis.call('ZRANGE', QUEUE, '(' .. PRIO_BAND, 0, 'BYSCORE', 'REV',
        'LIMIT', 0, 1, 'WITHSCORES')
      if last[2] then
        n = tonumber(last[2]) + 1
        redis.call('HSET', STATE, 'qn', n)
      end
    end
    local prio = math.floor(math.max(-1000, math.min(1000, tonumber(ARGV[15]) or 0)))
    local seq = -prio * PRIO_BAND + n
    redis.call('ZADD', QUEUE, seq, tok)
    if mode == 'w' then redis.call('ZADD', WRITERS, seq, tok) end
    -- 'a:<token>': when it joined (server ms), for `top` and `metrics`
    -- (the oldest wait, lua/status.lua); 'q:<token>': who waits, for
    -- `status`, `list` and `top`. leave_queue() removes both, so they go
    -- with the waiter's lease (prune), and the hash's PEXPIRE (tidy)
    -- covers every waiter lease.
    if kind == 'x' then
      redis.call('HSET', STATE, 'kind', kind, 'limit', limit, 'a:' .. tok, now,
        'q:' .. tok, waiter_info(ARGV[4]))
    else
      redis.call('HSET', STATE, 'kind', kind, 'a:' .. tok, now, 'q:' .. tok, waiter_info(ARGV[4]))
    end
  end
  redis.call('ZADD', ALIVE, now + tonumber(ARGV[6]), tok)
  if not rank then
    -- A higher priority may have placed it ahead of waiters that were
    -- woken to a free place but have not come to take it yet: then the
    -- place is its own now (they find themselves behind it, and wait).
    -- At the tail, as every priority-0 newcomer, this is the may_enter
    -- above again, and false.
    local now_rank = redis.call('ZRANK', QUEUE, tok)
    if now_rank < position and may_enter(kind, mode, limit, tok, now_rank, holders) then
      local fence, bad = grant()
      if bad then return bad end
      leave_queue(tok)
      local wake = with_wake(to_wake(tok, now), superseded)
      tidy(now)
      return with_hints(with_wake({GRANTED, fence, 1}, wake))
    end
    position = now_rank
  end
elseif rank then
  leave_queue(tok)
end
-- (Joining and leaving the queue change none of the holders.)
local wake = with_wake(to_wake(tok, now, nil, holders), superseded)
tidy(now)

-- Nothing can change for the caller before the first holder's lease or
-- another waiter's lease ends (a dead waiter ahead is then skipped), unless
-- someone wakes it. A waiter ahead that was woken to take the lock has only
-- a claim left (to_wake in common.lua, just above for the waiters this
-- call names): the caller, a scout or a newcomer, looks again when that
-- ends, and finds the claimant holding the lock or pruned. A claimant that
-- calls here while its claim runs still has its place (may_enter above):
-- it takes the lock, and the ZADD above gives it back a full waiter lease
-- if it cannot (only a prune removes a queued token; nothing else grants).
local first = redis.call('ZRANGE', HOLDERS, 0, 0, 'WITHSCORES')
local wait_ms, info, since, holder_id = 0, '', 0, ''
if first[1] then
  wait_ms = tonumber(first[2]) - now
  holder_id = holder_fingerprint(first[1])
  local h = redis.call('HMGET', STATE, 'i:' .. first[1], 's:' .. first[1])
  info, since = h[1] or '', tonumber(h[2]) or 0
end
local holder_ttl = first[1] and wait_ms or 0
local alive = redis.call('ZRANGE', ALIVE, 0, 1, 'WITHSCORES')
for i = 1, #alive, 2 do
  local left = tonumber(alive[i + 1]) - now
  if alive[i] ~= tok and (wait_ms == 0 or left < wait_ms) then wait_ms = left end
end
-- (`holders`: nothing since changed P{K}:h; tidy deletes it only when
-- no lease is left in it)
return with_wake({BUSY, wait_ms, position, info, since, holders,
  tonumber(redis.call('GET', FENCE)) or 0, holder_ttl, holder_id}, wake)
end

local reply = slow()
if not reply.err then touch() end
return reply
