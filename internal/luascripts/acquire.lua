-- acquire.lua: take the lock if it is free, or confirm a hold we already have.
-- KEYS[1] lock, KEYS[2] fence counter.
-- ARGV[1] token; for a re-entrant hold, the hold's id: owner id, '#', and an
-- id of this hold alone. ARGV[2] ttl in ms, ARGV[3] "1" for a re-entrant hold,
-- ARGV[4] "1" to hand out a fence (next_fence: see fence.lua), ARGV[5] (may
-- be absent) not read: its place keeps ARGV[6] where callers put it.
-- Holder info (optional): KEYS[3] the holder-info hash P{K}:holders, ARGV[6]
-- this holder's info ("owner US host US pid US metadata", US = \31). A hold
-- taken or confirmed sets its field, the hold's token, to "fence US
-- acquired-at (server ms) US info", and the hash's TTL to the lock's.
-- Tombstone (redlock): KEYS[4] the attempt's tombstone P{K}:undone:<token>
-- (see undo.lua), KEYS[3] then the holder-info hash, unused without ARGV[6].
-- An acquire that finds its tombstone was undone already, and is refused
-- (acquire_fast.lua checks it first, before any write).
-- A re-entrant lock is a hash: the owner's field counts its holds, and each
-- hold has a field of its own, so a retried or resent acquire of one hold
-- counts once. The field '' (no owner id and no hold id is empty) keeps the
-- fence of the first hold, which the owner's nested holds share: the counter
-- may expire while the lock is held, the hash does not.
-- A hold confirmed ours keeps its TTL when that is longer than ttl (a late
-- resend of the acquire never shortens it), and is lengthened to ttl
-- otherwise.
-- Reply: >= 0 acquired now, or confirmed ours (TTL at least ttl, or one
-- more re-entrant hold): the hold's fence, 0 without fencing; < 0 held by
-- someone else, for another -1 - reply milliseconds.
-- Error "KIND <kind>" when another kind of lock holds the key (other_kind.lua).
local lock, fence = KEYS[1], KEYS[2]
local token, ttl = ARGV[1], ARGV[2]
local reentrant, fencing = ARGV[3] == '1', ARGV[4] == '1'
local holders, info = KEYS[3], ARGV[6]

-- note records the holder info of the hold with fence f, expiring in
-- left ms (the lock's TTL), and returns f. Formatted: a fence has more
-- digits than tostring keeps.
local function note(f, left)
  if holders and info then
    local t = redis.call('TIME')
    local at = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
    redis.call('HSET', holders, token, string.format('%.0f', f) .. '\31' .. at .. '\31' .. info)
    redis.call('PEXPIRE', holders, left or ttl)
  end
  return f
end

if not reentrant then
  -- set: what acquire_fast.lua's SET found (nil when it sent none).
  if set or (set == nil and redis.call('SET', lock, token, 'NX', 'PX', ttl)) then
    if fencing then
      local f = next_fence(fence)
      keep_fence(fence, ttl)
      return note(f)
    end
    return note(0)
  end
  -- pcall: a hash (someone's re-entrant hold) makes GET fail with WRONGTYPE.
  if redis.pcall('GET', lock) == token then
    -- A retry after a lost reply: the earlier attempt did take the lock, but
    -- its fence never reached us. A new one serves: no one else held the
    -- lock since. The TTL is lengthened to ttl, never shortened: this may
    -- be a resend arriving late, after the holder extended the hold past
    -- ttl, and it must not make the key expire before the holder's
    -- deadline.
    local left = redis.call('PTTL', lock)
    if left < tonumber(ttl) then
      redis.call('PEXPIRE', lock, ttl)
      left = ttl
    end
    if fencing then
      local f = next_fence(fence)
      keep_fence(fence, left)
      return note(f, left)
    end
    return note(0, left)
  end
else
  local owner = string.match(token, '^(.*)#')
  if redis.call('EXISTS', lock) == 0 then
    local f = 0
    if fencing then
      f = next_fence(fence)
    end
    redis.call('HSET', lock, owner, 1, token, 1, '', f)
    redis.call('PEXPIRE', lock, ttl)
    return note(f)
  end
  -- kind_of: a read-write lock's hash has a field "mode", which an owner
  -- named "mode" must not take for its own.
  if redis.call('TYPE', lock)['ok'] == 'hash' and kind_of(lock) == 'mutex' and redis.call('HEXISTS', lock, owner) == 1 then
    -- A new hold counts; a retry or resend of one already here does not.
    if redis.call('HSETNX', lock, token, 1) == 1 then
      redis.call('HINCRBY', lock, owner, 1)
    end
    -- Nested holds share one expiry: lengthen it, never shorten it.
    if redis.call('PTTL', lock) < tonumber(ttl) then
      redis.call('PEXPIRE', lock, ttl)
    end
    local left = holders and info and redis.call('PTTL', lock)
    if not fencing then
      return note(0, left)
    end
    -- A hash written before fences were kept in it: the counter, which
    -- such a version never let expire, has the fence.
    return note(tonumber(redis.call('HGET', lock, '') or redis.call('GET', fence) or '0'), left)
  end
end

-- Taken. By another kind of lock (see other_kind.lua)? Asked only here, on
-- the contended path, so a free key costs nothing more.
local other = kind_of(lock)
if other ~= 'mutex' then
  return redis.error_reply('KIND ' .. other)
end
local left = redis.call('PTTL', lock)
if left < 0 then left = 0 end
return -1 - left
