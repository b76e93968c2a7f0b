-- history.lua: the last events of a lock, oldest first, read-only (sent
-- with EVALSHA_RO where the server has it: a monitor user with read-only
-- key access runs it). Leases that ran out unnoticed are not recorded
-- here: the entries lua/settle.lua would record for them now (prune and
-- settle in common.lua, with the same fences, holders and times) are
-- added to the reply, and their number is its first element, so that a
-- client that may write sends settle.lua to record them.
--
-- KEYS[1..8] as in common.lua
-- ARGV[1] how many events at most
-- ARGV[2] history cap, ARGV[3] history retention in ms (see common.lua)
--
-- Returns {unsettled, entry...}: unsettled the number of entries computed
-- here and not written, then the last ARGV[1] entries (see log_event in
-- common.lua), oldest first. With a cap of 0 no entry is kept: the
-- computed ones are counted, not listed.
--@common
local _, foreign = lock_kind()
if foreign then return foreign end
local now = clock_ms()
local cap = tonumber(ARGV[#ARGV - 1]) or 200
local pending = {}
local function pend(fence, info, fields)
  pending[#pending + 1] = cjson.encode({now, 'expired', tostring(fence or 0), info or '',
    unpack(fields or {})})
end
-- prune(now): the holders whose lease ran out with their grant still
-- open; their fences count as ended for settle below.
local ended, pruned = {}, 0
local state = redis.call('EXISTS', STATE) == 1
if state then
  local gone = redis.call('ZRANGEBYSCORE', HOLDERS, '-inf', now, 'WITHSCORES')
  for j = 1, #gone, 2 do
    local tok = gone[j]
    local h = redis.call('HMGET', STATE, 'c:' .. tok, 'f:' .. tok, 's:' .. tok, 'i:' .. tok)
    if h[1] ~= '0' then
      local d = h[3] and {'d', math.max(tonumber(gone[j + 1]) - tonumber(h[3]), 0)}
      pend(h[2] or 0, h[4] or '', d)
      pruned = pruned + 1
      ended[tostring(h[2] or 0)] = true
    end
  end
end
-- settle(now, false): the open grants no live holder has, less those
-- just pruned (open_grants as it would count after prune's events).
-- (Without the state hash prune does not run: every member left counts,
-- as gone_grants counts a damaged lock's remains.)
local holders
if state then
  holders = redis.call('ZRANGEBYSCORE', HOLDERS, '(' .. now, '+inf')
else
  holders = redis.call('ZRANGE', HOLDERS, 0, -1)
end
local live, held = {}, 0
for _, tok in ipairs(holders) do
  local h = redis.call('HMGET', STATE, 'c:' .. tok, 'f:' .. tok)
  if h[1] ~= '0' then
    held = held + 1
    if h[2] then live[h[2]] = true end
  end
end
local n = redis.call('HMGET', STATS, 'grants', 'released', 'overruns', 'expired', 'closed')
local open = tonumber(n[1]) or 0
for i = 2, 5 do open = open - (tonumber(n[i]) or 0) end
local count = math.max(open - pruned, 0) - held
if count > 0 then
  for f in pairs(ended) do live[f] = true end
  local found = open_entries(count, live)
  for i = count, 1, -1 do
    local e = found[i] or {0, ''}
    pend(e[1], e[2])
  end
end
local want = tonumber(ARGV[1]) or 20
local out = {#pending}
if want < 1 then return out end
local shown = cap > 0 and pending or {}
local old = want - #shown
if old > 0 then
  for _, e in ipairs(redis.call('LRANGE', LOG, -old, -1)) do out[#out + 1] = e end
end
for i = math.max(#shown - want + 1, 1), #shown do out[#out + 1] = shown[i] end
return out
