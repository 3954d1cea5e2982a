-- fence.lua: the fencing counter P{K}:fence, shared by the scripts that hand
-- out fences (acquire.lua, handoff.lua, fence_raise.lua): luascripts.go puts
-- this file in front of each of them.
-- A counter lives FENCE_TTL ms from when it is created, and longer while a
-- fencing mutex hold that took a fence from it lasts (keep_fence); INCR
-- keeps its TTL, so an idle key leaves nothing behind and a busy one
-- restarts about once per FENCE_TTL. A counter below CLOCKED was not started from the clock: INCR
-- created it (it was missing), or an older version of the library wrote it
-- without a TTL. Such a counter restarts from the server's clock in
-- microseconds (TIME), which has passed the creation time plus FENCE_TTL of
-- any counter that expired, and so lies above every value that counter
-- handed out, as long as the clock does not go back and fewer than one fence
-- per microsecond was handed out on the key (a counter starts at most
-- HINT_AHEAD past its server's clock, see next_fence, and redlock raises
-- counters to another node's value: the nodes' clocks must agree within
-- FENCE_TTL less HINT_AHEAD).
local FENCE_TTL = 60000 -- ms; luascripts.FenceTTL
local CLOCKED = 1e15 -- TIME passed 10^15 microseconds in September 2001
local HINT_AHEAD = 2000000 -- µs; luascripts.FenceHintAhead

-- next_fence increments the counter at key and returns the new fence. A
-- counter that restarts takes hint (µs, a string; nil for none) instead of
-- the clock when hint lies within HINT_AHEAD ahead of it: redlock passes
-- its own clock plus a second, so that the counters of a new key start
-- equal on every node whose clock agrees with it within a second, and the
-- fence needs no raise round. The bound keeps every counter within
-- HINT_AHEAD of its server's clock, far below FENCE_TTL.
local function next_fence(key, hint)
  local f = redis.call('INCR', key)
  if f >= CLOCKED then
    return f
  end
  local t = redis.call('TIME')
  -- Built as a string: a Lua number would print with too few digits.
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  local h = hint and string.match(hint, '^%d+$') and tonumber(hint)
  if h and h > tonumber(now) and h <= tonumber(now) + HINT_AHEAD then
    now = hint
  end
  redis.call('SET', key, now, 'PX', FENCE_TTL)
  return tonumber(now)
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
