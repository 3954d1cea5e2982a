-- election_lib.lua: what the election's scripts share; election.go puts
-- this file, after other_kind.lua, in front of each of them.
-- An election's P{K} is a hash: token (the leader's), value, term (a fence
-- from P{K}:fence, see fence.lua) and since (the server's clock in ms when
-- the term began). It expires with the leader's lease.

-- leader_of returns the leader's token of the election e; false when
-- nobody leads (the key is gone); nil when e holds another kind of lock.
local function leader_of(e)
  local t = redis.call('TYPE', e)['ok']
  if t == 'none' then
    return false
  end
  if t ~= 'hash' or redis.call('HEXISTS', e, 'term') == 0 or redis.call('HEXISTS', e, '') == 1 then
    return nil
  end
  return redis.call('HGET', e, 'token')
end
