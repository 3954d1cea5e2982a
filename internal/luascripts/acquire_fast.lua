-- acquire_fast.lua: the commonest acquire, a free key taken by a plain hold
-- (not re-entrant, no holder info) whose fence counter runs from the clock,
-- in two commands (three or four with fencing: the counter's PTTL, and a
-- PEXPIRE when it would expire before the hold) and nothing more. luascripts.go puts this file first, in
-- front of fence.lua, other_kind.lua and acquire.lua: Lua makes the closures
-- of those files' functions each time it runs the script, and this path
-- returns before any is made. Anything else falls through to acquire.lua,
-- set telling it what this SET found.
-- KEYS and ARGV: acquire.lua's. Reply: acquire.lua's.
local CLOCKED = 1e15 -- fence.lua's: a counter below it must restart
-- A redlock attempt undone on this node before its acquire arrived (a
-- tombstone, see undo.lua): refused, as if held for 0 ms more.
if KEYS[4] and redis.call('EXISTS', KEYS[4]) == 1 then
  return -1
end
local set -- nil: no SET sent here; false: the key exists; else: taken now
if ARGV[3] ~= '1' and not ARGV[6] then
  set = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
  if set then
    if ARGV[4] ~= '1' then
      return 0
    end
    local f = redis.call('INCR', KEYS[2])
    if f >= CLOCKED then
      -- fence.lua's keep_fence: the counter lives as long as the hold.
      if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
        redis.call('PEXPIRE', KEYS[2], ARGV[2])
      end
      return f
    end
    -- A counter to restart: acquire.lua finds the key ours and hands out
    -- a fence by next_fence, whose INCR restarts it from the clock.
  end
end
