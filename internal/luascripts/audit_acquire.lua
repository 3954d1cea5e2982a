-- audit_acquire.lua: the hook of the audited acquire.lua,
-- once_acquire.lua, sem_acquire.lua and rw_acquire.lua (see audit.lua). An "acquired" entry when the reply is a
-- fence (>= 0) and ARGV[1] did not hold the lock before: a resent acquire
-- confirming its hold writes none, nor does a Once's stored result.
local audit_before = audit_holds(KEYS[1], ARGV[1])
local audit_reply = audit_body()
if type(audit_reply) == 'number' and audit_reply >= 0 and not audit_before then
  audit_add('acquired', AUDIT[3], audit_reply)
end
return audit_reply
