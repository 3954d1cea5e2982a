-- limiter_take.lua: take units from one limiter or from several at once
-- (limiter_lib.lua comes first), all or none.
-- KEYS, per limiter i: KEYS[2i-1] the limiter P{K}, KEYS[2i] its
-- reservations P{K}:res. ARGV[1] "allow" or "reserve"; ARGV[2] idle_ms, the
-- least TTL of the keys; then per limiter five values: per (us), rate n,
-- burst, units wanted, reservation id ("" for allow).
-- Reply: {granted, wait_us, now_us}. allow takes nothing and replies
-- granted 0 when some limiter could not give its units now, wait_us then
-- being the time until all could; otherwise every limiter takes its units
-- and granted is 1, wait_us the time until the last of them is due (0 when
-- all are due now). A reserve whose id is already queued takes nothing
-- more and reports that reservation, so a resent reserve counts once.
-- Error "KIND <kind>" when a key holds another kind of lock.
local mode, idle_ms = ARGV[1], tonumber(ARGV[2])
local now = now_us()
local tats, ends, wait, known = {}, {}, 0, false
for i = 1, #KEYS / 2 do
  local h, res, a = KEYS[2 * i - 1], KEYS[2 * i], 3 + 5 * (i - 1)
  local cost = tonumber(ARGV[a]) / tonumber(ARGV[a + 1])
  local tau, n, id = tonumber(ARGV[a + 2]) * cost, tonumber(ARGV[a + 3]), ARGV[a + 4]
  local tat, err = limiter_tat(h, now)
  if not tat then
    return err
  end
  local e = tat + n * cost
  local queued = id ~= '' and redis.call('ZSCORE', res, id)
  if queued then
    e, known = tonumber(queued), true
  end
  wait = math.max(wait, e - tau - now)
  tats[i], ends[i] = tat, e
end
if mode == 'allow' and wait > 0 then
  return { 0, math.ceil(wait), now }
end
if not known then
  for i = 1, #KEYS / 2 do
    local h, res, id = KEYS[2 * i - 1], KEYS[2 * i], ARGV[3 + 5 * (i - 1) + 4]
    if id ~= '' then
      redis.call('ZADD', res, num(ends[i]), id)
    end
    limiter_keep(h, res, ends[i], now, idle_ms)
  end
end
return { 1, math.ceil(math.max(wait, 0)), now }
