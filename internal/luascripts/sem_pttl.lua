-- sem_pttl.lua: the time left on a permit that is still ours.
-- KEYS[1] the semaphore (see sem_acquire.lua); ARGV[1] token.
-- Reply: milliseconds left (>= 0); -1 no live permit with our token; -3 the
-- key holds another kind (the codes of pttl.lua).
local sem, token = KEYS[1], ARGV[1]

local score = redis.pcall('ZSCORE', sem, token)
if type(score) == 'table' and score.err then
  return -3
end
if not score then
  return -1
end
local left = tonumber(score) - server_ms()
if left <= 0 then
  return -1
end
return left
