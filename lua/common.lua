-- common.lua: prelude prepended (at compile time) to every other script.
--
-- The keys of a lock and their KEYS numbers (KEYS[1] P{K} ... KEYS[10]
-- P{K}:r:<request>): docs/internals.md, "Keys and fields".
--
-- Every script that writes events (acquire, release, renew, check, lost,
-- history, break) takes the history's cap
-- (events kept: a list over cap + cap/8 is trimmed to cap) and retention
-- (ms) as its last two ARGV.
--
-- Every holder, each reader included, has its own lease. Every expiry
-- decision uses the server's clock (TIME), never a client's.
--
-- No key lives for ever. The five state keys (1-4, 6) carry one PEXPIRE
-- covering the longest lease in them (plus QUEUE_GRACE while anyone
-- waits), so a lock everyone abandons disappears by itself, and a free
-- lock with nobody waiting has no state keys at all: that is how the fast
-- paths recognise it. The fence key lives at least as long as the lease
-- it was set for, and until the server's clock has passed its value (see
-- grant() in acquire.lua). Wake-up lists and request records expire
-- within seconds.
--
-- Scripts touch only the keys in KEYS. Waking another waiter means pushing
-- to its wake-up list, a key only the client can name: a script that frees
-- a place returns the tokens to wake after its answer, and the client
-- pushes to their lists (src/lock/node/mod.rs, `wake`). A release pushes
-- itself to the lists its holder's grant named as next in line, when
-- to_wake names them (acquire.lua, "Next in line"; release.lua).
--
-- build.rs puts this prelude in at a script's `--@common` line (a script
-- without one, wake.lua, runs without it), with the parts it names
-- (`--@log`, `--@open`, lua/part/) unless the script has them already. A
-- fast path before that line runs without the prelude's definitions; it
-- names keys and replies as KEYS[n] and the numbers below.
--
-- Key types are not checked on every call. Every path reads each key
-- before it first writes it (a read of a key of another type fails the
-- script), in an order such that nothing is written before a failure;
-- where a waiter creates the queue keys, their types are checked first
-- (check_types: those lock_kind and prune have not read already).
--
-- Data rlock did not write is refused (NOTRLOCK, exit 64) before anything
-- is written (lock_kind, check_types). rlock knows its keys by what each
-- of them has, in this release and the ones before, so live locks pass a
-- rolling upgrade: the state hash has 'kind' from its first write on
-- (grant() and joining the queue set it; only the DEL of the whole state
-- removes it); the zsets never exist without that hash (created in the
-- scripts that keep it, they expire with it and are deleted with it),
-- unless it was deleted by hand (then they are a damaged lock's remains,
-- see lock_kind); and
-- every key rlock writes has a TTL from the script that creates it, the
-- fence key and wake-up lists included (grant() in acquire.lua,
-- wake.lua, wake_hinted in release.lua). PTTL goes through pcall: to a user whose ACL lacks +pttl it
-- says nothing, and the key passes. Paths that find the
-- caller's own token in P{K}:h need no check (only rlock puts a token
-- there, and never past this check); wait.lua writes only the caller's
-- own queue entry (ZADD XX).
local STATE, HOLDERS, QUEUE, ALIVE, FENCE, WRITERS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local LOG, STATS = KEYS[7], KEYS[8]

-- Replies, named the same in src/lock/script.rs (mod reply).
local GRANTED, BUSY = 1, 0
local NOT_HELD, OTHER_OWNER, OTHER_LIMIT, OTHER_KIND, NO_UPGRADE = -1, -2, -3, -4, -5
local SUPERSEDED, BROKEN = -6, -7

-- A waiter may learn that the holder it waits for changed, but never a
-- holder's token (it would let the waiter release or renew that lock):
-- a prefix of its SHA-1, a Lua function, no server command.
local function holder_fingerprint(tok)
  return string.sub(redis.sha1hex(tok), 1, 16)
end

-- How long the state keys outlive the last waiter lease known when they
-- were last tidied: waiters check in without tidying (wait.lua), and must
-- find their queue when the holder they wait for has gone.
local QUEUE_GRACE_MS = 10000

