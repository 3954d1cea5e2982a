-- fair_release.lua: drop our hold of a fair lock and hand the key to the
-- queue's head; also how a waiter leaves the queue.
-- KEYS[1] lock, KEYS[2] queue, KEYS[3] queue times, KEYS[4] notify channel.
-- ARGV[1] token.
-- If the lock holds our token, the first live waiter of the queue gets the
-- key at once: it is set to that waiter's token, for as long as the
-- waiter's entry had left (its next attempt finds its token and resets the
-- TTL to its own), the waiter leaves the queue, and a message 'to:<token>'
-- wakes it alone. With nobody queued the key is deleted and 'released'
-- published, as for a mutex. Either way our token leaves the queue, so a
-- waiter whose wait ended runs this to leave; if the key is free then, the
-- new head is woken.
-- Reply: 1 released; 0 the key is gone; -1 someone else holds it.
-- Not safe to run twice: the second run finds the hold gone. The library
-- sends it once.
local lock, queue, times, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token = ARGV[1]

local v = redis.pcall('GET', lock)
leave(queue, times, token)
local now = now_ms()
prune(queue, times, now)
local head = redis.call('LINDEX', queue, 0)
if v ~= token then
  if v == false and head then
    redis.call('PUBLISH', channel, 'to:' .. head)
  end
  if v == false then
    return 0
  end
  return -1
end
if head then
  local exp = redis.call('ZSCORE', times, head)
  local left = 1
  if exp then left = math.max(tonumber(exp) - now, 1) end
  redis.call('SET', lock, head, 'PX', left)
  leave(queue, times, head)
  redis.call('PUBLISH', channel, 'to:' .. head)
  return 1
end
redis.call('DEL', lock)
redis.call('PUBLISH', channel, 'released')
return 1
