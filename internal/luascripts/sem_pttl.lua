-- sem_pttl.lua: the time left on a permit that is still ours.
-- KEYS[1] the semaphore (see sem_acquire.lua); ARGV[1] token.
-- Reply: milliseconds left (>= 0); -1 no live permit with our token; -3 the
-- key holds another kind (the codes of pttl.lua).
local sem, token = KEYS[1], ARGV[1]

local expiry = permit_expiry(sem, token)
if expiry == nil then
  return -3
end
if not expiry then
  return -1
end
local left = expiry - server_ms()
if left <= 0 then
  return -1
end
return left