-- At maxmemory Redis refuses a script's first write if that command may
-- add memory (ZADD, HSET, SET, HINCRBY), and no write after a first write
-- of any kind (tests/integration/oom.rs). So a call that must go on there
-- (a renewal, a release, a waiter's heartbeat) first writes with
-- writes_at_maxmemory(), and an acquire's first write is a ZADD (grant()'s,
-- or refuse_at_maxmemory()): a grant is written whole or not at all, and
-- no waiter joins a full Redis (docs/internals.md, "At `maxmemory`").
local function writes_at_maxmemory()
  redis.call('HDEL', STATE, '-') -- no field is named '-'
end

local function refuse_at_maxmemory()
  redis.call('ZADD', HOLDERS, 'XX', 0, '-') -- XX: only a member '-', never one
end

-- The server's clock in ms: clock_ms (lua/part/num.lua).
--@num

local function no_ttl(k)
  return redis.pcall('PTTL', k) == -1
end

local function not_ours(k)
  return redis.error_reply('NOTRLOCK key ' .. k .. ' holds data rlock did not write')
end

-- The lock's kind ('x' or 'rw'; nil if it has no state), or nil and an
-- error reply if a state key holds data rlock did not write; or nil, nil
-- and the remains of a damaged lock: the zsets (P{K}:h, :q, :qa, :qw)
-- still there without the state hash. Only a DEL of P{K} by hand makes
-- those (the scripts delete the hash last and expire it last, see tidy);
-- the holds and places in them are gone with it (no hold without its c:
-- field: renew.lua, release.lua), so writers clear them
-- (clear_remains) and go on as on a free lock, and status.lua reports
-- them. Such a zset is rlock's by its type and its TTL.
-- What lock_kind found of the state keys, for check_types: 'none' (the
-- key was missing), 'ttl' (it had a TTL, or PTTL is not allowed), 'ok'
-- (it had a TTL and rlock's type; prune makes 'ttl' 'ok' for the keys it
-- reads, as a key of another type stops the script there). nil: not
-- looked at.
local seen = {}

local function lock_kind()
  -- The history's keys (their types; a TTL, as every key rlock writes).
  for k, want in pairs({[LOG] = 'list', [STATS] = 'hash'}) do
    local got = redis.call('TYPE', k).ok
    if got ~= 'none' and (got ~= want or no_ttl(k)) then return nil, not_ours(k) end
  end
  local kind = redis.call('HGET', STATE, 'kind')
  local keys = {STATE, HOLDERS, QUEUE, ALIVE, WRITERS}
  if kind ~= 'x' and kind ~= 'rw' then
    if not kind and redis.call('EXISTS', unpack(keys)) == 0 then
      for _, k in ipairs(keys) do seen[k] = 'none' end
      return nil
    end
    if redis.call('EXISTS', STATE) == 0 then
      seen[STATE] = 'none'
      local left = {}
      for _, k in ipairs({HOLDERS, QUEUE, ALIVE, WRITERS}) do
        local got = redis.call('TYPE', k).ok
        seen[k] = 'none'
        if got ~= 'none' then
          if got ~= 'zset' or no_ttl(k) then return nil, not_ours(k) end
          left[#left + 1] = k
          seen[k] = 'ok'
        end
      end
      return nil, nil, left
    end
    for _, k in ipairs(keys) do
      if redis.call('EXISTS', k) == 1 then return nil, not_ours(k) end
    end
  end
  for _, k in ipairs(keys) do
    -- (as no_ttl; -2: no such key)
    local t = redis.pcall('PTTL', k)
    if t == -1 then return nil, not_ours(k) end
    seen[k] = t == -2 and 'none' or 'ttl'
  end
  -- (HGET answered: a hash)
  seen[STATE] = 'ok'
  return kind
end

-- Delete the remains lock_kind found (nil: none). Their waiters, still
-- calling in, find no place (wait.lua) and join the queue again.
local function clear_remains(left)
  if left then redis.call('DEL', unpack(left)) end
end

-- Drop what is left of `tok`'s hold when it holds nothing (its fields
-- without a lease: P{K}:h deleted by hand; a lease without its fields:
-- see renew.lua). Unlike forget_holder, the writer mark goes only if it
-- is this token's: another writer may have been granted since.
local function forget_remains(tok)
  redis.call('HDEL', STATE, 'c:' .. tok, 'i:' .. tok, 's:' .. tok, 'f:' .. tok, 'm:' .. tok,
    'u:' .. tok, 'r:' .. tok, 'n:' .. tok)
  redis.call('ZREM', HOLDERS, tok)
  if redis.call('HGET', STATE, 'writer') == tok then redis.call('HDEL', STATE, 'writer') end
