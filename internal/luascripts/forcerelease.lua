-- forcerelease.lua: free a lock whoever holds it, or one holder of it, and
-- tell each holder's process (holds.lua comes first).
-- KEYS[1] lock, KEYS[2] notify channel, KEYS[3] holder-info hash,
-- KEYS[4] the force record (a set of tokens).
-- ARGV[1] a holder's token (or, for a re-entrant mutex, its owner id) to
-- remove that holder alone; "" for every holder. ARGV[2] the force
-- channel every holder's Client listens on ("" for none).
-- Each removed holder is told with "force:" and its token (lease.MsgForce)
-- on the key's channel, which wakes a waiter, and on the force channel,
-- where its process hears it (a channel is not a key: no slot applies).
-- A key whose last holder goes is deleted, with its holder info; when
-- holders are left, the holder info lives as long as the longest of them
-- (info.lua). Each removed hold's token goes into the force record,
-- which lives as long as the longest removed hold had left, plus
-- FORCED_SLACK: a holder that missed the message finds its token there when
-- its next renewal finds the key gone, and reports a force release, not a
-- vanished key.
-- Reply: the tokens of the holds removed (a held key that names no holder:
-- one empty token); none when the key is free, or has no holder with that
-- token. An error reply "KIND type" for a key of a type no kind uses.
local lock, channel, holders, forced = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local only = ARGV[1]
local FORCED_SLACK = 1000 -- ms: a renewal sent just before the hold's expiry still finds the record

-- left is the time in ms the hold of tok has left on the kind k's lock.
local function left(k, tok)
  if k.ttl then
    return k.ttl(lock, tok)
  end
  return math.max(redis.call('PTTL', lock), 0)
end

local k, t = kind_of(lock)
if k == nil or k.holdless then
  return {} -- a limiter's key is no hold: deleting it would refill its bucket
end
if k == false then
  return redis.error_reply('KIND ' .. t)
end
local tokens = k.tokens(lock)
local gone = {}
local force = ARGV[2] or ''
if only == '' then
  gone = tokens
else
  for _, tok in ipairs(tokens) do
    if tok == only or string.match(tok, '^(.*)#') == only then
      gone[#gone + 1] = tok
    end
  end
  if #gone == 0 then
    return {}
  end
end
-- The record first, while the holds' time left can still be read.
if #gone > 0 then
  local longest = 0
  for _, tok in ipairs(gone) do
    longest = math.max(longest, left(k, tok))
    redis.call('SADD', forced, tok)
  end
  if redis.call('PTTL', forced) < longest + FORCED_SLACK then
    redis.call('PEXPIRE', forced, longest + FORCED_SLACK)
  end
end
if only == '' then
  redis.call('DEL', lock, holders)
else
  local empty = false
  for _, tok in ipairs(gone) do
    empty = k.drop(lock, tok)
    redis.call('HDEL', holders, tok)
  end
  if empty then
    redis.call('DEL', lock, holders)
  elseif k.ttl then
    local last = 0
    for _, tok in ipairs(k.tokens(lock)) do
      last = math.max(last, k.ttl(lock, tok))
    end
    if last > 0 then
      redis.call('PEXPIRE', holders, last)
    else
      redis.call('DEL', holders)
    end
  end
end
if #gone == 0 then
  -- A held key that names no holder: freed all the same.
  redis.call('PUBLISH', channel, 'released')
  return { '' }
end
for _, tok in ipairs(gone) do
  redis.call('PUBLISH', channel, 'force:' .. tok)
  if force ~= '' then
    redis.call('PUBLISH', force, 'force:' .. tok)
  end
end
return gone
