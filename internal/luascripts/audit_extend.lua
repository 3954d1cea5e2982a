-- audit_extend.lua: the hook of the audited extend.lua, sem_extend.lua
-- and rw_extend.lua (see audit.lua),
-- sent by Extend only, never by renewal. An "extended" entry on reply 1.
local audit_reply = audit_body()
if audit_reply == 1 then
  audit_add('extended', AUDIT[3], AUDIT[4])
end
return audit_reply
