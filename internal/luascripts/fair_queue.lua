-- fair_queue.lua: the wait queue of a fair lock, shared by the fair scripts
-- (fair_acquire.lua, fair_release.lua): fair.go puts this file in front of
-- each of them.
-- A fair lock keeps, beside its string at P{K}, three companions:
--   P{K}:queue  a list of waiting entries, in arrival order
--   P{K}:qtimes a sorted set entry -> the server time (ms) the entry expires
--   P{K}:qgone  a sorted set token -> the server time (ms) until which the
--               token, whose waiter gave up and left, is refused (depart)
-- An entry is the waiter's token, its hold's TTL in ms, its fencing flag and
-- its Client's id, joined by '|' (see entry), so a release can hand the key
-- straight over and tell that Client alone, on its own channel (inbox).
-- A waiter's entry expires unless its waiter refreshes it by a new attempt
-- before then, so a dead waiter leaves the queue after its timeout. Each
-- key lives as long as its longest entry, so an idle queue leaves nothing.

-- now_ms is the server's clock in milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- prune drops the entries that expired by now.
local function prune(queue, times, now)
  local dead = redis.call('ZRANGEBYSCORE', times, '-inf', now)
  for _, d in ipairs(dead) do
    redis.call('LREM', queue, 1, d)
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', times, '-inf', now)
  end
end

-- entry is the queue entry of a waiter with token, ttl (ms) and fencing,
-- of the Client with id (letters and digits).
local function entry(token, ttl, fencing, id)
  return token .. '|' .. ttl .. '|' .. fencing .. '|' .. id
end

-- inbox is the channel of the Client with id on the lock whose channel is
-- channel: P{K}:notify:<id>, in the key's slot. The messages meant for one
-- waiter (give:, to:) go there, so no other Client reads them.
local function inbox(channel, id)
  return channel .. ':' .. id
end

-- leave takes an entry out of the queue.
local function leave(queue, times, e)
  if redis.call('ZREM', times, e) == 1 then
    redis.call('LREM', queue, 1, e)
  end
end


-- keep_for makes key live at least ms more.
local function keep_for(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- depart marks token as gone for ms: its waiter gave up, and an attempt of
-- its that reaches Redis only now (its reply abandoned, its write delayed
-- or resent) must neither take the key nor queue the token again, where a
-- release would hand the key to a waiter that is no longer there.
local function depart(gone, token, now, ms)
  redis.call('ZREMRANGEBYSCORE', gone, '-inf', now)
  redis.call('ZADD', gone, now + ms, token)
  keep_for(gone, ms)
end

-- departed reports whether token's waiter left (depart) less than the
-- mark's time ago.
local function departed(gone, token, now)
  local t = redis.call('ZSCORE', gone, token)
  return t ~= false and tonumber(t) > now
end
