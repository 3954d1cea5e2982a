-- release.lua: drop our hold if we still have it, then wake waiters.
-- KEYS[1] lock, KEYS[2] notify channel, also the name of the mark waiters
-- leave (waiting.lua); ARGV[1] token, or a re-entrant hold's id (owner id,
-- '#', the hold's own id; see acquire.lua), ARGV[2] "1" for a re-entrant
-- hold, ARGV[3] (may be absent) "1" to publish even without the mark: the
-- releasing process has waiters of its own on the key, whose marks an
-- earlier release may have taken. KEYS[3] (may be absent) the holder-info hash: the hold's field goes
-- with it, the whole hash with the key.
-- Reply: 1 released (key and mark deleted, "released" published when the
-- mark was there or ARGV[3] asks); 2 one re-entrant hold dropped, others of the same owner
-- remain; 0 the key is gone, or holds the owner's other holds but not this
-- one; -1 someone else holds it.
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

-- channel is also the name of the mark waiters leave (waiting.lua): tell
-- them only if one did, and take the mark with the lock.
local waited
if holders then
  redis.call('DEL', lock, holders)
  waited = redis.call('DEL', channel) == 1
else
  waited = redis.call('DEL', lock, channel) == 2
end
if waited or ARGV[3] == '1' then
  redis.call('PUBLISH', channel, 'released')
end
return 1
