-- multi_acquire.lua: take every lock of one slot group of a multi-lock, or
-- none of them.
-- KEYS: pairs of lock and its fence counter: KEYS[2i-1] lock i, KEYS[2i]
-- its fence counter, all in one cluster slot.
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] "1" to hand out fences
-- (next_fence: see fence.lua).
-- Each lock is a plain mutex hold (a string at P{K}), so a mutex on any of
-- the keys excludes the multi-lock; with fencing, its counter lives at
-- least as long as the hold (keep_fence), as a mutex hold's does. A lock already holding our token (an
-- earlier attempt's reply was lost) counts as ours.
-- Reply: {1, fence 1, fence 2, ...} all taken or confirmed ours (a lock
-- confirmed ours keeps a TTL longer than ttl, else gets ttl: a late resend
-- never shortens a hold), fences 0 without fencing; {0, ms} nothing taken:
-- a lock is held by someone else for ms more (0 if unknown). A key holding
-- another kind's value gives an error reply 'KIND <kind>'.
local token, ttl, fencing = ARGV[1], ARGV[2], ARGV[3] == '1'
local n = #KEYS / 2
local mine = {} -- mine[i]: lock i holds our token already

for i = 1, n do
  local lock = KEYS[2 * i - 1]
  local v = redis.pcall('GET', lock)
  mine[i] = v == token
  if type(v) == 'table' then
    local err = foreign_kind(lock)
    if err then
      return err
    end
  end
  if v ~= false and v ~= token then
    local left = redis.call('PTTL', lock)
    if left < 0 then left = 0 end
    return {0, left}
  end
end
local out = {1}
for i = 1, n do
  local lock = KEYS[2 * i - 1]
  if not mine[i] then
    redis.call('SET', lock, token, 'PX', ttl)
  elseif redis.call('PTTL', lock) < tonumber(ttl) then
    -- Ours already: lengthened to ttl, never shortened (this may be a
    -- resend arriving late, after the holder extended the hold).
    redis.call('PEXPIRE', lock, ttl)
  end
  local f = 0
  if fencing then
    f = next_fence(KEYS[2 * i])
    keep_fence(KEYS[2 * i], redis.call('PTTL', lock))
  end
  out[i + 1] = f
end
return out