end

-- Refuse to create keys where someone else's data is. A state key that
-- lock_kind found missing is missing still, or this script made it
-- (rlock's); one it found with a TTL still has it (nothing before a
-- check_types deletes and makes again a key), and one of rlock's type
-- (seen 'ok') is not looked at again.
local function check_types()
  local want = {[STATE] = 'hash', [HOLDERS] = 'zset', [QUEUE] = 'zset',
    [ALIVE] = 'zset', [FENCE] = 'string', [WRITERS] = 'zset'}
  for k, t in pairs(want) do
    local known = seen[k]
    if known ~= 'none' and known ~= 'ok' then
      local got = redis.call('TYPE', k).ok
      if got ~= 'none' and got ~= t then
        return redis.error_reply('WRONGTYPE key ' .. k .. ' holds a ' .. got)
      end
      if got ~= 'none' and known ~= 'ttl' and no_ttl(k) then return not_ours(k) end
      if k == FENCE and got ~= 'none' and not tonumber(redis.call('GET', k)) then
        return redis.error_reply('ERR value is not an integer: the fencing key ' .. k)
      end
    end
  end
end

--@log
--@open

-- The grants still open whose holder is gone, at most `count`, newest
-- first: {fence, info} from their `granted` entries, those with no end
-- entry (released, overran, expired, lost) after them and not held now
-- (`live`: the fences of live holders). Read from the newest back, 16
-- entries, then 64, ... Fewer where the history no longer has them
-- (trimmed, or a cap of 0).
local function open_entries(count, live)
  local out, ended, got, size = {}, {}, 0, 16
  while #out < count do
    local chunk = redis.call('LRANGE', LOG, -(got + size), -(got + 1))
    for j = #chunk, 1, -1 do
      local ok, e = pcall(cjson.decode, chunk[j])
      if ok and type(e) == 'table' then
        local f = tostring(e[3])
        if e[2] == 'granted' then
          if not ended[f] and not live[f] and #out < count then out[#out + 1] = {f, e[4] or ''} end
        elseif e[2] == 'released' or e[2] == 'overran' or e[2] == 'expired' or e[2] == 'lost' then
          ended[f] = true
        end
      end
    end
    if #chunk < size then break end
    got, size = got + size, size * 4
  end
  return out
end

-- 'user@host' of a holder info JSON ('' if it names neither).
local function user_at_host(info)
  local ok, t = pcall(cjson.decode, info)
  if not ok or type(t) ~= 'table' then return '' end
  local u, h = t.user, t.host
  if type(h) ~= 'string' then return '' end
  if type(u) == 'string' and u ~= '' then return u .. '@' .. h end
  return h
end

local function forget_holder(tok, mode)
  redis.call('HDEL', STATE, 'c:' .. tok, 'i:' .. tok, 's:' .. tok, 'f:' .. tok, 'm:' .. tok,
    'u:' .. tok, 'p:' .. tok, 'k:' .. tok, 'r:' .. tok, 'n:' .. tok)
  redis.call('ZREM', HOLDERS, tok)
  if mode == 'w' then
    redis.call('HDEL', STATE, 'writer')
  end
end

-- A token that holds nothing gets NOT_HELD (released, or expired) when the
-- lock is shared (semaphore slots, readers), since other holders say
-- nothing about this token; OTHER_OWNER only when an exclusive lock is
-- held by someone else. So releasing twice is harmless for every kind.
local function not_held_reply()
  local kind = redis.call('HGET', STATE, 'kind')
  if not kind or redis.call('ZCARD', HOLDERS) == 0 then return NOT_HELD end
  if kind == 'x' and tonumber(redis.call('HGET', STATE, 'limit')) == 1 then return OTHER_OWNER end
  if kind == 'rw' and redis.call('HEXISTS', STATE, 'writer') == 1 then return OTHER_OWNER end
  return NOT_HELD
end

local function leave_queue(tok)
  redis.call('ZREM', QUEUE, tok)
  redis.call('ZREM', ALIVE, tok)
  redis.call('ZREM', WRITERS, tok)
  redis.call('HDEL', STATE, 'a:' .. tok, 'q:' .. tok)
end

