-- acl_check.lua: doctor's permission check where ACL DRYRUN is missing:
-- would each command be allowed to the connected user? Runs no command on
-- any key (redis.acl_check_cmd only asks).
--
-- KEYS: none
-- ARGV: groups of (n, command, its n-1 arguments...), one per command
-- Returns: one integer per group: 1 allowed, 0 refused, -1 not a command
--          this server knows
-- Errors: NOACLCHECK (before Redis 7: no redis.acl_check_cmd)
if redis.acl_check_cmd == nil then
  return redis.error_reply('NOACLCHECK redis.acl_check_cmd needs Redis 7')
end
local out, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local ok, allowed = pcall(redis.acl_check_cmd, unpack(ARGV, i + 1, i + n))
  if not ok then
    out[#out + 1] = -1
  elseif allowed then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
  i = i + n + 1
end
return out
