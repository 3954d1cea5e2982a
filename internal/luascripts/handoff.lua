-- handoff.lua: pass our hold straight to a waiter of the same process, in the
-- release's one round trip, instead of freeing the key for a race.
-- KEYS[1] lock, KEYS[2] fence counter.
-- ARGV[1] our token, ARGV[2] the waiter's token, ARGV[3] the waiter's ttl in
-- ms, ARGV[4] "1" to hand the new hold a fence (next_fence: see fence.lua).
-- Reply: >= 0 handed over, the new hold's fence (0 with fencing off);
-- -1 the key is gone; -2 someone else holds it.
-- Not safe to run twice: the second run finds the waiter's token. The
-- library sends it once (go-redis's NoRetry).
local lock, fence = KEYS[1], KEYS[2]

-- pcall: a hash (someone's re-entrant hold) makes GET fail with WRONGTYPE.
local v = redis.pcall('GET', lock)
if v == false then
  return -1
end
if v ~= ARGV[1] then
  return -2
end
redis.call('SET', lock, ARGV[2], 'PX', ARGV[3])
if ARGV[4] == '1' then
  return next_fence(fence)
end
return 0
