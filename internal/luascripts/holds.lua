-- holds.lua: who holds a lock, whatever its kind, for the operators' scripts
-- (inspect.lua, forcerelease.lua): luascripts.go puts this file in front of
-- each of them.
-- Every kind keeps its primary state at P{K}, and its Redis type tells the
-- kind apart. KINDS maps that type to the kind's entry; a kind's author
-- fills in its own:
--   name                the kind, as Info.Kind shows it
--   tokens(lock)        the holders' tokens (a re-entrant hold's id)
--   ttl(lock, token)    (may be absent) a holder's own time left in ms; by
--                       default the key's PTTL
--   drop(lock, token)   remove one holder; reply true when the key is left
--                       with no holder (the caller then deletes it)
--   fence(lock)         (may be absent) the fence of the current holds
--   info(lock, token)   (may be absent) a holder's info, as acquire.lua
--                       writes it; by default its field of P{K}:holders
local KINDS = {}

-- The mutex: P{K} holds the token (a fair lock's too; its queue is a
-- companion).
KINDS.string = {
  name = 'mutex',
  tokens = function(lock) return { redis.call('GET', lock) } end,
  drop = function(lock, token) return true end,
}

-- A hold id of a re-entrant mutex: the owner id, '#', a UUID.
local HOLD_ID = '#%x+%-%x+%-%x+%-%x+%-%x+$'

-- A hash: the re-entrant mutex (an owner's count, one field per hold id,
-- and '' with the fence), or the read-write lock (a field "mode").
KINDS.hash = {
  name = 'mutex',
  tokens = function(lock)
    local out = {}
    for _, f in ipairs(redis.call('HKEYS', lock)) do
      if string.find(f, HOLD_ID) then
        out[#out + 1] = f
      end
    end
    return out
  end,
  -- A re-entrant mutex has one owner at a time: forcing one of its holds
  -- frees the key.
  drop = function(lock, token) return true end,
  fence = function(lock) return tonumber(redis.call('HGET', lock, '') or '0') end,
}

-- holds_now is the server's clock in ms, on which the read-write lock's and
-- the semaphore's per-holder expiries run.
local function holds_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The read-write lock (P{K} a hash, see rw.lua): the field "mode" says
-- "read" or "write", every other field is a holder's token, its value the
-- server time in ms at which that hold expires. A field past its time is no
-- hold (the lock's scripts drop it lazily): it is not shown.
local RWLOCK = {
  name = 'rwlock',
  tokens = function(lock)
    local out = {}
    local now = holds_now()
    local all = redis.call('HGETALL', lock)
    for i = 1, #all, 2 do
      if all[i] ~= 'mode' and (tonumber(all[i + 1]) or 0) > now then
        out[#out + 1] = all[i]
      end
    end
    return out
  end,
  ttl = function(lock, token)
    return math.max((tonumber(redis.call('HGET', lock, token)) or 0) - holds_now(), 0)
  end,
  -- The key goes when no live holder is left (expired fields do not count).
  drop = function(lock, token)
    redis.call('HDEL', lock, token)
    local now = holds_now()
    for _, v in ipairs(redis.call('HVALS', lock)) do
      if (tonumber(v) or 0) > now then
        return false
      end
    end
    return true
  end,
}

-- The semaphore (P{K} a sorted set, see sem_acquire.lua): member a permit's
-- token, score its expiry in ms on the server's clock. An expired permit is
-- not shown.
KINDS.zset = {
  name = 'semaphore',
  tokens = function(lock) return redis.call('ZRANGEBYSCORE', lock, '(' .. holds_now(), '+inf') end,
  ttl = function(lock, token)
    return math.max((tonumber(redis.call('ZSCORE', lock, token)) or 0) - holds_now(), 0)
  end,
  drop = function(lock, token)
    redis.call('ZREM', lock, token)
    return redis.call('ZCOUNT', lock, '(' .. holds_now(), '+inf') == 0
  end,
}

-- The election (P{K} a hash with the field "term", see election_lib.lua):
-- one holder, the leader; its fence is its term, and its info shows when
-- the term began and, as its metadata, the leader's value.
local ELECTION = {
  name = 'election',
  tokens = function(lock) return { redis.call('HGET', lock, 'token') } end,
  drop = function(lock, token) return true end,
  fence = function(lock) return tonumber(redis.call('HGET', lock, 'term') or '0') end,
  info = function(lock, token)
    local v = redis.call('HMGET', lock, 'term', 'since', 'value')
    return (v[1] or '0') .. '\31' .. (v[2] or '') .. '\31\31\31\31' .. (v[3] or '')
  end,
}

-- The rate limiter (P{K} a hash with the field "tat", see limiter_lib.lua):
-- it has no holders; its units are taken, not held. holdless: a force
-- release leaves it alone.
local LIMITER = {
  name = 'limiter',
  holdless = true,
  tokens = function(lock) return {} end,
  drop = function(lock, token) return false end,
}

-- kind_of returns the entry of the kind held at lock, nil when the key is
-- free, and false (with the Redis type) for a type no kind uses.
local function kind_of(lock)
  local t = redis.call('TYPE', lock)['ok']
  if t == 'none' then
    return nil, t
  end
  if t == 'hash' and redis.call('HEXISTS', lock, 'mode') == 1 then
    return RWLOCK, t
  end
  if t == 'hash' and redis.call('HEXISTS', lock, 'term') == 1 and redis.call('HEXISTS', lock, '') == 0 then
    return ELECTION, t
  end
  if t == 'hash' and redis.call('HEXISTS', lock, '') == 0 and redis.call('HEXISTS', lock, 'tat') == 1 then
    return LIMITER, t
  end
  return KINDS[t] or false, t
end

