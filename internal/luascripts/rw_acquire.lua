-- rw_acquire.lua: take a read or write hold of a read-write lock (see
-- rw.lua), or confirm one we already have.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] waiting writer's mark.
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] 'read' or 'write', ARGV[4] "1"
-- to hand out a fence, ARGV[5] the waiting mark's ttl in ms, 0 for a writer
-- that will not wait (TryAcquire).
-- Holder info (optional, see info.lua): KEYS[4] the holder-info hash,
-- ARGV[6] this holder's info ("owner US host US pid US metadata"). A hold
-- taken or confirmed sets its field.
-- Readers share the lock while no writer holds it and no writer waits; a
-- writer needs it empty, and when it cannot have it marks itself waiting,
-- which keeps new readers out until it has the lock or its mark expires.
-- A writer's hold takes a new fence (next_fence: see fence.lua); a reader's
-- reads the current one.
-- A hold confirmed ours ends ttl ms from now, or later if it already did (a
-- late resend of the acquire never shortens it).
-- Reply: >= 0 acquired now, or confirmed ours (a retry after a lost reply):
-- the hold's fence, 0 without fencing; < 0 not now, try again within
-- -1 - reply ms. An error reply 'KIND <kind>' when the key holds another
-- kind of lock.
local lock, fence, mark = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local fencing, markttl = ARGV[4] == '1', ARGV[5]
info_init(KEYS[4])
local now = now_ms()

-- grant gives token its hold, ending ttl ms from now, or at last (server
-- ms) when that is later: last is the end of a hold of ours already here.
local function grant(last)
  local span = ttl
  if last and last - now > span then
    span = last - now
  end
  redis.call('HSET', lock, 'mode', mode)
  hold(lock, token, span, now)
  local f = 0
  if mode == 'write' then
    if redis.call('GET', mark) == token then
      redis.call('DEL', mark)
    end
    if fencing then
      f = next_fence(fence)
    end
  elseif fencing then
    f = tonumber(redis.call('GET', fence) or '0')
    if f < CLOCKED then
      -- No counter (or none from the clock): start one; every fence handed
      -- out before lies below it.
      f = next_fence(fence)
    end
  end
  if INFO then
    info.write(token, ARGV[6], f, now, now + span)
  end
  return f
end

local function waiting()
  return mode == 'read' and redis.call('EXISTS', mark) == 1
end

local kind = kind_of(lock)
if kind == 'none' then
  if waiting() then
    return -1 - math.max(redis.call('PTTL', mark), 0)
  end
  return grant()
end
if kind ~= 'rw' then
  return redis.error_reply('KIND ' .. kind)
end
local last = live(lock, token, now)
if last then
  -- Ours already: an earlier attempt's reply was lost. This may be a
  -- resend arriving late, after the holder extended the hold: it keeps its
  -- later end.
  return grant(last)
end
if mode == 'read' and redis.call('HGET', lock, 'mode') == 'read' then
  if not waiting() then
    return grant()
  end
elseif prune(lock, now) == 0 then
  -- Every hold in it had expired: the lock is free.
  redis.call('DEL', lock)
  if not waiting() then
    return grant()
  end
end
if mode == 'write' and markttl ~= '0' then
  local m = redis.call('GET', mark)
  if not m or m == token then
    redis.call('SET', mark, token, 'PX', markttl)
  end
end
local left = redis.call('PTTL', lock)
if mode == 'read' then
  left = math.max(left, redis.call('PTTL', mark))
end
return -1 - math.max(left, 0)
