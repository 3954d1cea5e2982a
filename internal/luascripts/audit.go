package luascripts

import (
	_ "embed"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The audited variants (WithAudit, when the stream can share the lock's
// slot): each script's text with audit.lua and its hook around its body,
// so that the script writes its own audit entry, atomically with what it
// did and only when it succeeded. See audit.lua for the extra KEYS and
// ARGV a call carries; AuditArgs builds them.

//go:embed audit.lua
var auditLib string

//go:embed audit_acquire.lua
var auditAcquireHook string

//go:embed audit_release.lua
var auditReleaseHook string

//go:embed audit_extend.lua
var auditExtendHook string

//go:embed audit_handoff.lua
var auditHandoffHook string

//go:embed audit_once_store.lua
var auditOnceStoreHook string

//go:embed audit_force.lua
var auditForceHook string

// audit builds the audited text of the script prelude+body: the prelude
// (shared helpers, left outside so the hook may use them), audit.lua, the
// body as the local function audit_body, then hook.
func audit(prelude, body, hook string) string {
	return prelude + auditLib + "local function audit_body()\n" + body + "\nend\n" + hook
}

// Audited texts of the scripts that have one.
var (
	auditAcquireSrc     = audit(fenceSrc+otherKindSrc, acquireBody, auditAcquireHook)
	auditReleaseSrc     = audit("", releaseSrc, auditReleaseHook)
	auditExtendSrc      = audit("", extendSrc, auditExtendHook)
	auditHandoffSrc     = audit(fenceSrc, handoffBody, auditHandoffHook)
	auditOnceAcquireSrc = audit(fenceSrc+otherKindSrc, onceAcquireHead+acquireBody, auditAcquireHook)
	auditOnceStoreSrc   = audit("", OnceStoreSrc, auditOnceStoreHook)
	auditForceSrc       = audit(holdsSrc, forceReleaseBody, auditForceHook)
)

// AuditSources holds the audited text of each script of All, in the same
// order; "" for a script that writes no entry (PTTL).
var AuditSources = []string{auditAcquireSrc, auditReleaseSrc, auditExtendSrc, "", auditHandoffSrc}

// audited maps each script that has an audited variant to it, with its
// text.
var audited = func() map[*redis.Script]scriptText {
	m := map[*redis.Script]scriptText{
		OnceAcquire:  {redis.NewScript(auditOnceAcquireSrc), auditOnceAcquireSrc},
		OnceStore:    {redis.NewScript(auditOnceStoreSrc), auditOnceStoreSrc},
		ForceRelease: {redis.NewScript(auditForceSrc), auditForceSrc},
	}
	for i, src := range AuditSources {
		if src != "" {
			m[All[i]] = scriptText{redis.NewScript(src), src}
		}
	}
	return m
}()

// scriptText is a script and its text.
type scriptText struct {
	s   *redis.Script
	src string
}

// Audited returns the audited variant of s and its text, or nil and "" when
// s has none.
func Audited(s *redis.Script) (*redis.Script, string) {
	a := audited[s]
	return a.s, a.src
}

// AuditEntry is what the caller knows of the entry an audited call writes.
type AuditEntry struct {
	Max      int64  // the stream's approximate cap
	Key      string // the caller's key
	Token    string // the hold's token as events show it
	Fence    int64  // the hold's fence; ignored where the reply has it
	Owner    string
	Host     string
	PID      string
	Metadata string
}

// AuditArgs returns keys and args with the audit's KEY (stream, after
// extraKeys) and ARGVs (e's fields, then extra, then their count)
// appended, in new slices: see audit.lua.
func AuditArgs(keys []string, args []any, stream string, e *AuditEntry, extraKeys []string, extra ...any) ([]string, []any) {
	k := make([]string, 0, len(keys)+len(extraKeys)+1)
	k = append(append(append(k, keys...), extraKeys...), stream)
	a := make([]any, 0, len(args)+10+len(extra))
	a = append(a, args...)
	a = append(a, e.Max, e.Key, e.Token, strconv.FormatInt(e.Fence, 10), e.Owner, e.Host, e.PID, e.Metadata)
	a = append(a, extra...)
	return k, append(a, 8+len(extra))
}
