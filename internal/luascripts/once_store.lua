-- once_store.lua: store a Once's outcome and release its lock in one step,
-- only while the lock holds the caller's token, then wake every waiter.
-- KEYS[1] lock, KEYS[2] notify channel, KEYS[3] stored result (P{K}:result),
-- KEYS[4] (may be absent) the holder-info hash, which goes with the lock.
-- ARGV[1] token, ARGV[2] the outcome to store (it contains the token: see
-- once.go), ARGV[3] its TTL in ms, ARGV[4] the message to publish.
-- Reply: 1 stored and released; 0 the lock is gone, -1 someone else holds
-- it (both: nothing written).
-- Safe to run twice: a second run finds the lock gone and its own outcome
-- stored (no other call stores that value: it names our token), and replies
-- 1 again, writing nothing.
local lock, channel, result, holders = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, outcome, ttl, msg = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

-- pcall: a hash (a re-entrant hold, another kind) makes GET fail with
-- WRONGTYPE; it is not our hold either.
local v = redis.pcall('GET', lock)
if v ~= token then
  if redis.call('GET', result) == outcome then
    return 1
  end
  if v == false then
    return 0
  end
  return -1
end
redis.call('SET', result, outcome, 'PX', ttl)
if holders then
  redis.call('DEL', lock, holders)
else
  redis.call('DEL', lock)
end
redis.call('PUBLISH', channel, msg)
return 1
