-- sem_extend.lua: set the expiry of a permit that is still ours to now + ttl
-- on the server's clock (Extend and renewal).
-- KEYS[1] the semaphore (see sem_acquire.lua); ARGV[1] token, ARGV[2] ttl
-- in ms. KEYS[2] (may be absent) the holder-info hash, kept live as long
-- as the latest permit (info.lua).
-- Reply: 1 extended; 0 no live permit with our token (an expired one is
-- removed); -1 the key holds another kind.
local sem, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
info_init(KEYS[2])

local expiry = permit_expiry(sem, token)
if expiry == nil then
  return -1
end
if not expiry then
  return 0
end
local now = server_ms()
if expiry <= now then
  redis.call('ZREM', sem, token)
  if INFO then
    redis.call('HDEL', INFO, token)
  end
  return 0
end
redis.call('ZADD', sem, 'XX', now + ttl, token)
if redis.call('PTTL', sem) < ttl then
  redis.call('PEXPIRE', sem, ttl)
end
if INFO then
  info.fit(info.last(sem), now)
end
return 1
