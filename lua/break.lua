-- break.lua: an operator ends holds by force (`rlock break`): every hold of
-- the lock, or those whose grant's fence ARGV[1] lists. Waiters stay
-- queued; the waiters that may now take the lock are returned to be woken,
-- as release.lua does. Each broken token gets a notice in P{K}:n, field
-- `b:<token>` = JSON {by, reason}, which its holder's next renewal reads
-- (renew.lua) to say who broke the lock and why.
--
-- KEYS[1..6] as in common.lua
-- KEYS[7] P{K}:log  STREAM  the lock's history (issue #19's shared layout)
-- KEYS[8] P{K}:n    HASH    the lock's counters, and the break notices
-- ARGV[1] '' to break every hold; else the fences to break, comma-separated
-- ARGV[2] who breaks it (user@host)
-- ARGV[3] why (the operator's --reason)
-- ARGV[4] how long (ms) the notices are kept (the history's retention)
--
-- Returns {n, fence_1, ..., fence_n, wake...}: the holds broken (0: none
-- matched, or the lock was free), their fences, and the tokens of the
-- waiters that may now take the lock.
--
-- A parked holder (released, kept taken by its --min-hold) is a hold
-- too, and ends with the others. Breaking is a write the operator must be
-- able to make at maxmemory: it adds at most a notice per broken holder
-- (see writes_at_maxmemory in common.lua).
--
-- Safety: ending a hold lets the next waiter in at once, beside a holder
-- that may still run. That is what a break is for (a hung holder); the
-- broken holder's rlock (exec, keeper) learns of it at its next renewal
-- (at most TTL/3 later) and stops its command then, as for any loss. Until
-- then two holders may work at once: the operator asked for it, and the
-- fence of the new grant is higher than the broken one's, so downstream
-- systems that check fences refuse the old holder's writes.
--@common
local sel, by, reason, keep_ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local NOTES = KEYS[8]
local kind, foreign = lock_kind()
if foreign then return foreign end
if not kind then return {0} end -- free, nobody waits: nothing to break
-- Read before any write: a key of another type, or one without a TTL
-- (not rlock's), stops the script before it changes anything.
local ntype = redis.call('TYPE', NOTES).ok
if ntype ~= 'none' and ntype ~= 'hash' then
  return redis.error_reply('WRONGTYPE key ' .. NOTES .. ' holds a ' .. ntype)
end
if ntype == 'hash' and no_ttl(NOTES) then return not_ours(NOTES) end
writes_at_maxmemory()
local now = now_ms()
prune(now)
local want
if sel ~= '' then
  want = {}
  for f in string.gmatch(sel, '[^,]+') do want[f] = true end
end
local out = {0}
local notice = cjson.encode({by = by, reason = reason})
for _, tok in ipairs(redis.call('ZRANGE', HOLDERS, 0, -1)) do
  local h = redis.call('HMGET', STATE, 'f:' .. tok, 'm:' .. tok)
  local fence = h[1] or '0'
  if not want or want[fence] then
    forget_holder(tok, h[2])
    redis.call('HSET', NOTES, 'b:' .. tok, notice)
    out[1] = out[1] + 1
    out[#out + 1] = tonumber(fence) or 0
  end
end
if out[1] > 0 then
  -- The notices live as long as the history (no key without a TTL); a
  -- later event's PEXPIRE sets the same retention again.
  redis.call('PEXPIRE', NOTES, keep_ms)
end
local wake = to_wake(nil)
tidy(now)
return with_wake(out, wake)
