-- limiter_settle.lua: settle a reservation with the units it used
-- (limiter_lib.lua comes first): give back what it did not use, or take
-- what it used beyond it.
-- KEYS[1] the limiter P{K}, KEYS[2] its reservations P{K}:res, KEYS[3] the
-- settled ids P{K}:done, KEYS[4] the notify channel. ARGV[1] per (us),
-- ARGV[2] rate n, ARGV[3] idle_ms, ARGV[4] the reservation's id, ARGV[5]
-- the units it reserved, ARGV[6] the units it used, ARGV[7] how long (ms)
-- a settled id is remembered.
-- Reply: {settled, refund_us}: settled 0 when the id was settled already
-- (nothing changes); refund_us the time given back to the queue.
-- Error "KIND <kind>" when the key holds another kind of lock.
--
-- Only the part of the reservation still ahead of now can go back: units
-- whose time has passed were the rate's to spend then. Giving back d
-- shortens the reservation from its end and moves every reservation
-- queued after it d earlier, tat too, so the queue keeps its order and has
-- no hole: a later reservation is due sooner, never someone new ahead of
-- it. Waiters learn of it from the message "all" on the notify channel.
local h, res, done, notify = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local cost, idle_ms, id = tonumber(ARGV[1]) / tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local n, used, keep_ms = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_us()
local tat, err = limiter_tat(h, now)
if not tat then
  return err
end
redis.call('ZREMRANGEBYSCORE', res, '-inf', num(now))
redis.call('ZREMRANGEBYSCORE', done, '-inf', num(now))
if redis.call('ZSCORE', done, id) then
  return { 0, 0 }
end
local d = 0
local e = redis.call('ZSCORE', res, id)
if e then
  e = tonumber(e)
  redis.call('ZREM', res, id)
  if used < n then
    d = math.min((n - used) * cost, e - now)
    local later = redis.call('ZRANGEBYSCORE', res, '(' .. num(e), '+inf', 'WITHSCORES')
    for j = 1, #later, 2 do
      redis.call('ZADD', res, num(tonumber(later[j + 1]) - d), later[j])
    end
    tat = math.max(tat - d, now)
  end
end
if used > n then
  tat = tat + (used - n) * cost
end
limiter_keep(h, res, tat, now, idle_ms)
redis.call('ZADD', done, num(now + keep_ms * 1000), id)
redis.call('PEXPIRE', done, keep_ms)
if d > 0 then
  redis.call('PUBLISH', notify, 'all')
end
return { 1, math.floor(d) }
