-- fair_acquire.lua: take a fair lock in arrival order, or join its queue.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] queue times,
-- KEYS[5] departed tokens (see fair_queue.lua).
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] "1" to hand out a fence
-- (next_fence: see fence.lua), ARGV[4] the entry timeout in ms: how long
-- the waiter's place is kept unless it tries again; "0" to take the lock
-- only if it is free and nobody waits, without joining (TryAcquire);
-- ARGV[5] our Client's id, where a release tells us we are handed the key
-- (inbox: see fair_queue.lua).
-- The lock is ours when it holds our token (a release handed it to us as
-- the queue's head, or an earlier attempt's reply was lost), or when it is
-- free and we are the queue's head or the queue is empty. Our entry is
-- token|ttl|fencing|id (see fair_queue.lua). A token whose waiter left
-- (depart) is refused: the attempt is a late one, and sets nothing.
-- Reply: >= 0 acquired or confirmed ours (TTL lengthened to ttl, never
-- shortened: a late resend must not cut a hold the holder extended), the
-- hold's fence (0 without fencing); < 0 not ours yet: -1 - the holder's
-- milliseconds left (0 when the key is free but others wait first). A key
-- holding another kind's value gives an error reply 'KIND <kind>'.
local lock, fence, queue, times, gone = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, ttl = ARGV[1], ARGV[2]
local fencing, wait = ARGV[3] == '1', tonumber(ARGV[4])
local me = entry(token, ttl, ARGV[3], ARGV[5])

local now = now_ms()
if departed(gone, token, now) then
  return -1
end
prune(queue, times, now)
local v = redis.pcall('GET', lock)
if type(v) == 'table' then
  local err = foreign_kind(lock)
  if err then
    return err
  end
  v = 'held' -- a re-entrant mutex's hash: held, not ours
end
local head = redis.call('LINDEX', queue, 0)
if v == token or (v == false and (head == false or head == me)) then
  if v ~= token then
    redis.call('SET', lock, token, 'PX', ttl)
  elseif redis.call('PTTL', lock) < tonumber(ttl) then
    -- Ours already: lengthened to ttl, never shortened (this may be a
    -- resend arriving late, after the holder extended the hold).
    redis.call('PEXPIRE', lock, ttl)
  end
  leave(queue, times, me)
  if fencing then
    local f = next_fence(fence)
    keep_fence(fence, redis.call('PTTL', lock))
    return f
  end
  return 0
end
if wait > 0 then
  if redis.call('ZADD', times, now + wait, me) == 1 then
    redis.call('RPUSH', queue, me)
  end
  -- The queue lives as long as its longest-lived entry.
  keep_for(queue, wait)
  keep_for(times, wait)
end
local left = 0
if v ~= false then
  left = redis.call('PTTL', lock)
  if left < 0 then left = 0 end
end
return -1 - left
