-- steal.lua: give a held mutex to another token, keeping its time left, as
-- if another process had taken it over.
-- KEYS[1] lock; ARGV[1] the thief's token, ARGV[2] the TTL in ms to use when
-- the key has none. Reply: 1 stolen, 0 the key was free, -1 the key holds
-- another kind (a read-write lock's hash, a semaphore's zset).
local lock = KEYS[1]
local kind = redis.call('TYPE', lock)['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'string' and (kind ~= 'hash' or redis.call('HEXISTS', lock, 'mode') == 1) then
  return -1
end
local left = redis.call('PTTL', lock)
if left <= 0 then
  left = ARGV[2]
end
redis.call('DEL', lock)
redis.call('SET', lock, ARGV[1], 'PX', left)
return 1
