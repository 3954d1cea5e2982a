-- fair_release.lua: drop our hold of a fair lock and hand the key to the
-- queue's head; also how a waiter leaves the queue.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] queue times,
-- KEYS[5] departed tokens, KEYS[6] notify channel.
-- ARGV[1] token, ARGV[2] our ttl in ms, ARGV[3] our fencing flag ("1"/"0"),
-- ARGV[5] our Client's id: with the token, our queue entry (see
-- fair_queue.lua); ARGV[4] how long (ms) to refuse the token's attempts
-- from now on (depart), for a waiter that gives up, whose attempts may
-- still reach Redis after this; "0" for a holder's release.
-- If the lock holds our token, the first live waiter of the queue gets the
-- key at once: it is set to that waiter's token for the TTL its entry
-- names, with a new fence if the entry asks for one (next_fence: see
-- fence.lua), the waiter leaves the queue, and a message
-- 'give:<token>:<fence>' on its Client's own channel (inbox: see
-- fair_queue.lua) wakes it alone: it holds the lock from then on, without
-- a call of its own. With nobody queued the key is deleted and 'released'
-- published on the key's channel, as for a mutex. Either way our entry
-- leaves the queue, so a waiter whose wait ended runs this to leave; if
-- the key is free then, the new head is told to try ('to:<token>', on its
-- Client's channel).
-- Reply: 1 released; 0 the key is gone; -1 someone else holds it.
-- Not safe to run twice: the second run finds the hold gone. The library
-- sends it once.
local lock, fence, queue, times, gone, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, refuse = ARGV[1], tonumber(ARGV[4])

local v = redis.pcall('GET', lock)
local now = now_ms()
if refuse > 0 then
  depart(gone, token, now, refuse)
end
leave(queue, times, entry(token, ARGV[2], ARGV[3], ARGV[5]))
prune(queue, times, now)
local head = redis.call('LINDEX', queue, 0)
local htoken, httl, hfencing, hid
if head then
  htoken, httl, hfencing, hid = string.match(head, '^(.*)|(%d+)|(%d)|(%w*)$')
end
if v ~= token then
  if v == false and htoken then
    redis.call('PUBLISH', inbox(channel, hid), 'to:' .. htoken)
  end
  if v == false then
    return 0
  end
  return -1
end
if htoken then
  redis.call('SET', lock, htoken, 'PX', httl)
  leave(queue, times, head)
  local f = 0
  if hfencing == '1' then
    f = next_fence(fence)
    keep_fence(fence, httl)
  end
  -- %.0f: a fence printed by '..' would come out in exponent form.
  redis.call('PUBLISH', inbox(channel, hid), 'give:' .. htoken .. ':' .. string.format('%.0f', f))
  return 1
end
redis.call('DEL', lock)
redis.call('PUBLISH', channel, 'released')
return 1
