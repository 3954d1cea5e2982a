-- pttl.lua: the time left on a hold that is still ours.
-- KEYS[1] lock; ARGV[1] token (or owner id), ARGV[2] "1" for a re-entrant hold.
-- Reply: milliseconds left (>= 0); -1 not ours (gone or someone else's);
-- -2 ours but without an expiry.
local lock = KEYS[1]
local token, reentrant = ARGV[1], ARGV[2] == '1'

local kind = redis.call('TYPE', lock)['ok']
if reentrant then
  if kind ~= 'hash' or redis.call('HEXISTS', lock, token) == 0 then
    return -1
  end
elseif kind ~= 'string' or redis.call('GET', lock) ~= token then
  return -1
end
local left = redis.call('PTTL', lock)
if left == -1 then
  return -2
end
return left
