-- sem_release.lua: give back our permit if we still have it, then wake a
-- waiter.
-- KEYS[1] the semaphore (see sem_acquire.lua), KEYS[2] notify channel;
-- ARGV[1] token. KEYS[3] (may be absent) the holder-info hash: our field
-- goes, and the hash lives as long as the latest permit left (info.lua).
-- Reply: 1 released (waiters told "released": the longest-waiting waiter of
-- each process wakes); 0 no live permit with our token (released already, or
-- expired: an expired one is removed); -1 the key holds another kind.
-- Not safe to run twice: the second run finds the permit gone. The library
-- sends it once (go-redis's NoRetry).
local sem, channel, token = KEYS[1], KEYS[2], ARGV[1]
info_init(KEYS[3])

local expiry = permit_expiry(sem, token)
if expiry == nil then
  return -1
end
if not expiry then
  return 0
end
redis.call('ZREM', sem, token)
if redis.call('ZCARD', sem) == 0 then
  redis.call('DEL', sem)
end
local now = server_ms()
if INFO then
  redis.call('HDEL', INFO, token)
  info.sweep(function(t) return redis.call('ZSCORE', sem, t) end)
  info.fit(info.last(sem), now)
end
redis.call('PUBLISH', channel, 'released')
if expiry <= now then
  return 0
end
return 1
