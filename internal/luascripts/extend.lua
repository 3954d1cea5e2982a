-- extend.lua: reset the TTL of a hold that is still ours (Extend and renewal).
-- KEYS[1] lock; ARGV[1] token, or a re-entrant hold's id (see acquire.lua),
-- ARGV[2] ttl in ms, ARGV[3] "1" for a re-entrant hold. KEYS[2] (may be
-- absent) the holder-info hash, given the lock's TTL when the lock's is set;
-- or, when ARGV[4] is "1", the fence counter of a fencing mutex hold,
-- which is kept alive at least as long (keep_fence, fence.lua).
-- Reply: 1 extended; 0 the key is gone, or holds the owner's other holds but
-- not this one; -1 someone else holds it.
local lock = KEYS[1]
local token, ttl, reentrant = ARGV[1], ARGV[2], ARGV[3] == '1'
local holders, counter = KEYS[2], nil
if ARGV[4] == '1' then
  holders, counter = nil, KEYS[2]
end

local kind = redis.call('TYPE', lock)['ok']
if kind == 'none' then
  return 0
end
if reentrant then
  if kind ~= 'hash' then
    return -1
  end
  if redis.call('HEXISTS', lock, token) == 0 then
    if redis.call('HEXISTS', lock, string.match(token, '^(.*)#')) == 1 then
      return 0
    end
    return -1
  end
  -- Nested holds share one expiry: lengthen it, never shorten it.
  if redis.call('PTTL', lock) >= tonumber(ttl) then
    return 1
  end
elseif kind ~= 'string' or redis.call('GET', lock) ~= token then
  return -1
end
redis.call('PEXPIRE', lock, ttl)
if holders then
  redis.call('PEXPIRE', holders, ttl)
elseif counter and redis.call('PTTL', counter) < tonumber(ttl) then
  redis.call('PEXPIRE', counter, ttl)
end
return 1
