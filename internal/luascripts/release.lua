-- release.lua: drop our hold if we still have it, then wake waiters.
-- KEYS[1] lock, KEYS[2] notify channel; ARGV[1] token (or owner id),
-- ARGV[2] "1" for a re-entrant hold.
-- Reply: 1 released (key deleted, waiters told); 2 one re-entrant hold
-- dropped, others of the same owner remain; 0 the key is gone; -1 someone
-- else holds it.
local lock, channel = KEYS[1], KEYS[2]
local token, reentrant = ARGV[1], ARGV[2] == '1'

if reentrant then
  local kind = redis.call('TYPE', lock)['ok']
  if kind == 'none' then
    return 0
  end
  if kind ~= 'hash' or redis.call('HEXISTS', lock, token) == 0 then
    return -1
  end
  if redis.call('HINCRBY', lock, token, -1) > 0 then
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

redis.call('DEL', lock)
redis.call('PUBLISH', channel, 'released')
return 1
