-- wake.lua: wake waiters: push to each one's wake-up list (a BLPOP target),
-- which lives for ARGV[1] ms. Sent by the client after a script named the
-- waiters to wake (see common.lua); runs without the common prelude.
--
-- KEYS     the wake-up lists, P{K}:w:<token>, all of one lock
-- ARGV[1]  how long (ms) a signal waits in a list
-- ARGV[1 + i] the signal for KEYS[i]: '1' (the default) wake up and look;
--          's' a scout's (see to_wake in common.lua): look again when the
--          claim of the waiter ahead ends
-- A list without a TTL there is not rlock's (see common.lua): left alone.
for i, k in ipairs(KEYS) do
  if redis.pcall('PTTL', k) ~= -1 then
    redis.call('RPUSH', k, ARGV[1 + i] or 1)
    redis.call('PEXPIRE', k, ARGV[1])
  end
end
return #KEYS
