-- kind_check.lua: tell a key holding another kind of lock from a held
-- mutex, for the scripts of the kinds that share the mutex's string at
-- P{K} (fair_acquire.lua, multi_acquire.lua): fair.go and multi.go put
-- this file in front of them.

-- foreign_kind returns the error reply for a lock key that holds another
-- kind's value ('KIND ' and its name, which the Go side maps to
-- ErrInvalid), or nil when the value is a mutex's: a string, or a
-- re-entrant mutex's hash, which is simply held.
local function foreign_kind(lock)
  local t = redis.call('TYPE', lock)['ok']
  if t == 'string' or t == 'none' then
    return nil
  end
  local name = t
  if t == 'hash' then
    if redis.call('HEXISTS', lock, 'mode') == 0 then
      return nil
    end
    name = 'read-write lock'
  elseif t == 'zset' then
    name = 'semaphore'
  end
  return redis.error_reply('KIND ' .. name)
end

