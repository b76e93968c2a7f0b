-- part/log.lua: the history writer, the one place an event is written
-- (docs/internals.md, "History"). Put in by build.rs at a `--@log` line
-- (common.lua has one; a fast path before `--@common` names it itself).
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
-- one more in its counter, both keys kept for the retention from now. An
-- entry is a JSON array, [ms, event, fence, info, field, value, ...]: the
-- server's clock, the event, the grant's fence ('0': none) and holder
-- info JSON ('': none), then `fields`, a flat array {'d', held ms, 'x',
-- exit code, ...} (src/lock/decode.rs reads them). Cap and retention are
-- the script's last two ARGV; the list is trimmed to the cap once it is
-- an eighth over it (one LTRIM per cap/8 events); a cap of 0 keeps
-- counters only. The RPUSH comes first: a P{K}:log of another type stops
-- the script there (callers that must not have written anything before
-- it see to P{K}:n's type and to maxmemory first).
local function log_event(now, event, fence, info, fields)
  local cap, keep = tonumber(ARGV[#ARGV - 1]) or 200, tonumber(ARGV[#ARGV]) or 604800000
  if cap > 0 then
    local n = redis.call('RPUSH', KEYS[7], cjson.encode({now, event, tostring(fence or 0),
      info or '', unpack(fields or {})}))
    if n > cap + math.floor(cap / 8) then redis.call('LTRIM', KEYS[7], -cap, -1) end
    redis.call('PEXPIRE', KEYS[7], keep)
  end
  redis.call('HINCRBY', KEYS[8], counter_of(event), 1)
  redis.call('PEXPIRE', KEYS[8], keep)
end
