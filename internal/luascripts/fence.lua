-- fence.lua: the fencing counter P{K}:fence, shared by the scripts that hand
-- out fences (acquire.lua, handoff.lua, fence_raise.lua): luascripts.go puts
-- this file in front of each of them.
-- A counter lives FENCE_TTL ms from when it is created, and longer while a
-- fencing mutex hold that took a fence from it lasts (keep_fence); INCR
-- keeps its TTL, so an idle key leaves nothing behind and a busy one
-- restarts about once per FENCE_TTL. A counter below CLOCKED was not started from the clock: INCR
-- created it (it was missing), or an older version of the library wrote it
-- without a TTL. Such a counter restarts at the server's clock in
-- microseconds (TIME) plus START_AHEAD, whatever the caller sends: every
-- counter of a key, on every node, starts at its own server's clock plus
-- the same amount, and no acquirer's clock has a say. A restart lies above
-- every fence handed out before it as long as the servers' clocks do not go
-- back and agree closely enough (SAFETY.md, Fencing), and fewer than one
-- fence per microsecond was handed out on the key. START_AHEAD keeps a
-- restart above the counters that library versions taking an acquirer's
-- clock as a hint started, up to 2 s past the server's clock.
local FENCE_TTL = 60000 -- ms; luascripts.FenceTTL
local CLOCKED = 1e15 -- TIME passed 10^15 microseconds in September 2001
local START_AHEAD = 2000000 -- µs; luascripts.FenceStartAhead

-- next_fence increments the counter at key and returns the new fence,
-- restarting it (see above) when it must.
local function next_fence(key)
  local f = redis.call('INCR', key)
  if f >= CLOCKED then
    return f
  end
  local t = redis.call('TIME')
  -- Microseconds stay below 2^53, exact in a Lua number; '%.0f' prints
  -- every digit.
  local start = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]) + START_AHEAD)
  redis.call('SET', key, start, 'PX', FENCE_TTL)
  return tonumber(start)
end

-- keep_fence makes the counter at key live at least ttl ms (a string)
-- more: a mutex hold's fence is the counter's value while it is held
-- (nobody else increments it meanwhile), and audit_force.lua reads it
-- there, so the scripts that take or renew a fencing mutex hold keep the
-- counter alive as long as the hold. Never shortened: a fence never goes
-- backwards.
local function keep_fence(key, ttl)
  if redis.call('PTTL', key) < tonumber(ttl) then
    redis.call('PEXPIRE', key, ttl)
  end
end
