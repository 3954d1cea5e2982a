-- multi_release.lua: drop every lock of one slot group of a multi-lock that
-- still holds our token, waking each one's waiters.
-- KEYS: pairs of lock and its notify channel: KEYS[2i-1] lock i, KEYS[2i]
-- its channel. ARGV[1] token.
-- Reply: 1 every lock was ours and is released; 0 some lock was gone (the
-- others released); -1 someone else holds some lock (ours released).
-- A second run finds the holds gone and replies 0, so go-redis must not
-- resend it (the library sends each call once); after a failed call the
-- library sends a new one for that group, reading its reply only as success
-- or failure (the token is never used again, so nobody else's hold goes).
local token = ARGV[1]
local reply = 1
for i = 1, #KEYS / 2 do
  local lock = KEYS[2 * i - 1]
  local v = redis.pcall('GET', lock)
  if v == token then
    redis.call('DEL', lock)
    redis.call('PUBLISH', KEYS[2 * i], 'released')
  elseif v == false then
    if reply == 1 then reply = 0 end
  else
    reply = -1
  end
end
return reply