-- Drop holders whose lease ran out and waiters that stopped calling in.
-- A holder whose lease ran out with its grant still open (nobody
-- released it: a crashed or stopped holder) is recorded as `expired`; a
-- parked one (count 0) ended with its release. Returns the queue's size
-- (ZCARD of P{K}:q) after it, or nil when a repair changed it.
local function prune(now)
  local gone = redis.call('ZRANGEBYSCORE', HOLDERS, '-inf', now, 'WITHSCORES')
  for j = 1, #gone, 2 do
    local tok = gone[j]
    local h = redis.call('HMGET', STATE, 'c:' .. tok, 'f:' .. tok, 's:' .. tok, 'i:' .. tok,
      'm:' .. tok)
    forget_holder(tok, h[5])
    if h[1] ~= '0' then
      local d = h[3] and {'d', math.max(tonumber(gone[j + 1]) - tonumber(h[3]), 0)}
      log_event(now, 'expired', h[2] or 0, h[4] or '', d)
    end
  end
  for _, tok in ipairs(redis.call('ZRANGEBYSCORE', ALIVE, '-inf', now)) do
    leave_queue(tok)
  end
  -- Repairs after a key was deleted by hand (docs/guide.md, "The keys of
  -- a lock"), two reads when there is nothing to repair. Every queued
  -- token has a waiter lease (acquire.lua adds both, leave_queue drops
  -- both): without P{K}:qa, a dead waiter would keep its place for ever.
  local queued = redis.call('ZCARD', QUEUE)
  if queued > redis.call('ZCARD', ALIVE) then
    queued = nil
    for _, tok in ipairs(redis.call('ZRANGE', QUEUE, 0, -1)) do
      if not redis.call('ZSCORE', ALIVE, tok) then leave_queue(tok) end
    end
  end
  -- (Read above: a key of another type would have stopped the script.)
  for _, k in ipairs({HOLDERS, QUEUE, ALIVE}) do
    if seen[k] == 'ttl' then seen[k] = 'ok' end
  end
  -- The writer mark names a holder (grant() sets both, forget_holder
  -- drops both): without P{K}:h, it would keep every reader out.
  local w = redis.call('HGET', STATE, 'writer')
  if w and not redis.call('ZSCORE', HOLDERS, w) then redis.call('HDEL', STATE, 'writer') end
  return queued
end

-- The first waiting writer and its score in the queue (as in QUEUE), or nil.
local function first_writer()
  local w = redis.call('ZRANGE', WRITERS, 0, 0, 'WITHSCORES')
  if w[1] then return w[1], tonumber(w[2]) end
end

-- May `tok` (queue position `rank`, false if not queued) take the lock now?
-- `holders`, `queued`: the ZCARDs of P{K}:h and P{K}:q when the caller has
-- them as they are now (nil: read here).
local function may_enter(kind, mode, limit, tok, rank, holders, queued)
  holders = holders or redis.call('ZCARD', HOLDERS)
  if kind == 'x' then
    return (rank or queued or redis.call('ZCARD', QUEUE)) < limit - holders
  end
  if mode == 'w' then
    return holders == 0 and (rank or queued or redis.call('ZCARD', QUEUE)) == 0
  end
  -- A reader shares with readers, but not with a writer holding, nor with
  -- one waiting ahead of it: once a writer waits, new readers queue behind.
  if redis.call('HEXISTS', STATE, 'writer') == 1 then return false end
  local _, wseq = first_writer()
  if not wseq then return true end
  -- (rank is false, not nil, when ZRANK found nothing)
  return rank and tonumber(redis.call('ZSCORE', QUEUE, tok)) < wseq or false
end

-- How long a waiter woken to take the lock has to claim it (server ms): see
-- to_wake.
local CLAIM_MS = 800

-- The waiters at the head of the queue that may now take the lock, for the
-- client to wake: up to the free slots (kind x), or the writer next in
-- line, or every reader queued ahead of the first waiting writer (kind rw).
-- `except` (the caller) is left out. Each gets a claim, its waiter lease
-- cut to now + CLAIM_MS (ZADD XX LT), so that a dead one holds the queue up
-- no longer; the waiter behind them, the scout, is named '~' .. token and
-- looks again when the claims end. A claim only shortens a waiter lease and
-- grants are made only under may_enter: no two holders (docs/internals.md,
-- "Dead and stalled waiters: claims"). `queued`, `holders`: the ZCARDs of
-- P{K}:q and P{K}:h when the caller has them as they are now (nil: read
-- here).
local function to_wake(except, now, queued, holders)
  local out, head = {}, {}
  if (queued or redis.call('EXISTS', QUEUE)) == 0 then return out end
  local st = redis.call('HMGET', STATE, 'kind', 'limit')
  local kind = st[1]
  if kind == 'rw' then
    if redis.call('HEXISTS', STATE, 'writer') == 1 then return out end
    local wtok, wseq = first_writer()
    if wtok and redis.call('ZRANGE', QUEUE, 0, 0)[1] == wtok then
      if redis.call('ZCARD', HOLDERS) == 0 then head = {wtok} end
    else
      local upto = wseq and ('(' .. wseq) or '+inf'
      head = redis.call('ZRANGEBYSCORE', QUEUE, '-inf', upto, 'LIMIT', 0, 1000)
    end
  else
    local limit = tonumber(st[2])
    if not limit then return out end
    local free = limit - (holders or redis.call('ZCARD', HOLDERS))
    if free > 0 then head = redis.call('ZRANGE', QUEUE, 0, free - 1) end
  end
  for _, tok in ipairs(head) do
    if tok ~= except then
      out[#out + 1] = tok
      redis.call('ZADD', ALIVE, 'XX', 'LT', now + CLAIM_MS, tok)
    end
  end
  if #out > 0 then
    -- (head is a prefix of the queue: the scout is the one after it)
    local scout = redis.call('ZRANGE', QUEUE, #head, #head)[1]
    if scout and scout ~= except then out[#out + 1] = '~' .. scout end
  end
  return out
end

-- Append the tokens to wake to a reply.
local function with_wake(reply, wake)
  for _, tok in ipairs(wake) do reply[#reply + 1] = tok end
  return reply
end

-- Let the state keys live exactly as long as the longest lease in them
-- (plus QUEUE_GRACE_MS while anyone waits); delete them when none is left.
local function tidy(now)
  local last = 0
  local h = redis.call('ZRANGE', HOLDERS, -1, -1, 'WITHSCORES')
  if h[2] then last = tonumber(h[2]) end
  local a = redis.call('ZRANGE', ALIVE, -1, -1, 'WITHSCORES')
  if a[2] then last = math.max(last, tonumber(a[2])) + QUEUE_GRACE_MS end
  if last <= now then
    redis.call('DEL', STATE, HOLDERS, QUEUE, ALIVE, WRITERS)
    return
  end
  redis.call('PEXPIRE', STATE, last - now)
  redis.call('PEXPIRE', HOLDERS, last - now)
  if a[2] then
    -- (an empty zset does not exist: only a queue has these keys)
    for _, k in ipairs({QUEUE, ALIVE, WRITERS}) do
      redis.call('PEXPIRE', k, last - now)
    end
  end
end


-- Grants still open whose holder is gone (its state expired unnoticed:
-- nobody called while it ran out) are recorded as `expired` now, with
-- the fence and info of their `granted` entries (open_entries; '0' and
-- '' where the history no longer has them). With `cheap`, only when
-- there are more open grants than holders (the slow path of an acquire);
-- otherwise the holders are looked at one by one (the history read).
-- Runs after prune: every lease left is running. `holders`: the ZCARD of
-- P{K}:h when the caller has it (nil: read here). gone_grants: how many
-- open grants no holder has (a parked hold's ended already; remains,
-- without fields, count as held), and the live holders' fences.
local function gone_grants()
  local live, held = {}, 0
  for _, tok in ipairs(redis.call('ZRANGE', HOLDERS, 0, -1)) do
    local h = redis.call('HMGET', STATE, 'c:' .. tok, 'f:' .. tok)
    if h[1] ~= '0' then
      held = held + 1
      if h[2] then live[h[2]] = true end
    end
  end
  return open_grants() - held, live
end

local function settle(now, cheap, holders)
  if cheap then
    local open = open_grants()
    if open <= 0 or open <= (holders or redis.call('ZCARD', HOLDERS)) then return end
  end
  local count, live = gone_grants()
  if count <= 0 then return end
  local found = open_entries(count, live)
  for i = count, 1, -1 do
    local e = found[i] or {0, ''}
    log_event(now, 'expired', e[1], e[2])
  end
end
