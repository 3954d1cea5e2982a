-- sem_acquire.lua: take one permit of a semaphore if fewer than n are out,
-- or confirm a permit we already have (a retry after a lost reply).
-- KEYS[1] the semaphore: a sorted set, member a permit's token, score the
-- permit's expiry in ms on the server's clock (TIME); KEYS[2] fence counter.
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] n, ARGV[4] "1" to hand out a
-- fence (next_fence: see fence.lua).
-- Holder info (optional, see info.lua): KEYS[3] the holder-info hash,
-- ARGV[5] this holder's info ("owner US host US pid US metadata"). A
-- permit taken or confirmed sets its field; expired permits' fields go.
-- Expired permits are dropped first, so a crashed holder's permit counts
-- until its expiry and not a moment longer. The set's own TTL is kept at
-- least as long as its latest permit's, so the key never outlives its
-- permits by more than the longest TTL used on it, and never lives forever.
-- A permit confirmed ours ends ttl ms from now, or later if it already did
-- (a late resend of the acquire never shortens it).
-- Reply: >= 0 the permit is ours: its fence, 0 without fencing; < 0 n
-- permits are out, the earliest ends in -1 - reply ms. Error "KIND <kind>"
-- when the key holds another kind of lock (see other_kind.lua).
local sem, fence = KEYS[1], KEYS[2]
local token, ttl, n, fencing = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
info_init(KEYS[3])

local now = server_ms()
if INFO then
  info.prune(sem, now)
end
-- pcall: another kind's key makes ZREMRANGEBYSCORE fail with WRONGTYPE; the
-- kind is only looked up then, so a free or zset key costs nothing more.
local r = redis.pcall('ZREMRANGEBYSCORE', sem, '-inf', now)
if type(r) == 'table' and r.err then
  return redis.error_reply('KIND ' .. kind_of(sem))
end
-- A permit already ours (a retry whose first reply was lost) is confirmed
-- and counts once; a new one needs a free place under n.
local had = redis.call('ZSCORE', sem, token)
if not had and redis.call('ZCARD', sem) >= n then
  local first = redis.call('ZRANGE', sem, 0, 0, 'WITHSCORES')
  local left = 0
  if first[2] then
    left = math.max(tonumber(first[2]) - now, 0)
  end
  return -1 - left
end
-- A permit confirmed ours keeps a later expiry than now + ttl: the call may
-- be a resend arriving late, after the holder extended the permit, and
-- must not end it before the holder's deadline.
local exp = now + ttl
if had then
  exp = math.max(exp, tonumber(had))
end
redis.call('ZADD', sem, exp, token)
if redis.call('PTTL', sem) < exp - now then
  redis.call('PEXPIRE', sem, exp - now)
end
local f = 0
if fencing then
  f = next_fence(fence)
end
if INFO then
  info.write(token, ARGV[5], f, now, exp)
end
return f
