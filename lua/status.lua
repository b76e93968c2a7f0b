-- status.lua: read a lock's state without changing it.
--
-- KEYS[1..5] as in common.lua
--
-- Returns {limit, fence, waiters, holder...}, each holder being
--   {info_json, since_ms, ttl_left_ms, count, fence}
-- Leases that have run out by the server's clock are left out; limit is 0
-- when nobody holds or waits for the lock.
local bad = check_types()
if bad then return bad end
local now = now_ms()
local out = {
  tonumber(redis.call('HGET', STATE, 'limit')) or 0,
  tonumber(redis.call('GET', FENCE)) or 0,
  redis.call('ZCOUNT', ALIVE, '(' .. now, '+inf'),
}
local hs = redis.call('ZRANGEBYSCORE', HOLDERS, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #hs, 2 do
  local tok = hs[i]
  out[#out + 1] = {
    redis.call('HGET', STATE, 'i:' .. tok) or '',
    tonumber(redis.call('HGET', STATE, 's:' .. tok)) or 0,
    tonumber(hs[i + 1]) - now,
    tonumber(redis.call('HGET', STATE, 'c:' .. tok)) or 0,
    tonumber(redis.call('HGET', STATE, 'f:' .. tok)) or 0,
  }
end
return out
