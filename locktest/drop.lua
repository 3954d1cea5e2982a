-- drop.lua: remove a lock's primary key, as its expiry or a forced release
-- would; with ARGV[1] "1", also wake its waiters as a release does.
-- KEYS[1] lock, KEYS[2] notify channel; ARGV[1] "1" to publish, ARGV[2] the
-- payload. Reply: 1 removed, 0 the key was free.
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] == '1' then
  redis.call('PUBLISH', KEYS[2], ARGV[2])
end
return 1
