-- limiter_available.lua: how many units a limiter could give now, and its
-- state (limiter_lib.lua comes first). Read only.
-- KEYS[1] the limiter P{K}, KEYS[2] its reservations P{K}:res. ARGV[1] per
-- (us), ARGV[2] rate n, ARGV[3] burst.
-- Reply: {available, tat_us, now_us, queued}: available at least 0; tat_us
-- the stored tat, or now when the bucket is full; queued the reservations
-- whose units end after now (those that may still give units back).
-- Error "KIND <kind>" when the key holds another kind of lock.
local cost, burst = tonumber(ARGV[1]) / tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_us()
local tat, err = limiter_tat(KEYS[1], now)
if not tat then
  return err
end
local avail = math.floor((now + burst * cost - tat) / cost + 1e-9)
local queued = redis.call('ZCOUNT', KEYS[2], '(' .. num(now), '+inf')
return { math.max(avail, 0), math.floor(tat), now, queued }
