-- steal.lua: give a held mutex to another token, keeping its time left, as
-- if another process had taken it over.
-- KEYS[1] lock; ARGV[1] the thief's token, ARGV[2] the TTL in ms to use when
-- the key has none. Reply: 1 stolen, 0 the key was free; an error "KIND
-- <kind>" when the key holds another kind of lock (a read-write lock's hash,
-- a semaphore's zset) or no lock at all.
local lock = KEYS[1]
local kind = redis.call('TYPE', lock)['ok']
if kind == 'none' then
  return 0
end
if kind == 'zset' then
  return redis.error_reply('KIND semaphore')
end
if kind == 'hash' and redis.call('HEXISTS', lock, 'mode') == 1 then
  return redis.error_reply('KIND read-write lock')
end
if kind ~= 'string' and kind ~= 'hash' then
  return redis.error_reply('KIND ' .. kind)
end
local left = redis.call('PTTL', lock)
if left <= 0 then
  left = ARGV[2]
end
redis.call('DEL', lock)
redis.call('SET', lock, ARGV[1], 'PX', left)
return 1
