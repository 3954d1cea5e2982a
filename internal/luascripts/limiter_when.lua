-- limiter_when.lua: how long until reservations are due, for a waiter
-- woken by a settle that moved the queue (limiter_lib.lua comes first).
-- Read only.
-- KEYS, per reservation i: KEYS[2i-1] its limiter P{K}, KEYS[2i] the
-- limiter's reservations P{K}:res. ARGV, per reservation, three values: per
-- (us), rate n, burst; then one id per reservation, in the same order.
-- Reply: {wait_us, now_us}: the time until the last of them is due, 0 when
-- all are (a reservation no longer queued is due).
local now = now_us()
local k = #KEYS / 2
local wait = 0
for i = 1, k do
  local a = 1 + 3 * (i - 1)
  local e = redis.call('ZSCORE', KEYS[2 * i], ARGV[3 * k + i])
  if e then
    local tau = tonumber(ARGV[a + 2]) * tonumber(ARGV[a]) / tonumber(ARGV[a + 1])
    wait = math.max(wait, tonumber(e) - tau - now)
  end
end
return { math.ceil(wait), now }
