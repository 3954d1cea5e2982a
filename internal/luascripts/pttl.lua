-- pttl.lua: the time left on a hold that is still ours.
-- KEYS[1] lock; ARGV[1] token, or a re-entrant hold's id (see acquire.lua),
-- ARGV[2] "1" for a re-entrant hold.
-- Reply: milliseconds left (>= 0); -1 the key is gone, or holds the owner's
-- other holds but not this one; -3 someone else holds it; -2 ours but
-- without an expiry.
local lock = KEYS[1]
local token, reentrant = ARGV[1], ARGV[2] == '1'

local kind = redis.call('TYPE', lock)['ok']
if kind == 'none' then
  return -1
end
if reentrant then
  if kind ~= 'hash' then
    return -3
  end
  if redis.call('HEXISTS', lock, token) == 0 then
    if redis.call('HEXISTS', lock, string.match(token, '^(.*)#')) == 1 then
      return -1
    end
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
