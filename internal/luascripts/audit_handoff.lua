-- audit_handoff.lua: the hook of the audited handoff.lua and
-- sem_handoff.lua (see audit.lua). When the hold was handed over (reply >=
-- 0, the new fence): a "released" entry of ours, then an "acquired" entry
-- of the waiter's; on sem_handoff.lua's -3 (our permit released, none
-- handed over) the "released" alone. The hook's ARGVs: [9] the waiter's
-- token as events show it, [10] its owner, [11] its metadata.
local audit_reply = audit_body()
if type(audit_reply) == 'number' and audit_reply >= 0 then
  audit_add('released', AUDIT[3], AUDIT[4])
  audit_add('acquired', AUDIT[9], audit_reply, AUDIT[10], nil, nil, AUDIT[11])
elseif audit_reply == -3 then
  audit_add('released', AUDIT[3], AUDIT[4])
end
return audit_reply
