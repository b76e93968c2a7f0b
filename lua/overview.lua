-- overview.lua: one lock at a glance, for `top` and `metrics`
-- (src/lock/overview.rs): what status.lua returns, plus its history's
-- counters, last event and the events of the last ARGV[1] ms. Read-only.
--
-- No prelude (no `--@common` line, see build.rs): `top` runs this for
-- every lock in use every second, and the prelude's closures would cost
-- the server more than the reads. So keys are named by number, and the
-- lock's hash is read once (HGETALL) instead of field by field. Data
-- rlock did not write is not checked for as status.lua does: a hash
-- without a 'kind' is skipped, and a key of another type fails the call,
-- which the client skips too; nothing is written either way.
--
-- KEYS[1..8] as in common.lua (KEYS[7] P{K}:log, KEYS[8] P{K}:n)
-- KEYS[9] P{K}:lost, where an `acquire --keep` keeper records a loss
-- ARGV[1] the window for recent events, in ms
--
-- Returns {} when nobody holds or waits for the lock, else
-- {status, now_ms, counters, last, recent}: status exactly as status.lua
-- returns it, counters P{K}:n's fields and values (flat), last and recent
-- XREVRANGE replies (the last event; the events of the window).
local kind = redis.call('HGET', KEYS[1], 'kind')
if kind ~= 'x' and kind ~= 'rw' then return {} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hs = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
local alive = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf')
if #hs == 0 and #alive == 0 then return {} end
local f = {}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
local writers, oldest = 0, 0
if #alive > 0 then
  local live = {}
  for _, tok in ipairs(alive) do live[tok] = true end
  -- The queue is in arrival order: the first live waiter waited longest.
  for _, tok in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    if live[tok] then
      oldest = tonumber(f['a:' .. tok]) or 0
      break
    end
  end
  for _, tok in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
    if live[tok] then writers = writers + 1 end
  end
end
local status = {kind, tonumber(f['limit']) or 0, tonumber(redis.call('GET', KEYS[5])) or 0,
  #alive, writers, redis.call('GET', KEYS[9]) or '', oldest}
for i = 1, #hs, 2 do
  local tok = hs[i]
  local fence = tonumber(f['f:' .. tok]) or 0
  status[#status + 1] = {f['i:' .. tok] or '', tonumber(f['s:' .. tok]) or 0,
    tonumber(hs[i + 1]) - now, tonumber(f['c:' .. tok]) or 0, fence, f['m:' .. tok] or ''}
  -- As in status.lua: a holder that renewed outlives the fence key.
  if fence > status[3] then status[3] = fence end
end
local window = tonumber(ARGV[1]) or 60000
return {status, now, redis.call('HGETALL', KEYS[8]),
  redis.call('XREVRANGE', KEYS[7], '+', '-', 'COUNT', 1),
  redis.call('XREVRANGE', KEYS[7], '+', now - window)}
