-- rw_pttl.lua: the time left on our hold of a read-write lock (see rw.lua).
-- KEYS[1] lock; ARGV[1] token. KEYS[2] (may be absent) the holder-info
-- hash, from which an expired hold's field goes (info.lua).
-- Reply: milliseconds left (>= 0); -1 our hold is gone; -3 someone else
-- holds the lock.
local lock, token = KEYS[1], ARGV[1]
info_init(KEYS[2])

local r = not_rw(lock, -1, -3)
if r then
  return r
end
local now = now_ms()
local e = live(lock, token, now)
if not e then
  return -1 + 2 * missing(lock)
end
local left = e - now
local k = redis.call('PTTL', lock)
if k >= 0 and k < left then
  left = k -- the key goes first (someone shortened it)
end
return left
