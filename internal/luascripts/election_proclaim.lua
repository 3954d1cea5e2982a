-- election_proclaim.lua: set the leader's value, same term, if we lead.
-- KEYS[1] the election P{K}, KEYS[2] the notify channel; ARGV[1] token,
-- ARGV[2] the new value. It publishes "watch" (lease.MsgWatch):
-- observers read the state again.
-- Reply: 1 set; 0 nobody leads; -1 another leads, or the key holds another
-- kind of lock.
local e, channel = KEYS[1], KEYS[2]
local leader = leader_of(e)
if leader == false then
  return 0
end
if leader ~= ARGV[1] then
  return -1
end
redis.call('HSET', e, 'value', ARGV[2])
redis.call('PUBLISH', channel, 'watch')
return 1
