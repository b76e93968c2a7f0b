-- overview.lua: locks at a glance, for `top` and `metrics`
-- (src/lock/overview.rs): for each lock, what status.lua returns, plus its
-- history's counters, last event and the events of the last ARGV[1] ms;
-- and, with ARGV[2] 'list', for `list` (src/lock/node/index.rs): what
-- status.lua returns alone. Read-only.
--
-- Lean, as `top` reads every lock in use every second: several locks per
-- call (on one Redis up to 100, their keys in KEYS; on a Cluster those
-- whose keys share a slot, as a call's keys must), no prelude (no
-- `--@common` line, see build.rs), and few commands per lock (each costs
-- the server a few microseconds from Lua, more than the read itself): the
-- lock's hash is read once (HGETALL), the fence key and a keeper's loss
-- record are read only for `list` (`top` and `metrics` show neither), and
-- the last event comes with the recent ones when there are any. Data
-- rlock did not write is not looked for as status.lua does (no TYPE or
-- PTTL per key): a hash without a 'kind' is skipped, and a key of another
-- type fails the call, which the client then makes again lock by lock
-- (`list`: with status.lua), skipping that one; nothing is written either
-- way.
--
-- Per lock, 9 keys: 8 as in common.lua (7 P{K}:log, 8 P{K}:n), and
-- 9 P{K}:rw, RedLock's waiters (lua/redlock_wait.lua), shown as status.lua
-- shows them; with ARGV[2] 'list', 10: the 10th P{K}:lost, as status.lua's.
-- ARGV[1] the window for recent events, in ms
-- ARGV[2] '1': also the locks nobody holds or waits for that have history
--         counters (`rlock metrics`); 'list': only locks in use, and
--         their status alone, fence key and loss record read (`list`);
--         else only locks in use (`top`)
--
-- With 'list', returns one entry per lock, in KEYS' order: {} when nobody
-- holds or waits for it, else status.lua's reply for it (the same for a
-- lock rlock wrote: the fence the higher of the fence key's and the
-- holders', the loss record read). Otherwise one entry per lock, in
-- KEYS' order: {} when nobody holds or waits for it (and, with ARGV[2]
-- '1', it has no counters), else {status,
-- now_ms, counters, last, grants, renewed}: status as status.lua returns
-- it (but fence: the highest holder's; lost: ''; a free lock's when
-- idle), counters P{K}:n's counters (flat) and 'unsettled', the open
-- grants whose lease has run out (expired, not recorded yet: prune and
-- settle() in common.lua record them at the next history read or slow
-- acquire),
-- last a list holding the last history entry (if any), grants the
-- 'granted' events of the window, renewed the stalest holder's last
-- renewal or grant (server ms; 0: not held).
--@num
local now = clock_ms()
local window = tonumber(ARGV[1]) or 60000
local known = ARGV[2] == '1'
local list = ARGV[2] == 'list'
local width = list and 10 or 9

