-- rw_extend.lua: reset the TTL of our hold of a read-write lock (see rw.lua;
-- Extend and renewal).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] ttl in ms.
-- Reply: 1 extended; 0 our hold is gone; -1 someone else holds the lock.
local lock, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])

local kind = kind_of(lock)
if kind == 'none' then
  return 0
end
if kind ~= 'rw' then
  return -1
end
local now = now_ms()
if not live(lock, token, now) then
  return missing(lock)
end
hold(lock, token, ttl, now)
return 1
