-- multi_extend.lua: reset the TTL of every lock of one slot group of a
-- multi-lock, if every one still holds our token (Extend and renewal).
-- KEYS: the locks. ARGV[1] token, ARGV[2] ttl in ms.
-- Reply: 1 all ours, extended; 0 some lock is gone; -1 someone else holds
-- some lock. Unless all are ours, none is extended: the multi-lock is lost.
local token, ttl = ARGV[1], ARGV[2]
local reply = 1
for i = 1, #KEYS do
  local v = redis.pcall('GET', KEYS[i])
  if v == false then
    if reply == 1 then reply = 0 end
  elseif v ~= token then
    reply = -1
  end
end
if reply == 1 then
  for i = 1, #KEYS do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return reply
