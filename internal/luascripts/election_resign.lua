-- election_resign.lua: end our term at once, if we still lead.
-- KEYS[1] the election P{K}, KEYS[2] the notify channel; ARGV[1] token.
-- It publishes "released" (lease.MsgReleased): the longest-waiting
-- candidate of each process tries at once, and every observer reads the
-- state again.
-- Reply: 1 resigned; 0 nobody leads; -1 another leads, or the key holds
-- another kind of lock.
-- Not safe to run twice: the second run finds the term gone. The library
-- sends it once (go-redis's NoRetry).
local e, channel = KEYS[1], KEYS[2]
local leader = leader_of(e)
if leader == false then
  return 0
end
if leader ~= ARGV[1] then
  return -1
end
redis.call('DEL', e)
redis.call('PUBLISH', channel, 'released')
return 1
