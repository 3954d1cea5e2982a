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

// audit builds the audited text of a script whose text is prelude+body:
// the prelude (helpers the hook uses, left outside), audit.lua, the body
// as the local function audit_body, then hook. Most scripts pass their
// whole text as body: local functions inside audit_body work as at the
// top level.
func audit(prelude, body, hook string) string {
	return prelude + auditLib + "local function audit_body()\n" + body + "\nend\n" + hook
}

// AuditSources, SemAuditSources and rwAuditSources hold the audited text
// of each script of All, SemAll and RWAll, in the same order; "" for a
// script that writes no entry (a TTL).
var (
	AuditSources = []string{audit("", acquireSrc, auditAcquireHook), audit("", releaseSrc, auditReleaseHook),
		audit("", extendSrc, auditExtendHook), "", audit("", handoffSrc, auditHandoffHook)}
	SemAuditSources = []string{audit("", semAcquireSrc, auditAcquireHook), audit("", semReleaseSrc, auditReleaseHook),
		audit("", semExtendSrc, auditExtendHook), "", audit("", semHandoffSrc, auditHandoffHook)}
	rwAuditSources = []string{audit("", rwAcquireSrc, auditAcquireHook), audit("", rwReleaseSrc, auditReleaseHook),
		audit("", rwExtendSrc, auditExtendHook), ""}
)

// audited maps each script that has an audited variant to it, with its
// text.
var audited = func() map[*redis.Script]scriptText {
	m := map[*redis.Script]scriptText{}
	add := func(s *redis.Script, src string) {
		if src != "" {
			m[s] = scriptText{redis.NewScript(src), src}
		}
	}
	add(OnceAcquire, audit("", OnceAcquireSrc, auditAcquireHook))
	add(OnceStore, audit("", OnceStoreSrc, auditOnceStoreHook))
	// holds.lua stays outside: the hook lists the holds with it.
	add(ForceRelease, audit(holdsSrc, forceReleaseBody, auditForceHook))
	for i, src := range AuditSources {
		add(All[i], src)
	}
	for i, src := range SemAuditSources {
		add(SemAll[i], src)
	}
	for i, src := range rwAuditSources {
		add(RWAll[i], src)
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
	Owner    string // WithOwner's id, "" for none
	Host     string // this process's host name
	PID      string // this process's pid
	Metadata string // WithMetadata's text
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