local function one(b)
  local K = function(i) return KEYS[b + i] end
  local h = redis.call('HGETALL', K(1))
  local f = {}
  for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
  local kind = f['kind']
  local hs, alive = {}, {}
  if kind == 'x' or kind == 'rw' then
    hs = redis.call('ZRANGEBYSCORE', K(2), '(' .. now, '+inf', 'WITHSCORES')
    alive = redis.call('ZRANGEBYSCORE', K(4), '(' .. now, '+inf')
  end
  -- RedLock's waiters whose deadline has not passed (as in status.lua).
  local noted = {}
  local rw = redis.pcall('HGETALL', K(9))
  for i = 1, rw.err and 0 or #rw, 2 do
    local d, s, info = string.match(rw[i + 1], '^(%d+):(%d+):(.*)$')
    if (tonumber(d) or 0) > now then
      noted[#noted + 1] = {info, tonumber(s) or 0, '0', redis.sha1hex(rw[i]), 0}
    end
  end
  local idle = #hs == 0 and #alive == 0 and #noted == 0
  if idle and not known then return {} end
  local n = redis.call('HGETALL', K(8))
  if idle and #n == 0 then return {} end
  local writers, oldest, queue = 0, 0, {}
  if #alive > 0 then
    local live = {}
    for _, tok in ipairs(alive) do live[tok] = true end
    -- The queue is in priority order (--priority), so the longest wait is
    -- the earliest join among live waiters, wherever they stand.
    for tok in pairs(live) do
      local a = tonumber(f['a:' .. tok])
      if a and (oldest == 0 or a < oldest) then oldest = a end
    end
    local writing = {}
    for _, tok in ipairs(redis.call('ZRANGE', K(6), 0, -1)) do
      if live[tok] then writers = writers + 1 end
      writing[tok] = true
    end
    -- Who waits, as status.lua lists them (the first 100 in queue order).
    local q = redis.call('ZRANGE', K(3), 0, -1, 'WITHSCORES')
    for i = 1, #q, 2 do
      if #queue >= 100 then break end
      local tok = q[i]
      if live[tok] then
        queue[#queue + 1] = {f['q:' .. tok] or '', tonumber(f['a:' .. tok]) or 0, q[i + 1],
          redis.sha1hex(tok), writing[tok] and 1 or 0}
      end
    end
  end
  -- The lock's fence is the highest of its holders' (the fence key is not
  -- read), and no keeper's loss record ('').
  for _, w in ipairs(noted) do
    if w[2] > 0 and (oldest == 0 or w[2] < oldest) then oldest = w[2] end
    if #queue < 100 then queue[#queue + 1] = w end
  end
  if not kind and #noted > 0 then kind, f['limit'] = 'x', '1' end
  local status = {idle and '' or kind, idle and 0 or tonumber(f['limit']) or 0, 0,
    #alive + #noted, writers, '', oldest, {}, queue}
  if list then
    status[3] = tonumber(redis.call('GET', K(5))) or 0
    status[6] = redis.call('GET', K(10)) or ''
  end
  local holding, renewed = {}, 0
  for i = 1, #hs, 2 do
    local tok = hs[i]
    holding[tok] = true
    local fence = tonumber(f['f:' .. tok]) or 0
    status[#status + 1] = {f['i:' .. tok] or '', tonumber(f['s:' .. tok]) or 0,
      tonumber(hs[i + 1]) - now, tonumber(f['c:' .. tok]) or 0, fence, f['m:' .. tok] or '',
      redis.sha1hex(tok), f['p:' .. tok] or '', f['k:' .. tok] or ''}
    if fence > status[3] then status[3] = fence end
    local r = math.max(tonumber(f['r:' .. tok]) or 0, tonumber(f['s:' .. tok]) or 0)
    if r > 0 and (renewed == 0 or r < renewed) then renewed = r end
  end
  if list then return status end
  -- The counters (not `closed`, see open_grants in lua/part/log.lua, nor
  -- `e`, the history's expiry deadline, see lua/part/log.lua),
  -- and 'unsettled': the open grants no running hold has (their lease ran
  -- out, not recorded yet). A parked hold (count 0) has ended already.
  local counts, c = {}, {}
  for i = 1, #n, 2 do
    local k = n[i]
    c[k] = tonumber(n[i + 1]) or 0
    if k ~= 'closed' and k ~= 'e' then
      counts[#counts + 1] = k
      counts[#counts + 1] = n[i + 1]
    end
  end
  local open = (c.grants or 0) - (c.released or 0) - (c.overruns or 0) - (c.expired or 0)
    - (c.closed or 0)
  for tok in pairs(holding) do
    if f['c:' .. tok] ~= '0' then open = open - 1 end
  end
  counts[#counts + 1] = 'unsettled'
  counts[#counts + 1] = tostring(math.max(open, 0))
  -- Grants in the window, counted here: a busy lock's entries would make
  -- a long reply. Read from the newest back, 16 entries, then 64, ...,
  -- until one is older than the window (each entry starts [ms,"event",).
  local grants, last, got, size = 0, {}, 0, 16
  repeat
    local chunk = redis.call('LRANGE', K(7), -(got + size), -(got + 1))
    local done = #chunk < size
    if not last[1] then last[1] = chunk[#chunk] end
    for j = #chunk, 1, -1 do
      local ms, e = string.match(chunk[j], '^%[(%d+),"(%a+)"')
      if (tonumber(ms) or 0) < now - window then
        done = true
        break
      end
      if e == 'granted' then grants = grants + 1 end
    end
    got, size = got + size, size * 4
  until done
  return {status, now, counts, last, grants, renewed}
end

local out = {}
for b = 0, #KEYS - width, width do out[#out + 1] = one(b) end
return out
