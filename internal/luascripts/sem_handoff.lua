-- sem_handoff.lua: pass our permit straight to a waiter of the same process
-- and semaphore, in the release's one round trip, instead of freeing it for
-- a race.
-- KEYS[1] the semaphore (see sem_acquire.lua), KEYS[2] fence counter,
-- KEYS[3] notify channel.
-- ARGV[1] our token, ARGV[2] the waiter's token, ARGV[3] the waiter's ttl in
-- ms, ARGV[4] "1" to hand the new permit a fence (next_fence: see
-- fence.lua), ARGV[5] n.
-- Holder info (optional, see info.lua): KEYS[4] the holder-info hash,
-- ARGV[6] the waiter's info: our field goes, the waiter's is set.
-- Reply: >= 0 handed over, the new permit's fence (0 with fencing off);
-- -1 no live permit with our token; -2 the key holds another kind; -3 ours
-- released but not handed over, as n or more other permits are live (n was
-- lowered): waiters were told, as by sem_release.lua.
-- Not safe to run twice: the second run finds the waiter's token. The
-- library sends it once (go-redis's NoRetry).
local sem, fence, channel = KEYS[1], KEYS[2], KEYS[3]
local ttl, n = tonumber(ARGV[3]), tonumber(ARGV[5])
info_init(KEYS[4])

local expiry = permit_expiry(sem, ARGV[1])
if expiry == nil then
  return -2
end
if not expiry then
  return -1
end
local now = server_ms()
redis.call('ZREM', sem, ARGV[1])
if INFO then
  redis.call('HDEL', INFO, ARGV[1])
  info.prune(sem, now)
end
redis.call('ZREMRANGEBYSCORE', sem, '-inf', now)
if expiry <= now then
  if INFO then
    info.fit(info.last(sem), now)
  end
  return -1
end
if redis.call('ZCARD', sem) >= n then
  if INFO then
    info.fit(info.last(sem), now)
  end
  redis.call('PUBLISH', channel, 'released')
  return -3
end
redis.call('ZADD', sem, now + ttl, ARGV[2])
if redis.call('PTTL', sem) < ttl then
  redis.call('PEXPIRE', sem, ttl)
end
local f = 0
if ARGV[4] == '1' then
  f = next_fence(fence)
end
if INFO then
  info.write(ARGV[2], ARGV[6], f, now, now + ttl)
  info.fit(info.last(sem), now)
end
return f
