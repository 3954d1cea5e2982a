-- rw_release.lua: drop our hold of a read-write lock (see rw.lua); when it
-- was the last, delete the key and wake every waiter.
-- KEYS[1] lock, KEYS[2] notify channel, KEYS[3] waiting writer's mark;
-- ARGV[1] token. A mark of ours goes too (the undo of a writer's attempt).
-- KEYS[4] (may be absent) the holder-info hash: our field goes, and the
-- hash lives as long as the longest hold left (info.lua).
-- Reply: 1 released; 0 our hold is gone; -1 someone else holds the lock.
-- Not safe to run twice: the second run finds the hold gone. The library
-- sends it once (go-redis's NoRetry).
local lock, channel, mark, token = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
info_init(KEYS[4])

if redis.call('GET', mark) == token then
  redis.call('DEL', mark)
end

local r = not_rw(lock, 0, -1)
if r then
  return r
end
local now = now_ms()
local ours = live(lock, token, now)
if ours then
  redis.call('HDEL', lock, token)
  if INFO then
    redis.call('HDEL', INFO, token)
  end
end
-- Holds that expired go too, so that a crashed reader's field does not keep
-- a waiting writer asleep.
local left, last = prune(lock, now)
if INFO then
  info.sweep(function(t) return redis.call('HEXISTS', lock, t) == 1 end)
  info.fit(last, now)
end
if left == 0 then
  redis.call('DEL', lock)
  -- Every waiter: a waiting writer, or all the readers a writer kept out.
  redis.call('PUBLISH', channel, 'all')
  if ours then
    return 1
  end
  return 0
end
if ours then
  return 1
end
return missing(lock)
