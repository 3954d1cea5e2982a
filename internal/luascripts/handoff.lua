-- handoff.lua: pass our hold straight to a waiter of the same process, in the
-- release's one round trip, instead of freeing the key for a race.
-- KEYS[1] lock, KEYS[2] fence counter.
-- ARGV[1] our token, ARGV[2] the waiter's token, ARGV[3] the waiter's ttl in
-- ms, ARGV[4] "1" to hand the new hold a fence (next_fence: see fence.lua).
-- Holder info (optional): KEYS[3] the holder-info hash, ARGV[5] the
-- waiter's info (see acquire.lua): our field goes, the waiter's is set.
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
local f = 0
if ARGV[4] == '1' then
  f = next_fence(fence)
  keep_fence(fence, ARGV[3])
end
local holders, info = KEYS[3], ARGV[5]
if holders then
  redis.call('DEL', holders)
  if info then
    local t = redis.call('TIME')
    local at = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
    redis.call('HSET', holders, ARGV[2], string.format('%.0f', f) .. '\31' .. at .. '\31' .. info)
    redis.call('PEXPIRE', holders, ARGV[3])
  end
end
return f
