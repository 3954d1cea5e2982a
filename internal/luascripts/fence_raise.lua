-- fence_raise.lua: raise the fencing counter to at least a given value, a
-- max-register write, but only while the lock still holds our token (redlock
-- uses it to lift the counters of a quorum to the fence it hands out).
-- KEYS[1] lock, KEYS[2] fence counter; ARGV[1] token, ARGV[2] fence.
-- Reply: 1 the counter is now >= the fence; 0 the lock is not ours.
local lock, fence = KEYS[1], KEYS[2]
local token, f = ARGV[1], tonumber(ARGV[2])

if redis.call('TYPE', lock)['ok'] ~= 'string' or redis.call('GET', lock) ~= token then
  return 0
end
local cur = tonumber(redis.call('GET', fence) or '0')
if cur < f then
  redis.call('SET', fence, f)
end
return 1
