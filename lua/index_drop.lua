-- index_drop.lua: `list` removes index entries whose lock it found with no
-- state, each only if its score is still the one `list` read: an acquire
-- that took the lock meanwhile has touched the entry (index.lua moves a
-- score strictly up), and its entry stays.
--
-- KEYS[1] one shard of the index (see index.lua)
-- ARGV    pairs: lock name, score as read
-- Returns how many entries it removed.
local shard, n = KEYS[1], 0
for i = 1, #ARGV, 2 do
  local s = redis.call('ZSCORE', shard, ARGV[i])
  if s and tonumber(s) == tonumber(ARGV[i + 1]) then
    n = n + redis.call('ZREM', shard, ARGV[i])
  end
end
return n
