-- audit_once_store.lua: the hook of the audited once_store.lua (see
-- audit.lua). A "released" entry when the store released the lock: reply 1
-- and the lock held our token before (a resent store finds it gone and
-- writes none).
local audit_before = audit_holds(KEYS[1], ARGV[1])
local audit_reply = audit_body()
if audit_reply == 1 and audit_before then
  audit_add('released', AUDIT[3], AUDIT[4])
end
return audit_reply
