-- acquire.lua: grant the lock to a token, let its holder re-enter, or queue
-- the caller behind earlier waiters (FIFO).
--
-- KEYS[1..6] as in common.lua (KEYS[6] is the caller's own wake-up list)
-- ARGV[1] token (UUIDv4)
-- ARGV[2] lease TTL in ms
-- ARGV[3] limit: how many holders at once (1 = exclusive)
-- ARGV[4] holder info, JSON (host, pid, cmd)
-- ARGV[5] '1': join or stay in the wait queue when busy; '0': do not queue
-- ARGV[6] waiter lease in ms: a queued caller that does not call again
--         within it is dropped from the queue
-- ARGV[7] '1': only re-enter; if the token does not hold the lock, change
--         nothing and return {-2}
--
-- Returns one of
--   {1, fence, count}           granted; count > 1 means re-entered
--   {0, wait_ms, position, holder_info, holder_since_ms, holders}
--                               busy: wait_ms is when the first lease ends
--                               (0 if no holder), position is the caller's
--                               place in the queue (0 = next in line)
--   {-1, limit}                 the lock is in use with another limit
--   {-2}                        re-entry only, and the token holds nothing
local tok, ttl, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local bad = check_types()
if bad then return bad end
local now = now_ms()
prune(now)

local exp = redis.call('ZSCORE', HOLDERS, tok)
if exp then
  local n = redis.call('HINCRBY', STATE, 'c:' .. tok, 1)
  if now + ttl > tonumber(exp) then
    redis.call('ZADD', HOLDERS, now + ttl, tok)
  end
  tidy(now)
  return {1, tonumber(redis.call('HGET', STATE, 'f:' .. tok)) or 0, n}
end
if ARGV[7] == '1' then
  return {-2}
end

-- Checked after re-entry: a nested holder re-enters whatever it asked for.
local cur = tonumber(redis.call('HGET', STATE, 'limit'))
if cur and cur ~= limit
  and (redis.call('ZCARD', HOLDERS) > 0 or redis.call('ZCARD', QUEUE) > 0) then
  return {-1, cur}
end

local free = limit - redis.call('ZCARD', HOLDERS)
local rank = redis.call('ZRANK', QUEUE, tok)
local ahead = rank or redis.call('ZCARD', QUEUE)
redis.call('DEL', KEYS[6])
if ahead < free then
  leave_queue(tok)
  local fence = redis.call('INCR', FENCE)
  redis.call('ZADD', HOLDERS, now + ttl, tok)
  redis.call('HSET', STATE, 'limit', limit, 'c:' .. tok, 1, 'i:' .. tok, ARGV[4],
    's:' .. tok, now, 'f:' .. tok, fence)
  wake(limit)
  tidy(now)
  return {1, fence, 1}
end

if ARGV[5] == '1' then
  if not rank then
    local last = redis.call('ZRANGE', QUEUE, -1, -1, 'WITHSCORES')
    redis.call('ZADD', QUEUE, (tonumber(last[2]) or 0) + 1, tok)
  end
  redis.call('ZADD', ALIVE, now + tonumber(ARGV[6]), tok)
  redis.call('HSET', STATE, 'limit', limit)
elseif rank then
  leave_queue(tok)
end
wake(limit)
tidy(now)

local first = redis.call('ZRANGE', HOLDERS, 0, 0, 'WITHSCORES')
local wait_ms, info, since = 0, '', 0
if first[1] then
  wait_ms = tonumber(first[2]) - now
  info = redis.call('HGET', STATE, 'i:' .. first[1]) or ''
  since = tonumber(redis.call('HGET', STATE, 's:' .. first[1])) or 0
end
return {0, wait_ms, ahead, info, since, redis.call('ZCARD', HOLDERS)}
