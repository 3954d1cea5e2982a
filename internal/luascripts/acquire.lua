-- acquire.lua: take the lock if it is free, or confirm a hold we already have.
-- KEYS[1] lock, KEYS[2] fence counter.
-- ARGV[1] token; for a re-entrant hold, the hold's id: owner id, '#', and an
-- id of this hold alone. ARGV[2] ttl in ms, ARGV[3] "1" for a re-entrant hold,
-- ARGV[4] "1" to bump the fencing counter.
-- A re-entrant lock is a hash: the owner's field counts its holds, and each
-- hold has a field of its own, so a retried or resent acquire of one hold
-- counts once.
-- Reply: {1, fence} acquired now; {2, fence} already ours (TTL reset, or one
-- more re-entrant hold); {0, pttl} held by someone else.
local lock, fence = KEYS[1], KEYS[2]
local token, ttl = ARGV[1], ARGV[2]
local reentrant, fencing = ARGV[3] == '1', ARGV[4] == '1'
local owner = reentrant and string.match(token, '^(.*)#')

local function current_fence()
  if not fencing then return 0 end
  return tonumber(redis.call('GET', fence) or '0')
end

local taken
if reentrant then
  taken = redis.call('EXISTS', lock) == 0
  if taken then
    redis.call('HSET', lock, owner, 1, token, 1)
    redis.call('PEXPIRE', lock, ttl)
  end
else
  taken = redis.call('SET', lock, token, 'NX', 'PX', ttl)
end
if taken then
  if fencing then
    return {1, redis.call('INCR', fence)}
  end
  return {1, 0}
end

local kind = redis.call('TYPE', lock)['ok']
if reentrant then
  if kind == 'hash' and redis.call('HEXISTS', lock, owner) == 1 then
    -- A new hold counts; a retry or resend of one already here does not.
    if redis.call('HSETNX', lock, token, 1) == 1 then
      redis.call('HINCRBY', lock, owner, 1)
    end
    -- Nested holds share one expiry: lengthen it, never shorten it.
    if redis.call('PTTL', lock) < tonumber(ttl) then
      redis.call('PEXPIRE', lock, ttl)
    end
    return {2, current_fence()}
  end
elseif kind == 'string' and redis.call('GET', lock) == token then
  -- A retry after a lost reply: the earlier attempt did take the lock.
  redis.call('PEXPIRE', lock, ttl)
  return {2, current_fence()}
end

local left = redis.call('PTTL', lock)
if left < 0 then left = 0 end
return {0, left}
