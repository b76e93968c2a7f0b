-- part/log.lua: the history writer, the one place an event is written
-- (docs/internals.md, "History"). Put in by build.rs at a `--@log` line
-- (common.lua has one; a fast path before `--@common` names it itself).
--@num
--
-- The counter in KEYS[8] (P{K}:n) each event adds one to (a function,
-- not a table: a table would be built on every call of every script).
local function counter_of(event)
  if event == 'granted' then return 'grants' end
  if event == 'lost' then return 'losses' end
  if event == 'timeout' then return 'timeouts' end
  if event == 'broken' then return 'breaks' end
  if event == 'overran' then return 'overruns' end
  return event -- released, expired, superseded
end

-- Record an event in the lock's history: one entry in KEYS[7] (P{K}:log),
-- one more in its counter, both keys kept at least the retention from now.
-- An entry is a JSON array, [ms, event, fence, info, field, value, ...]:
-- the server's clock, the event, the grant's fence ('0': none) and holder
-- info JSON ('': none), then `fields`, a flat array {'d', held ms, 'x',
-- exit code, ...} (src/lock/decode.rs reads them). Cap and retention are
-- the script's last two ARGV; the list is trimmed to the cap once it is
-- an eighth over it (one LTRIM per cap/8 events); a cap of 0 keeps
-- counters only.
--
-- Expiry. P{K}:n's field 'e' is the deadline (server ms) both keys were
-- last PEXPIREATed to, and this function, the only one that sets their
-- expiry, never moves it earlier: so while 'e' is at least now + the
-- retention, neither key is expired again. Otherwise both are
-- PEXPIREATed to now + retention + slack (a 64th of the retention, at
-- most 10 minutes), and 'e' with them: steady events move the expiry
-- about once per slack, and the history outlives its last event by the
-- retention plus at most the slack. `e` is 'e' as the caller read it
-- from P{K}:n in this call (nil: read here, one HGET): found, P{K}:n
-- exists and has its expiry; not found, both keys are expired now. A
-- list made anew while P{K}:n has 'e' (RPUSH answering 1: P{K}:log
-- deleted by hand) is expired to the deadline at once: no key without a
-- TTL. Returns the deadline.
--
-- The first command reads P{K}:n (HGET, without `e`) or writes P{K}:log
-- (RPUSH): a key of another type stops the script there (callers that
-- must not have written anything before it see to maxmemory, and to
-- P{K}:n's type when they pass `e`, first).
local function log_event(now, event, fence, info, fields, e)
  local cap, keep = tonumber(ARGV[#ARGV - 1]) or 200, tonumber(ARGV[#ARGV]) or 604800000
  if e == nil then e = redis.call('HGET', KEYS[8], 'e') end
  e = tonumber(e) or 0
  local deadline = e
  if e < now + keep then deadline = now + keep + math.min(math.floor(keep / 64), 600000) end
  if cap > 0 then
    local n = redis.call('RPUSH', KEYS[7], cjson.encode({now, event, tostring(fence or 0),
      info or '', unpack(fields or {})}))
    if n > cap + math.floor(cap / 8) then redis.call('LTRIM', KEYS[7], int(-cap), '-1') end
    if n == 1 or deadline ~= e then redis.call('PEXPIREAT', KEYS[7], deadline) end
  end
  redis.call('HINCRBY', KEYS[8], counter_of(event), '1')
  if deadline ~= e then
    redis.call('HSET', KEYS[8], 'e', deadline)
    redis.call('PEXPIREAT', KEYS[8], deadline)
  end
  return deadline
end
