-- limiter_lib.lua: the rate limiter's helpers, put in front of each
-- limiter_*.lua script (limiter.go), after other_kind.lua.
--
-- A limiter is GCRA on the server's clock, in microseconds. Its P{K} is a
-- hash whose field "tat" is the theoretical arrival time: the instant by
-- which every unit taken so far has been paid for at the rate. A unit costs
-- T = per / n microseconds; a bucket of burst units tolerates tat up to
-- burst * T ahead of now. P{K}:res is a sorted set of the reservations
-- that may still give units back: member the reservation's id, score the
-- tat its units end at (its place in the queue). P{K}:done remembers, for
-- a while, the ids already settled, so that a resent settle counts once.

-- now_us is the server's clock (TIME) in microseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- num writes a number without losing digits: Lua's tostring keeps 14.
local function num(x)
  return string.format('%.17g', x)
end

-- limiter_tat returns the stored tat of the limiter h, or now when there
-- is none or it has passed (a full bucket); nil and the error reply when h
-- holds another kind of lock.
local function limiter_tat(h, now)
  local t = redis.call('TYPE', h)['ok']
  if t == 'none' then
    return now
  end
  local tat = t == 'hash' and redis.call('HGET', h, 'tat')
  if not tat then
    return nil, redis.error_reply('KIND ' .. kind_of(h))
  end
  return math.max(tonumber(tat), now)
end

-- limiter_keep stores tat in h and makes h and res (and done, when given)
-- expire once the bucket is full again, and no sooner than idle_ms.
local function limiter_keep(h, res, tat, now, idle_ms)
  local ms = math.ceil((tat - now) / 1000) + idle_ms
  redis.call('HSET', h, 'tat', num(tat))
  redis.call('PEXPIRE', h, ms)
  if redis.call('EXISTS', res) == 1 then
    redis.call('PEXPIRE', res, ms)
  end
end
