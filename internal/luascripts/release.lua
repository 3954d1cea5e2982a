-- release.lua: drop our hold if we still have it, then wake waiters.
-- KEYS[1] lock, KEYS[2] notify channel; ARGV[1] token, or a re-entrant hold's
-- id (owner id, '#', the hold's own id; see acquire.lua), ARGV[2] "1" for a
-- re-entrant hold. KEYS[3] (may be absent) the holder-info hash: the hold's
-- field goes with it, the whole hash with the key.
-- Reply: 1 released (key deleted, waiters told); 2 one re-entrant hold
-- dropped, others of the same owner remain; 0 the key is gone, or holds the
-- owner's other holds but not this one; -1 someone else holds it.
-- Not safe to run twice: the second run finds the hold gone. The library
-- sends it once (go-redis's NoRetry).
local lock, channel = KEYS[1], KEYS[2]
local token, reentrant = ARGV[1], ARGV[2] == '1'
local holders = KEYS[3]

if reentrant then
  local kind = redis.call('TYPE', lock)['ok']
  if kind == 'none' then
    return 0
  end
  if kind ~= 'hash' then
    return -1
  end
  local owner = string.match(token, '^(.*)#')
  if redis.call('HDEL', lock, token) == 0 then
    if redis.call('HEXISTS', lock, owner) == 1 then
      return 0
    end
    return -1
  end
  if redis.call('HINCRBY', lock, owner, -1) > 0 then
    if holders then
      redis.call('HDEL', holders, token)
    end
    return 2
  end
else
  -- pcall: a hash (someone's re-entrant hold) makes GET fail with WRONGTYPE.
  local v = redis.pcall('GET', lock)
  if v == false then
    return 0
  end
  if v ~= token then
    return -1
  end
end

if holders then
  redis.call('DEL', lock, holders)
else
  redis.call('DEL', lock)
end
redis.call('PUBLISH', channel, 'released')
return 1
