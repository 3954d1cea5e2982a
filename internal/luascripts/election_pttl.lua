-- election_pttl.lua: the time left on our term.
-- KEYS[1] the election P{K}; ARGV[1] token.
-- Reply (the codes of pttl.lua): milliseconds left (>= 0); -1 nobody
-- leads; -3 another leads, or the key holds another kind of lock; -2 ours
-- but without an expiry.
local e = KEYS[1]
local leader = leader_of(e)
if leader == false then
  return -1
end
if leader ~= ARGV[1] then
  return -3
end
local left = redis.call('PTTL', e)
if left == -1 then
  return -2
end
return left
