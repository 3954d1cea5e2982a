-- audit.lua: the audit entries a script writes itself (WithAudit), for the
-- audited variant of a script: luascripts builds it (audit.go) as this
-- file, the script wrapped whole in the local function audit_body (for
-- forcerelease.lua, its body only, holds.lua coming first), then the
-- script's hook (audit_<name>.lua), which calls audit_body and writes the
-- entries its reply calls for.
-- The call carries, after the script's own KEYS and ARGV (which the body
-- sees exactly as without audit): the hook's extra KEYS (if any), then the
-- stream, last in KEYS; the audit's ARGVs, then their count, last in ARGV.
-- The audit's ARGVs: [1] the stream's approximate cap (XADD MAXLEN ~), [2]
-- the caller's key, [3] the hold's token as events show it, [4] its fence
-- ('' when the reply or the hook has it), [5] owner, [6] host, [7] pid,
-- [8] metadata; the hook's own follow.
-- An entry's fields are the ones the library's separate XADD writes
-- (audit.go): event, key, token, fence, owner, host, pid, metadata, time,
-- and hold for a re-entrant hold.
-- time is the server's clock (TIME), RFC 3339 in UTC with microseconds.
local AUDIT_STREAM = table.remove(KEYS)
local AUDIT = {}
do
  local n = tonumber(table.remove(ARGV))
  for i = n, 1, -1 do
    AUDIT[i] = table.remove(ARGV)
  end
end

-- audit_time is the server's clock as RFC 3339 in UTC, with microseconds
-- (days to a civil date as in H. Hinnant's civil_from_days).
local function audit_time()
  local t = redis.call('TIME')
  local s = tonumber(t[1])
  local days = math.floor(s / 86400)
  local rem = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%06dZ', y, m, d,
    math.floor(rem / 3600), math.floor(rem % 3600 / 60), rem % 60, tonumber(t[2]))
end

-- audit_fence formats a fence: it has more digits than tostring keeps.
local function audit_fence(f)
  if type(f) == 'number' then
    return string.format('%.0f', f)
  end
  return f or '0'
end

-- audit_add appends one entry: event for token with fence f; owner, host,
-- pid and metadata default to the call's own. A re-entrant hold's id
-- ("owner#id") is shown as its owner id, the token Token() returns, with
-- the whole id in a field hold of its own.
local function audit_add(event, token, f, owner, host, pid, metadata)
  local fields = { 'event', event, 'key', AUDIT[2], 'token', token, 'fence', audit_fence(f),
    'owner', owner or AUDIT[5], 'host', host or AUDIT[6], 'pid', pid or AUDIT[7],
    'metadata', metadata or AUDIT[8], 'time', audit_time() }
  local o = string.match(token, '^(.+)#')
  if o then
    fields[6] = o
    fields[#fields + 1] = 'hold'
    fields[#fields + 1] = token
  end
  redis.call('XADD', AUDIT_STREAM, 'MAXLEN', '~', AUDIT[1], '*', unpack(fields))
end

-- audit_holds reports whether token holds lock already: the lock's token,
-- a field of a hash (a re-entrant hold, a read-write hold) or a member of
-- a sorted set (a permit). A hold confirmed again (a resent acquire, a
-- resent store) is no new event.
local function audit_holds(lock, token)
  local t = redis.call('TYPE', lock)['ok']
  if t == 'string' then
    return redis.call('GET', lock) == token
  elseif t == 'hash' then
    return redis.call('HEXISTS', lock, token) == 1
  elseif t == 'zset' then
    return redis.call('ZSCORE', lock, token) ~= false
  end
  return false
end

