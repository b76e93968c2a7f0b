-- part/num.lua: numbers sent to Redis as the strings a command's
-- arguments are. Put in by build.rs at a `--@num` line (the parts and
-- fast paths that send numbers name it).
--
-- Redis turns a Lua number given to redis.call into a string with
-- snprintf("%.17g"), and Lua's tostring and `..` use "%.14g": each about
-- 0.5-0.7 µs on Redis 7.0 (glibc's floating-point printf), a tenth of a
-- fast path's time over its dozen numbers; '%d' of the same integer costs
-- about a quarter of that, and a string is sent as it is (BENCHMARKS.md,
-- "Issue 32, goal 1"). Every number sent is an integer (ms, counts,
-- fences), so the strings are the same.
local function int(n)
  return string.format('%d', n)
end

-- The server's clock (TIME) in ms, as a number and as its string: the
-- seconds, then the µs field's thousands (the field has no leading zeros:
-- at most 6 digits), joined as strings, with no number formatted.
local function clock_ms()
  local t = redis.call('TIME')
  local s = t[1] .. string.sub('00000' .. t[2], -6, -4)
  return tonumber(s), s
end
