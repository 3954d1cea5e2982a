-- inspect.lua: what a lock looks like now, for Inspect and List (holds.lua
-- comes first).
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] holder-info hash, KEYS[4]
-- (may be absent) a fair lock's queue times P{K}:qtimes.
-- Reply: an array {kind, pttl, fence, waiters, token1, info1, ttl1, token2,
-- ...}: kind "" for a free key (and nothing else follows), or "?TYPE" for a
-- key of a type no kind uses; pttl the key's time left in ms (-1 without
-- an expiry); fence the kind's current fence, else the counter's value, 0
-- for none; waiters the queued waiters (0 for kinds without a queue); then
-- per holder its token, its info ("" when it wrote none; see acquire.lua)
-- and its time left in ms.
local lock, fence, holders = KEYS[1], KEYS[2], KEYS[3]

local k, t = kind_of(lock)
if k == nil then
  return { '' }
end
local pttl = redis.call('PTTL', lock)
if k == false then
  return { '?' .. t, pttl, 0, 0 }
end
local f = 0
if k.fence then
  f = k.fence(lock)
end
if f == 0 then
  f = tonumber(redis.call('GET', fence) or '0') or 0
end
local waiters = 0
if KEYS[4] then
  -- Live entries only: a waiter that died leaves at its entry's expiry.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  waiters = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
end
local out = { k.name, pttl, string.format('%.0f', f), waiters }
for _, tok in ipairs(k.tokens(lock)) do
  local left = pttl
  if k.ttl then
    left = k.ttl(lock, tok)
  end
  out[#out + 1] = tok
  if k.info then
    out[#out + 1] = k.info(lock, tok)
  else
    out[#out + 1] = redis.call('HGET', holders, tok) or ''
  end
  out[#out + 1] = left
end
return out
