-- rw.lua: what the read-write lock's scripts (rw_*.lua) share; luascripts.go
-- puts this file, after fence.lua, in front of each of them.
-- P{K} of a read-write lock is a hash: the field 'mode' is 'read' or 'write',
-- and each holder has a field named by its token, whose value is the server
-- time, in ms, at which that hold expires. The key's own expiry is at least
-- the latest of them, so each hold expires on its own: a field past its time
-- is no hold, and is dropped (prune) by the next call that must know. The
-- hash never has a '' field: that marks a re-entrant mutex (acquire.lua).
-- P{K}:writer holds the token of a writer waiting for the lock, with a TTL
-- of its own: while it is there, new readers wait.

-- now_ms is the server's clock in ms, the clock key expiries run on.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- kind_of names what lock holds key: 'none', 'rw', or another kind for a
-- caller to report ('mutex', 'semaphore', or the Redis type).
local function kind_of(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'hash' then
    if redis.call('HEXISTS', key, '') == 1 then
      return 'mutex' -- re-entrant
    end
    if redis.call('HEXISTS', key, 'mode') == 1 then
      return 'rw'
    end
    return 'hash'
  end
  if t == 'string' then
    return 'mutex'
  end
  if t == 'zset' then
    return 'semaphore'
  end
  return t
end

-- not_rw returns the reply of a script that found no read-write lock at
-- key: ifnone when the key is free, ifother when another kind holds it;
-- nil when a read-write lock does.
local function not_rw(key, ifnone, ifother)
  local kind = kind_of(key)
  if kind == 'none' then
    return ifnone
  end
  if kind ~= 'rw' then
    return ifother
  end
  return nil
end

-- prune drops the holds of lock that expired by now (and their holder
-- info: see info.lua) and returns how many are left, and when the latest
-- of them ends (0 for none).
local function prune(lock, now)
  local all = redis.call('HGETALL', lock)
  local n, last = 0, 0
  for i = 1, #all, 2 do
    if all[i] ~= 'mode' then
      local e = tonumber(all[i + 1])
      if e and e > now then
        n = n + 1
        last = math.max(last, e)
      else
        redis.call('HDEL', lock, all[i])
        if INFO then
          redis.call('HDEL', INFO, all[i])
        end
      end
    end
  end
  return n, last
end

-- live returns the expiry of token's hold on lock, or nil when it has none
-- now (an expired one is dropped).
local function live(lock, token, now)
  local v = redis.call('HGET', lock, token)
  if not v then
    return nil
  end
  local e = tonumber(v)
  if e and e > now then
    return e
  end
  redis.call('HDEL', lock, token)
  if INFO then
    redis.call('HDEL', INFO, token)
  end
  return nil
end

-- missing is the reply for a hold that is not there: -1 when a writer holds
-- the lock (someone else has it), else 0 (gone).
local function missing(lock)
  if redis.call('HGET', lock, 'mode') == 'write' and prune(lock, now_ms()) > 0 then
    return -1
  end
  return 0
end

-- hold sets token's hold on lock to end ttl ms after now, and makes the
-- key live at least as long.
local function hold(lock, token, ttl, now)
  redis.call('HSET', lock, token, now + ttl)
  if redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
  end
end

