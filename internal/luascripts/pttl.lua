-- pttl.lua: the time left on a hold that is still ours.
-- KEYS[1] lock; ARGV[1] token (or owner id), ARGV[2] "1" for a re-entrant hold.
-- Reply: milliseconds left (>= 0); -1 the key is gone; -3 someone else
-- holds it; -2 ours but without an expiry.
local lock = KEYS[1]
local token, reentrant = ARGV[1], ARGV[2] == '1'

local kind = redis.call('TYPE', lock)['ok']
if kind == 'none' then
  return -1
end
if reentrant then
  if kind ~= 'hash' or redis.call('HEXISTS', lock, token) == 0 then
    return -3
  end
elseif kind ~= 'string' or redis.call('GET', lock) ~= token then
  return -3
end
local left = redis.call('PTTL', lock)
if left == -1 then
  return -2
end
return left
