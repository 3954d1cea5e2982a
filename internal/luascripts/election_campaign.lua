-- election_campaign.lua: lead the election if nobody does, or confirm that
-- we lead it already (a retry after a lost reply).
-- KEYS[1] the election P{K}, KEYS[2] the fence counter, KEYS[3] the notify
-- channel. ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the leader's value.
-- A new term is the counter's next fence (next_fence), so terms strictly
-- increase across leaders, the counter's expiry and a restart without
-- persistence. A new term publishes "watch" (lease.MsgWatch): observers
-- read the state again, waiting candidates sleep on.
-- Reply: > 0 leading: the term (a term confirmed ours keeps its term and
-- value, its TTL lengthened to ttl, never shortened); < 0 another leads,
-- for -1 - reply milliseconds more.
-- Error "KIND <kind>" when another kind of lock holds the key.
local e, fence, channel = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, value = ARGV[1], ARGV[2], ARGV[3]

local leader = leader_of(e)
if leader == nil then
  return redis.error_reply('KIND ' .. kind_of(e))
end
if leader == false then
  local term = next_fence(fence)
  local t = redis.call('TIME')
  local since = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
  redis.call('HSET', e, 'token', token, 'value', value, 'term', string.format('%.0f', term), 'since', since)
  redis.call('PEXPIRE', e, ttl)
  redis.call('PUBLISH', channel, 'watch')
  return term
end
if leader == token then
  if redis.call('PTTL', e) < tonumber(ttl) then
    redis.call('PEXPIRE', e, ttl)
  end
  return tonumber(redis.call('HGET', e, 'term'))
end
local left = redis.call('PTTL', e)
if left < 0 then left = 0 end
return -1 - left
