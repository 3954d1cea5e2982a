-- once_acquire.lua: return the stored result of a Once, or else make the
-- mutex's acquire attempt in the same call: luascripts.go puts fence.lua in
-- front of this text and acquire.lua after it.
-- KEYS: acquire.lua's (with the holder-info hash when it writes holder
-- info), then the stored result (P{K}:result) last.
-- ARGV: acquire.lua's.
-- Reply: the stored result, a bulk string (see once.go for its layout); or,
-- when none is stored, acquire.lua's integer reply.
local set -- acquire.lua reads it: no SET sent yet (see acquire_fast.lua)
local stored = redis.call('GET', KEYS[#KEYS])
if stored then
  return stored
end
