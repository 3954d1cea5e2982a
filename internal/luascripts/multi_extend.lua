-- multi_extend.lua: reset the TTL of every lock of one slot group of a
-- multi-lock, if every one still holds our token (Extend and renewal).
-- KEYS: the locks; or, when ARGV[3] is "1" (a fencing multi-lock), pairs
-- of lock and its fence counter, which is kept alive at least as long as
-- the lock (as fence.lua's keep_fence does). ARGV[1] token, ARGV[2] ttl in
-- ms.
-- Reply: 1 all ours, extended; 0 some lock is gone; -1 someone else holds
-- some lock. Unless all are ours, none is extended: the multi-lock is lost.
local token, ttl = ARGV[1], ARGV[2]
local step = 1
if ARGV[3] == '1' then
  step = 2
end
local reply = 1
for i = 1, #KEYS, step do
  local v = redis.pcall('GET', KEYS[i])
  if v == false then
    if reply == 1 then reply = 0 end
  elseif v ~= token then
    reply = -1
  end
end
if reply == 1 then
  for i = 1, #KEYS, step do
    redis.call('PEXPIRE', KEYS[i], ttl)
    if step == 2 and redis.call('PTTL', KEYS[i + 1]) < tonumber(ttl) then
      redis.call('PEXPIRE', KEYS[i + 1], ttl)
    end
  end
end
return reply
