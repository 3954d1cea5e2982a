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

-- The read-write lock (P{K} a hash with a field "mode"): every field but
-- "mode" is taken for a holder's token until the read-write lock's author
-- says otherwise.
local RWLOCK = {
  name = 'rwlock',
  tokens = function(lock)
    local out = {}
    for _, f in ipairs(redis.call('HKEYS', lock)) do
      if f ~= 'mode' then
        out[#out + 1] = f
      end
    end
    return out
  end,
  drop = function(lock, token)
    redis.call('HDEL', lock, token)
    return redis.call('HLEN', lock) <= 1
  end,
}

-- The semaphore (P{K} a sorted set): each member is taken for a permit's
-- token until the semaphore's author says otherwise.
KINDS.zset = {
  name = 'semaphore',
  tokens = function(lock) return redis.call('ZRANGE', lock, 0, -1) end,
  drop = function(lock, token)
    redis.call('ZREM', lock, token)
    return redis.call('ZCARD', lock) == 0
  end,
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
  return KINDS[t] or false, t
end

