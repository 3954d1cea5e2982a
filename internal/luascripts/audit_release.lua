-- audit_release.lua: the hook of the audited release.lua,
-- sem_release.lua and rw_release.lua (see audit.lua).
-- A "released" entry when the hold was dropped (reply 1, or 2 for one
-- re-entrant level).
local audit_reply = audit_body()
if audit_reply == 1 or audit_reply == 2 then
  audit_add('released', AUDIT[3], AUDIT[4])
end
return audit_reply
