-- audit_force.lua: the hook of the audited forcerelease.lua (see audit.lua;
-- holds.lua is in the prelude). Its extra KEY: the fence counter. One
-- "force-released" entry per hold the call removed, with that hold's token,
-- fence and, from its holder info when it wrote any, its owner, host, pid
-- and metadata (empty without holder info: unknown). The fence comes from the holder info, or
-- the kind's (a re-entrant mutex keeps it), or for a plain mutex the fence
-- counter (the last fence handed out, which is its holder's: a fencing
-- hold keeps the counter alive as long as itself, keep_fence in fence.lua),
-- else 0. A plain mutex hold taken with fencing off and no holder info
-- records no fence of its own: its entry shows the counter's value, which
-- an earlier hold on the key may have left.
local audit_counter = table.remove(KEYS)

-- audit_tokens lists the holds of lock, with their fences and info.
local function audit_tokens(lock, holders)
  local k = kind_of(lock)
  if not k then
    return {}
  end
  local out = {}
  for _, tok in ipairs(k.tokens(lock)) do
    local info = redis.call('HGET', holders, tok)
    local f = nil
    if k.fence then
      f = k.fence(lock)
    elseif k.name == 'mutex' then
      f = redis.call('GET', audit_counter)
    end
    out[#out + 1] = { token = tok, info = info, fence = f }
  end
  return out
end

local audit_was = audit_tokens(KEYS[1], KEYS[3])
local audit_reply = audit_body()
if type(audit_reply) == 'table' and #audit_reply > 0 then
  local left = {}
  for _, h in ipairs(audit_tokens(KEYS[1], KEYS[3])) do
    left[h.token] = true
  end
  for _, h in ipairs(audit_was) do
    if not left[h.token] then
      if h.info then
        -- "fence US acquired-at US owner US host US pid US metadata"
        local f = {}
        for s in string.gmatch(h.info .. '\31', '([^\31]*)\31') do
          f[#f + 1] = s
        end
        audit_add('force-released', h.token, f[1], f[3] or '', f[4], f[5], f[6] or '')
      else
        audit_add('force-released', h.token, h.fence, '', '', '', '')
      end
    end
  end
end
return audit_reply
