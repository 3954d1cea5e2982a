-- waiting.lua: the mark a waiter leaves on a key it found taken, for the
-- scripts whose attempts may wait (acquire.lua, once_acquire.lua,
-- fair_acquire.lua): luascripts.go puts this file in front of each.
-- The mark is a key named as the lock's notify channel, P{K}:notify (a
-- channel and a key never meet in Redis), in the lock's hash tag, so in
-- its slot. release.lua deletes it with the lock and publishes "released"
-- only when it was there: a key nobody waited for costs no PUBLISH. A
-- waiter marks again with each attempt that finds the key taken, so the
-- mark outlives the wait of any waiter whose backoff stays below
-- WAIT_MARK_TTL; one that sleeps longer between attempts may miss a
-- release's message and wakes by its timer. A mark nobody needs any more
-- costs its holder's release one PUBLISH, as every release cost before.
local WAIT_MARK_TTL = 60000 -- ms; luascripts.WaitMarkTTL

-- mark_waiting marks lock (P{K}) as waited for.
local function mark_waiting(lock)
  redis.call('SET', lock .. ':notify', '1', 'PX', WAIT_MARK_TTL)
end
