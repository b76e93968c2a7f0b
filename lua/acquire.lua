-- acquire.lua: grant the lock to a token, let its holder re-enter, or queue
-- the caller behind earlier waiters (FIFO).
--
-- KEYS[1..7] as in common.lua (KEYS[7] is the caller's own wake-up list)
-- ARGV[1] token (UUIDv4)
-- ARGV[2] lease TTL in ms
-- ARGV[3] limit: how many holders at once (kind x; 1 = exclusive)
-- ARGV[4] holder info, JSON (host, pid, cmd)
-- ARGV[5] '1': join or stay in the wait queue when busy; '0': do not queue
-- ARGV[6] waiter lease in ms: a queued caller that does not call again
--         within it is dropped from the queue
-- ARGV[7] '1': only re-enter; if the token does not hold the lock, change
--         nothing and return {-2}
-- ARGV[8] mode: 'x' (exclusive/semaphore), 'r' (read) or 'w' (write)
-- ARGV[9] request id: the same for every resend of one call, new for the
--         next call (see "Resends" below); KEYS[8] is P{K}:r:<request id>
-- ARGV[10] fence floor: a new grant sets the fencing counter to
--         max(counter + 1, floor + 1). RedLock sends the highest counter
--         any master has shown it (see src/quorum.rs); one Redis sends '0'
--         or '' (no floor: plain INCR)
-- ARGV[11] min-hold in ms ('0' or '': none): the lease of a new grant lasts
--         at least this long after the grant, whenever it is released
--         (see release.lua)
-- ARGV[12] how long (ms) a re-entry's request record KEYS[8] is kept:
--         longer than the client may resend
--
-- Returns one of
--   {1, fence, count}           granted; count > 1 means re-entered
--   {0, wait_ms, position, holder_info, holder_since_ms, holders, counter}
--                               busy: wait_ms is when the first lease of a
--                               holder or another waiter ends (0 if none),
--                               position is the caller's place in the queue
--                               (0 = next in line), counter is the fencing
--                               counter as it stands (0 if never granted)
--   {-1, limit}                 the lock is in use with another limit
--   {-2}                        re-entry only, and the token holds nothing
--   {-3, kind}                  the lock is in use as another kind ('x'/'rw')
--   {-4}                        a reader asked to re-enter as a writer
--
-- Resends: a client whose reply was lost (a timeout, a dropped connection,
-- a failover) cannot know whether the script ran, so it sends the same
-- call again with the same token and request id.
-- - A fresh acquire uses a token nobody else has: if that token holds the
--   lock already, it is this call's own earlier grant, returned unchanged.
-- - A re-entry (ARGV[7] = '1') shares its token with the enclosing holder
--   and with sibling re-entries running at the same time, so it is known
--   by its request id instead: it leaves P{K}:r:<request id> holding the
--   count it produced, and a resend finds it there and counts nothing more.
-- - A call that only queued changes nothing when repeated (the queue is
--   keyed by token).
-- So every acquire may be sent any number of times.
local tok, ttl, limit, mode = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[8]
local kind = (mode == 'x') and 'x' or 'rw'
local bad = check_types()
if bad then return bad end
local now = now_ms()
prune(now)

local in_use = redis.call('ZCARD', HOLDERS) > 0 or redis.call('ZCARD', QUEUE) > 0
local cur_kind = redis.call('HGET', STATE, 'kind')
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
    redis.call('HSET', STATE, 'kind', 'rw')
    redis.call('HDEL', STATE, 'limit')
    for _, h in ipairs(redis.call('ZRANGE', HOLDERS, 0, -1)) do
      redis.call('HSET', STATE, 'm:' .. h, 'w', 'writer', h)
    end
    local q = redis.call('ZRANGE', QUEUE, 0, -1, 'WITHSCORES')
    for i = 1, #q, 2 do
      redis.call('ZADD', WRITERS, q[i + 1], q[i])
    end
  else
    return {-3, cur_kind}
  end
end

local exp = redis.call('ZSCORE', HOLDERS, tok)
if exp then
  -- Re-entry. A writer may nest reads and writes; a reader only reads: an
  -- upgrade would wait for itself.
  if mode == 'w' and redis.call('HGET', STATE, 'm:' .. tok) == 'r' then
    return {-4}
  end
  local fence = tonumber(redis.call('HGET', STATE, 'f:' .. tok)) or 0
  if ARGV[7] ~= '1' then
    -- A fresh acquire's token holds it: a resend of the call that made
    -- this grant.
    return {1, fence, tonumber(redis.call('HGET', STATE, 'c:' .. tok))}
  end
  local done = redis.call('GET', KEYS[8])
  if done then
    return {1, fence, tonumber(done)} -- a resend of this re-entry
  end
  local n = redis.call('HINCRBY', STATE, 'c:' .. tok, 1)
  redis.call('SET', KEYS[8], n, 'PX', tonumber(ARGV[12]) or 10000)
  if now + ttl > tonumber(exp) then
    redis.call('ZADD', HOLDERS, now + ttl, tok)
  end
  tidy(now)
  return {1, fence, n}
end
if ARGV[7] == '1' then
  return {-2}
end

-- Checked after re-entry: a nested holder re-enters whatever it asked for.
local cur = tonumber(redis.call('HGET', STATE, 'limit'))
if kind == 'x' and cur and cur ~= limit and in_use then
  return {-1, cur}
end

local rank = redis.call('ZRANK', QUEUE, tok)
redis.call('DEL', KEYS[7])
if may_enter(kind, mode, limit, tok, rank) then
  leave_queue(tok)
  local fence = redis.call('INCR', FENCE)
  local floor = tonumber(ARGV[10] or '') or 0
  if fence <= floor then
    fence = redis.call('INCRBY', FENCE, floor + 1 - fence)
  end
  redis.call('ZADD', HOLDERS, now + ttl, tok)
  redis.call('HSET', STATE, 'kind', kind, 'c:' .. tok, 1, 'i:' .. tok, ARGV[4],
    's:' .. tok, now, 'f:' .. tok, fence)
  local min_hold = tonumber(ARGV[11] or '') or 0
  if min_hold > 0 then redis.call('HSET', STATE, 'u:' .. tok, now + min_hold) end
  if kind == 'x' then
    redis.call('HSET', STATE, 'limit', limit)
  else
    redis.call('HSET', STATE, 'm:' .. tok, mode)
    if mode == 'w' then redis.call('HSET', STATE, 'writer', tok) end
  end
  wake()
  tidy(now)
  return {1, fence, 1}
end

local position = rank or redis.call('ZCARD', QUEUE)
if ARGV[5] == '1' then
  if not rank then
    local last = redis.call('ZRANGE', QUEUE, -1, -1, 'WITHSCORES')
    local seq = (tonumber(last[2]) or 0) + 1
    redis.call('ZADD', QUEUE, seq, tok)
    if mode == 'w' then redis.call('ZADD', WRITERS, seq, tok) end
  end
  redis.call('ZADD', ALIVE, now + tonumber(ARGV[6]), tok)
  redis.call('HSET', STATE, 'kind', kind)
  if kind == 'x' then redis.call('HSET', STATE, 'limit', limit) end
elseif rank then
  leave_queue(tok)
end
wake()
tidy(now)

-- Nothing can change for the caller before the first holder's lease or
-- another waiter's lease ends (a dead waiter ahead is then skipped), unless
-- someone wakes it.
local first = redis.call('ZRANGE', HOLDERS, 0, 0, 'WITHSCORES')
local wait_ms, info, since = 0, '', 0
if first[1] then
  wait_ms = tonumber(first[2]) - now
  info = redis.call('HGET', STATE, 'i:' .. first[1]) or ''
  since = tonumber(redis.call('HGET', STATE, 's:' .. first[1])) or 0
end
local alive = redis.call('ZRANGE', ALIVE, 0, 1, 'WITHSCORES')
for i = 1, #alive, 2 do
  local left = tonumber(alive[i + 1]) - now
  if alive[i] ~= tok and (wait_ms == 0 or left < wait_ms) then wait_ms = left end
end
return {0, wait_ms, position, info, since, redis.call('ZCARD', HOLDERS),
  tonumber(redis.call('GET', FENCE)) or 0}
