-- index_drop.lua: `list` removes index entries whose lock it found with no
-- state, each only if its score is still the one `list` read: an acquire
-- that took the lock meanwhile has touched the entry (index.lua moves a
-- score strictly up), and its entry stays.
--
-- KEYS[1] one shard of the index (see index.lua)
-- KEYS[2] (a touch taken back after its script refused, `untouch` in
--         src/lock/node/index.rs) the shard's list of locks with history:
--         the entry that touch set there goes too, if still at the
--         touch's deadline (index score + retention; a longer deadline,
--         set by another touch, stays)
-- ARGV    pairs: lock name, score as read; with KEYS[2], then the
--         retention (ms) the touch added
-- Returns how many entries it removed from the index.
local shard, known, n, last = KEYS[1], KEYS[2], 0, #ARGV
local keep
if known then
  keep = tonumber(ARGV[last])
  last = last - 1
end
for i = 1, last, 2 do
  local s = redis.call('ZSCORE', shard, ARGV[i])
  if s and tonumber(s) == tonumber(ARGV[i + 1]) then
    n = n + redis.call('ZREM', shard, ARGV[i])
    if known then
      local k = redis.call('ZSCORE', known, ARGV[i])
      if k and tonumber(k) == tonumber(ARGV[i + 1]) + keep then
        redis.call('ZREM', known, ARGV[i])
      end
    end
  end
end
return n
