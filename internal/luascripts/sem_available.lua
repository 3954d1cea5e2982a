-- sem_available.lua: how many permits of a semaphore are free now. Read only.
-- KEYS[1] the semaphore (see sem_acquire.lua); ARGV[1] n.
-- Reply: n less the live permits, at least 0. Error "KIND <kind>" when the
-- key holds another kind of lock (see other_kind.lua).
local sem, n = KEYS[1], tonumber(ARGV[1])

local out = redis.pcall('ZCOUNT', sem, '(' .. server_ms(), '+inf')
if type(out) == 'table' and out.err then
  return redis.error_reply('KIND ' .. kind_of(sem))
end
return math.max(n - out, 0)
