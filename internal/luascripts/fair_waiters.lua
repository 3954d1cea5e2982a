-- fair_waiters.lua: how many waiters a fair lock's queue holds now.
-- KEYS[1] queue times (see fair_queue.lua). No ARGV.
-- Reply: the entries not yet expired, >= 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
