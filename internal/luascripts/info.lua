-- info.lua: holder info for the kinds with many holds on one key, the
-- read-write lock and the semaphore: luascripts.go puts this file in front
-- of their scripts (rw_*.lua, sem_*.lua).
-- The hash P{K}:holders has one field per hold that writes info: its token
-- -> "fence US acquired-at (server ms) US info", info being "owner US host
-- US pid US metadata" (as acquire.lua writes a mutex's; US = \31). Redis
-- 7.0 has no expiry per field, so the hash's own TTL follows the longest
-- live hold on the key: a hold that starts or is extended past it
-- lengthens it (info.reach); when a hold ends early (released, forced) or
-- is shortened, the script works out the longest hold left and sets the
-- TTL to it (info.fit). So the hash never outlives the last hold. A field
-- whose hold ended without a release (its holder crashed) stays until a
-- script that walks the holds finds it expired and drops it (rw.lua's
-- prune and live, info.prune), or until the hash expires; Inspect reads
-- the fields of live holds only, so it never shows one. A hold dropped by
-- a script without INFO (a holder of the key that writes no holder info
-- found it expired) leaves its field behind: a release with INFO sweeps
-- such fields out (info.sweep).

-- INFO is the holder-info hash when the script was given one (the caller's
-- holds write holder info), else nil; info then holds its helpers. Each
-- script calls info_init with its KEYS entry first. The helpers are made
-- only for a script with INFO, so that one without pays for none.
local INFO, info

local function info_init(key)
  INFO = key
  if not key then
    return
  end
  info = {}

  -- reach makes INFO live at least until exp (server ms; now is the
  -- server's clock).
  function info.reach(exp, now)
    if redis.call('PTTL', INFO) < exp - now then
      redis.call('PEXPIRE', INFO, exp - now)
    end
  end

  -- fit makes INFO live until last (server ms), the end of the longest
  -- hold left on the key: deleted when that has passed (no hold is left).
  function info.fit(last, now)
    if last > now then
      redis.call('PEXPIRE', INFO, last - now)
    else
      redis.call('DEL', INFO)
    end
  end

  -- write records info for token's hold, taken with fence f at now (server
  -- ms) and ending at exp, and makes INFO live at least as long.
  function info.write(token, text, f, now, exp)
    redis.call('HSET', INFO, token, string.format('%.0f', f) .. '\31' .. string.format('%.0f', now) .. '\31' .. text)
    info.reach(exp, now)
  end

  -- prune drops the holder info of the permits of the semaphore sem (a
  -- sorted set: see sem_acquire.lua) that expired by now, before the
  -- caller drops the permits.
  function info.prune(sem, now)
    local gone = redis.pcall('ZRANGEBYSCORE', sem, '-inf', now)
    if gone.err then
      return -- another kind: the caller's own call reports it
    end
    for _, token in ipairs(gone) do
      redis.call('HDEL', INFO, token)
    end
  end

  -- sweep drops the fields of holds no longer on the key: held(token)
  -- tells those that are.
  function info.sweep(held)
    for _, token in ipairs(redis.call('HKEYS', INFO)) do
      if not held(token) then
        redis.call('HDEL', INFO, token)
      end
    end
  end

  -- last is the expiry (server ms) of the semaphore sem's latest permit, 0
  -- for none.
  function info.last(sem)
    local last = redis.call('ZRANGE', sem, -1, -1, 'WITHSCORES')
    return tonumber(last[2] or '0')
  end
end

