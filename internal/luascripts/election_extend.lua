-- election_extend.lua: reset the TTL of our term (Extend and renewal).
-- KEYS[1] the election P{K}; ARGV[1] token, ARGV[2] ttl in ms.
-- Reply: 1 extended; 0 nobody leads; -1 another leads, or the key holds
-- another kind of lock.
local e = KEYS[1]
local leader = leader_of(e)
if leader == false then
  return 0
end
if leader ~= ARGV[1] then
  return -1
end
redis.call('PEXPIRE', e, ARGV[2])
return 1
