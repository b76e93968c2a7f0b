-- break.lua: an operator ends holds by force (`rlock break`): every hold of
-- the lock, or those whose grant's fence ARGV[1] lists. Waiters stay
-- queued; the waiters that may now take the lock are returned to be woken,
-- as release.lua does. Each broken hold is a `broken` event in the
-- lock's history (by, reason, and the hold's fence, holder and time held),
-- its grant closed. Each broken token gets a notice in P{K}:b, field
-- `b:<token>` = JSON {by, reason}, which its holder's next renewal reads
-- (renew.lua), or its release if the break lands while exec's command
-- ends (release.lua), to say who broke the lock and why. The notices
-- expire with the longest lease broken: a holder learns of its break by
-- then, or never (it stalled past its lease, and finds it gone).
--
-- A damaged lock (P{K} deleted by hand: lock_kind in common.lua) is
-- broken too: its remains are deleted, and the tokens in P{K}:h get
-- notices and `broken` events (fences from their open grants).
--
-- KEYS[1..6] as in common.lua
-- KEYS[7] P{K}:log  LIST    the lock's history (as in common.lua)
-- KEYS[8] P{K}:n    HASH    the lock's counters
-- KEYS[9] P{K}:b    HASH    the break notices
-- ARGV[1] '' to break every hold; else the fences to break, comma-separated
-- ARGV[2] who breaks it (user@host)
-- ARGV[3] why (the operator's --reason)
-- ARGV[4] history cap, ARGV[5] history retention in ms (see common.lua)
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
local sel, by, reason = ARGV[1], ARGV[2], ARGV[3]
local NOTES = KEYS[9]
local kind, foreign, remains = lock_kind()
if foreign then return foreign end
-- free, nobody waits: nothing to break
if not kind and not remains then return {0} end
-- Read before any write: a key of another type, or one without a TTL
-- (not rlock's), stops the script before it changes anything.
for k, t in pairs({[NOTES] = 'hash', [LOG] = 'list', [STATS] = 'hash'}) do
  local got = redis.call('TYPE', k).ok
  if got ~= 'none' and got ~= t then
    return redis.error_reply('WRONGTYPE key ' .. k .. ' holds a ' .. got)
  end
  if got ~= 'none' and no_ttl(k) then return not_ours(k) end
end
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
local hs = redis.call('ZRANGE', HOLDERS, 0, -1, 'WITHSCORES')
for j = 1, #hs, 2 do
  local tok = hs[j]
  local h = redis.call('HMGET', STATE, 'f:' .. tok, 'm:' .. tok, 'i:' .. tok, 's:' .. tok)
  -- (Remains have no fields: the fence of the open grant.)
  local fence = h[1] or string.match(redis.call('HGET', STATS, 'o:' .. tok) or '', '^%d+')
    or '0'
  if not want or want[fence] then
    forget_holder(tok, h[2])
    redis.call('HSET', NOTES, 'b:' .. tok, notice)
    -- As long as the broken lease would have run, never without a TTL;
    -- one left longer for another notice is kept (PTTL through pcall, as
    -- no_ttl: without +pttl the TTL is set).
    local left = math.max(tonumber(hs[j + 1]) - now, 1)
    local ttl = redis.pcall('PTTL', NOTES)
    if type(ttl) ~= 'number' or ttl < left then redis.call('PEXPIRE', NOTES, left) end
    -- (The grant's open record, if any, is the hold's; else the state's.)
    local f, since, info = close_grant(tok)
    since = since or tonumber(h[4]) or now
    log_event(now, 'broken', f or fence, info or h[3] or '',
      {'d', math.max(now - since, 0), 'by', by, 'r', reason})
    out[1] = out[1] + 1
    out[#out + 1] = tonumber(fence) or 0
  end
end
clear_remains(remains)
local wake = to_wake(nil, now)
tidy(now)
return with_wake(out, wake)
