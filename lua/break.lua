-- break.lua: an operator ends holds by force (`rlock break`): every hold of
-- the lock, or those whose grant's fence ARGV[1] lists. Each broken hold
-- is a `broken` event in the lock's history (by, reason, and the hold's
-- fence, holder and time held so far), and its token gets a notice in
-- P{K}:b, field `b:<token>` = JSON {by, reason}, which its holder's next
-- renewal reads (renew.lua), or its release (release.lua), to say who
-- broke the lock and why. The notices expire with the longest lease
-- broken: a holder learns of its break by then, or never (it stalled past
-- its lease, and finds it gone).
--
-- A hold whose holder may still run is *marked*, not ended: field
-- `k:<token>` in P{K} = JSON {by, reason, at}. It stays in P{K}:h with the
-- lease it has, which nothing extends any more (renew.lua and a re-entry
-- in acquire.lua refuse a marked hold; check.lua calls it not held), so
-- the lock passes on when its holder has stopped what it runs and
-- released (release.lua ends it as any hold, and logs how it ended), or
-- when that lease runs out (prune logs `expired`), whichever comes first:
-- a waiter waits at most one TTL. Safety: the next holder never runs
-- beside the broken one. The broken holder's rlock (exec, keeper) learns
-- of the break at its next renewal (at most TTL/3 later) and stops its
-- command as for any loss (TERM with CONT, KILL after --grace, never past
-- the lease: the guard's kill deadline is the lease's), then releases;
-- one that cannot (stopped, killed, partitioned) renews nothing, and its
-- guard kills the command before the lease ends on the server. A parked
-- hold (released, kept taken by its --min-hold) has no holder left to
-- stop: it ends at once, and the waiters that may now take the lock are
-- returned to be woken, as release.lua does.
--
-- A damaged lock (P{K} deleted by hand: lock_kind in common.lua) is
-- broken too: its remains are deleted, and the tokens in P{K}:h get
-- notices and `broken` events (fences from their open grants' entries in
-- the history).
--
-- KEYS[1..6] as in common.lua
-- KEYS[7] P{K}:log  LIST    the lock's history (as in common.lua)
-- KEYS[8] P{K}:n    HASH    the lock's counters
-- KEYS[9] P{K}:b    HASH    the break notices
-- KEYS[10] P!{K}            the break's permission key: declared, never
--                           read or written (see "Roles" below)
-- ARGV[1] '' to break every hold; else the fences to break, comma-separated
-- ARGV[2] who breaks it (user@host)
-- ARGV[3] why (the operator's --reason)
-- ARGV[4] history cap, ARGV[5] history retention in ms (see common.lua)
--
-- Returns {n, fence_1, ..., fence_n, wake...}: the holds broken (0: none
-- matched, or the lock was free), marked or ended, their fences, and the
-- tokens of the waiters that may now take the lock. A hold marked already
-- counts again, with no second event.
--
-- Breaking is a write the operator must be able to make at maxmemory: it
-- adds at most a notice and a mark per broken holder (see
-- writes_at_maxmemory in common.lua).
--
-- Roles: KEYS[10] is outside the keys every other script takes (P{K}...,
-- P{i<n>}:index) but shares the lock's hash tag, so one call still lands
-- on one Cluster slot. Redis checks a script call's KEYS against the
-- caller's ACL key patterns before the script runs, so a user whose ACL
-- covers `P{*` but not `P!{*` (the job role, docs/deployments.md) is
-- refused the whole call (NOPERM) before anything changes. Declaring the
-- key is all the check needs: nothing is stored there (what a break did
-- is in the history and the marks).
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
local now = clock_ms()
prune(now)
local want
if sel ~= '' then
  want = {}
  for f in string.gmatch(sel, '[^,]+') do want[f] = true end
end
local out = {0}
local notice = cjson.encode({by = by, reason = reason})
local hs = redis.call('ZRANGE', HOLDERS, 0, -1, 'WITHSCORES')
local fields, live, spare, longest = {}, {}, nil, 0
for j = 1, #hs, 2 do
  fields[j] = redis.call('HMGET', STATE, 'f:' .. hs[j], 'm:' .. hs[j], 'i:' .. hs[j],
    's:' .. hs[j], 'c:' .. hs[j], 'k:' .. hs[j])
  if fields[j][1] then live[fields[j][1]] = true end
end
for j = 1, #hs, 2 do
  local tok, h = hs[j], fields[j]
  -- Remains have no fields: the fence and info of an open grant no live
  -- hold has, from its `granted` entry (open_entries, newest first).
  if not h[5] then
    spare = spare or open_entries(open_grants(), live)
    local e = table.remove(spare, 1)
    if e then h[1], h[3] = e[1], e[2] end
  end
  local fence = h[1] or '0'
  if not want or want[fence] then
    local running = h[5] and h[5] ~= '0'
    if not (running and h[6]) then -- (a mark already made stays as it is)
      if running then
        -- Marked, not ended (see above): its grant stays open, for the
        -- event that says how the hold ended.
        redis.call('HSET', STATE, 'k:' .. tok, cjson.encode({by = by, reason = reason, at = now}))
      else
        forget_holder(tok, h[2])
      end
      redis.call('HSET', NOTES, 'b:' .. tok, notice)
      -- As long as the broken lease would have run, never without a TTL;
      -- one left longer for another notice is kept (PTTL through pcall, as
      -- no_ttl: without +pttl the TTL is set).
      local left = math.max(tonumber(hs[j + 1]) - now, 1)
      longest = math.max(longest, left)
      local ttl = redis.pcall('PTTL', NOTES)
      if type(ttl) ~= 'number' or ttl < left then redis.call('PEXPIRE', NOTES, left) end
      log_event(now, 'broken', fence, h[3] or '',
        {'d', math.max(now - (tonumber(h[4]) or now), 0), 'by', by, 'r', reason})
      -- A remains' grant ends here (a parked hold's ended with its
      -- release; a marked one's ends with its release or expiry).
      if not h[5] then redis.call('HINCRBY', STATS, 'closed', 1) end
    end
    out[1] = out[1] + 1
    out[#out + 1] = tonumber(fence) or 0
  end
end
clear_remains(remains)
local wake = to_wake(nil, now)
tidy(now)
return with_wake(out, wake)
