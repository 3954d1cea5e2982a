-- other_kind.lua: which other kind of lock holds a key, for the scripts that
-- find it taken (acquire.lua, the sem_*.lua scripts), and the semaphore's
-- helpers (server_ms, permit_expiry): luascripts.go and sem.go put this file
-- in front of each of those scripts.
-- The primary key P{K} of each kind: a mutex is a string token, or a hash
-- with the field '' (re-entrant holds); a read-write lock is a hash with the
-- field "mode" and no '' field; a semaphore is a sorted set; an election
-- is a hash with the field "term" and neither '' nor "mode"; a rate limiter
-- is a hash with the field "tat" (limiter_lib.lua).
-- kind_of(key) returns 'mutex', 'rwlock', 'semaphore', 'election', 'limiter', 'none', or the Redis
-- type of a value no lock of ours writes. A script that finds another kind
-- replies with the error "KIND " .. kind_of(key), which the Go side maps to
-- an error wrapping ErrInvalid that names both kinds.
local function kind_of(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'string' then
    return 'mutex'
  elseif t == 'zset' then
    return 'semaphore'
  elseif t == 'hash' then
    if redis.call('HEXISTS', key, '') == 0 and redis.call('HEXISTS', key, 'mode') == 1 then
      return 'rwlock'
    end
    if redis.call('HEXISTS', key, '') == 0 and redis.call('HEXISTS', key, 'term') == 1 then
      return 'election'
    end
    if redis.call('HEXISTS', key, '') == 0 and redis.call('HEXISTS', key, 'tat') == 1 then
      return 'limiter'
    end
    return 'mutex'
  end
  return t
end

-- server_ms is the server's clock in milliseconds (TIME): the semaphore's
-- permit expiries are read and written on it, never on a client's clock.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- permit_expiry returns the expiry (server ms) of token's permit in the
-- semaphore sem: a number; false when sem has no permit with that token;
-- nil when sem holds another kind of lock.
local function permit_expiry(sem, token)
  local score = redis.pcall('ZSCORE', sem, token)
  if type(score) == 'table' and score.err then
    return nil
  end
  return score and tonumber(score)
end
