-- rw_extend.lua: reset the TTL of our hold of a read-write lock (see rw.lua;
-- Extend and renewal).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] ttl in ms. KEYS[2] (may be absent)
-- the holder-info hash, kept live as long as the longest hold (info.lua).
-- Reply: 1 extended; 0 our hold is gone; -1 someone else holds the lock.
local lock, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
info_init(KEYS[2])

local r = not_rw(lock, 0, -1)
if r then
  return r
end
local now = now_ms()
local old = live(lock, token, now)
if not old then
  return missing(lock)
end
hold(lock, token, ttl, now)
if INFO then
  if old > now + ttl then
    -- Shortened: it may have been the longest hold.
    local _, last = prune(lock, now)
    info.fit(last, now)
  else
    info.reach(now + ttl, now)
  end
end
return 1
