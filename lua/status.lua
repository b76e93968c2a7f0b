-- status.lua: read a lock's state without changing it.
--
-- KEYS[1..8] as in common.lua
-- KEYS[9] P{K}:lost, where an `acquire --keep` keeper records a loss
-- KEYS[10] P{K}:rw, RedLock's waiters (lua/redlock_wait.lua), if given
--
-- Returns {kind, limit, fence, waiters, waiting_writers, lost,
-- oldest_wait_since, remains, queue, holder...}, lost being the loss record (JSON, '' if
-- none), oldest_wait_since when the earliest waiter still queued joined
-- (server ms; 0 if nobody waits, or they joined before rlock kept that;
-- not the head of the queue, which --priority may change) and each holder
-- {info_json, since_ms, ttl_left_ms, count, fence, mode, token_digest,
-- cmd_pid, breaking}, breaking being break.lua's mark of a hold being
-- broken (JSON {by, reason, at}) or '', token_digest the SHA-1 of the holder's token in hex (the same
-- on every RedLock master; never the token itself). remains lists the
-- keys of a damaged lock (its state hash deleted by hand, see lock_kind
-- in common.lua), empty for a sound one: such a lock has no holders or
-- waiters (the next writer clears the remains), and this returns them
-- alone.
-- kind is '' and limit 0 when nobody holds or waits for the lock; mode is
-- 'r' or 'w' for a read-write lock, '' otherwise; cmd_pid is the pid of
-- the command the holder runs (exec, rw) once a renewal noted it, else ''. Leases and waiters that
-- have run out by the server's clock are left out.
-- queue lists the live waiters in queue order (priority, then arrival),
-- the first QUEUE_SHOWN of them, each {info_json, since_ms, score,
-- token_digest, writer}: info as the waiter sent it ('' if it joined
-- before rlock kept it), since when it joined (0: unknown), score its
-- place in the queue (priority band and arrival, see "Priority" in
-- acquire.lua), writer 1 for a waiting writer, else 0. RedLock's waiters
-- (KEYS[10]) follow the queued ones, those whose deadline has not passed,
-- each with score 0 (priority 0: no place in any queue) and its waiter
-- id's digest for token_digest; they count in waiters and the oldest
-- wait, and make a lock nobody holds 'x' with limit 1 (RedLock takes
-- exclusive locks only).
--@common
local _, foreign, remains = lock_kind()
if foreign then return foreign end
if remains then
  return {'', 0, tonumber(redis.call('GET', FENCE)) or 0, 0, 0,
    redis.call('GET', KEYS[9]) or '', 0, remains, {}}
end
local now = clock_ms()
local writers = 0
for _, tok in ipairs(redis.call('ZRANGE', WRITERS, 0, -1)) do
  local alive = redis.call('ZSCORE', ALIVE, tok)
  if alive and tonumber(alive) > now then writers = writers + 1 end
end
local out = {
  redis.call('HGET', STATE, 'kind') or '',
  tonumber(redis.call('HGET', STATE, 'limit')) or 0,
  tonumber(redis.call('GET', FENCE)) or 0,
  redis.call('ZCOUNT', ALIVE, '(' .. now, '+inf'),
  writers,
  redis.call('GET', KEYS[9]) or '',
  0,
  {},
  {},
}
-- The queue is in priority order (--priority), so the longest wait is the
-- earliest join among the live waiters; waiters that stopped calling in
-- are skipped (they are pruned by the next acquire).
for _, tok in ipairs(redis.call('ZRANGEBYSCORE', ALIVE, '(' .. now, '+inf')) do
  local a = tonumber(redis.call('HGET', STATE, 'a:' .. tok))
  if a and (out[7] == 0 or a < out[7]) then out[7] = a end
end
local QUEUE_SHOWN = 100
local q = redis.call('ZRANGE', QUEUE, 0, -1, 'WITHSCORES')
for i = 1, #q, 2 do
  if #out[9] >= QUEUE_SHOWN then break end
  local tok = q[i]
  local alive = redis.call('ZSCORE', ALIVE, tok)
  if alive and tonumber(alive) > now then
    local f = redis.call('HMGET', STATE, 'q:' .. tok, 'a:' .. tok)
    out[9][#out[9] + 1] = {f[1] or '', tonumber(f[2]) or 0, q[i + 1], redis.sha1hex(tok),
      redis.call('ZSCORE', WRITERS, tok) and 1 or 0}
  end
end
local hs = redis.call('ZRANGEBYSCORE', HOLDERS, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #hs, 2 do
  local tok = hs[i]
  local fence = tonumber(redis.call('HGET', STATE, 'f:' .. tok)) or 0
  out[#out + 1] = {
    redis.call('HGET', STATE, 'i:' .. tok) or '',
    tonumber(redis.call('HGET', STATE, 's:' .. tok)) or 0,
    tonumber(hs[i + 1]) - now,
    tonumber(redis.call('HGET', STATE, 'c:' .. tok)) or 0,
    fence,
    redis.call('HGET', STATE, 'm:' .. tok) or '',
    redis.sha1hex(tok),
    redis.call('HGET', STATE, 'p:' .. tok) or '',
    redis.call('HGET', STATE, 'k:' .. tok) or '',
  }
  -- The fence key lasts for its grant's TTL (see grant() in acquire.lua);
  -- a holder that renewed outlives it, and its fence is still the last.
  if fence > out[3] then out[3] = fence end
end
if KEYS[10] then
  -- (pcall: a key of another type is not ours, and shows no waiter.)
  local rw = redis.pcall('HGETALL', KEYS[10])
  for i = 1, rw.err and 0 or #rw, 2 do
    local d, s, info = string.match(rw[i + 1], '^(%d+):(%d+):(.*)$')
    s = tonumber(s) or 0
    if (tonumber(d) or 0) > now then
      out[4] = out[4] + 1
      if s > 0 and (out[7] == 0 or s < out[7]) then out[7] = s end
      if #out[9] < QUEUE_SHOWN then
        out[9][#out[9] + 1] = {info, s, '0', redis.sha1hex(rw[i]), 0}
      end
    end
  end
  if out[1] == '' and out[4] > 0 then
    out[1], out[2] = 'x', 1
  end
end
return out
