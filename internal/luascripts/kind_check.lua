-- kind_check.lua: tell a key holding another kind of lock from a held
-- mutex, for the scripts of the kinds that share the mutex's string at
-- P{K} (fair_acquire.lua, multi_acquire.lua): fair.go and multi.go put
-- other_kind.lua and this file in front of them.

-- foreign_kind returns the error reply for a lock key that holds another
-- kind's value ('KIND ' and the word kind_of gives it, which the Go side
-- maps to ErrInvalid), or nil when the value is a mutex's: a string, or a
-- re-entrant mutex's hash, which is simply held. kind_of is
-- other_kind.lua's, put in front of this file.
local function foreign_kind(lock)
  local k = kind_of(lock)
  if k == 'mutex' or k == 'none' then
    return nil
  end
  return redis.error_reply('KIND ' .. k)
end
