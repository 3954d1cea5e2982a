-- fence_raise.lua: raise the fencing counter to at least a given value, a
-- max-register write, but only while the lock still holds our token (redlock
-- uses it to lift the counters of a quorum to the fence it hands out).
-- KEYS[1] lock, KEYS[2] fence counter; ARGV[1] token, ARGV[2] fence.
-- A raised counter lives FENCE_TTL ms from the raise (see fence.lua).
-- Reply: 1 the counter is now >= the fence; 0 the lock is not ours.
local lock, fence = KEYS[1], KEYS[2]
local token, f = ARGV[1], tonumber(ARGV[2])

-- pcall: a hash (someone's re-entrant hold) makes GET fail with WRONGTYPE.
if redis.pcall('GET', lock) ~= token then
  return 0
end
if tonumber(redis.call('GET', fence) or '0') < f then
  redis.call('SET', fence, ARGV[2], 'PX', FENCE_TTL)
end
return 1
