package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// In-script audit: where the stream can live beside the lock's key, the
// script that acquires, releases, extends, hands over or force-releases
// writes the entry itself, atomically with its work and only when it
// succeeded (the audited variants of internal/luascripts, audit.lua).
// Elsewhere the auditor's separate XADD writes it (audit.go).

// auditCall is the audit part of one audited script call: the stream and
// what the caller knows of the entry.
type auditCall struct {
	stream string
	e      luascripts.AuditEntry
}

// auditBeside reports whether a script on lockKey may write to stream: on
// one node (a failover client is one too), always; on a Redis Cluster,
// when both share a hash slot (a stream named with the key's {tag}); on a
// Ring, or a client of another type, never.
func (c *Client) auditBeside(stream, lockKey string) bool {
	switch c.rdb.(type) {
	case *redis.Client:
		return true
	case *redis.ClusterClient:
		return keySlot(stream) == keySlot(lockKey)
	}
	return false
}

// auditScripted reports whether s's locks write their audit entries in
// their scripts where the slot allows: a mutex (re-entrant or not) or a
// Once in ReleaseScript mode, a read-write lock's holds, a semaphore's
// permits. The fair lock, whose release hands the key to its queue's head
// (maybe another process's hold, unknown to the script), the multi-lock
// (see observeSeparate) and replica-acknowledged holds (an acquire undone
// when too few replicas acknowledge it) keep the separate XADD.
func (s *settings) auditScripted() bool {
	if s.aud == nil || s.fair || s.acks > 0 {
		return false
	}
	switch s.be.(type) {
	case *scriptBackend:
		_, rw := s.pol.Tag.(rwTag)
		return s.pol.Tag == nil || rw
	case semBackend:
		return true
	}
	return false
}

// auditIn returns s's auditor when the calls on k write their own entries,
// nil when the separate XADD does (or there is no audit).
func (s *settings) auditIn(k *keys) *auditor {
	if !s.auditScripted() || !s.c.auditBeside(s.aud.stream, k.Lock()) {
		return nil
	}
	return s.aud
}

// keysOf returns the keys of the lock on key under s.
func (s *settings) keysOf(key string) *keys {
	k := luascripts.NewKeys(s.prefix, key)
	return &k
}

// call returns the audit part of a call on k whose hold has token (the
// engine's: a re-entrant hold's id) and fence.
func (a *auditor) call(k *keys, token string, fence int64) *auditCall {
	if a.s.ownerSet {
		token = a.s.owner // events show a re-entrant hold as its owner
	}
	host, pid := processHostPID()
	return &auditCall{stream: a.stream, e: luascripts.AuditEntry{Max: a.max, Key: k.User, Token: token,
		Fence: fence, Owner: a.owner, Host: host, PID: pid, Metadata: a.metadata}}
}

// observeSeparate is s's Observe for a kind built on s whose scripts write
// no audit entry (a multi-lock): its audit writes every event itself.
func (s *settings) observeSeparate() func(lease.Event) {
	var next func(lease.Event)
	if s.observer != nil {
		next = observerFunc(s.observer)
	}
	a := *s.aud
	a.s = nil
	return a.chain(next)
}

// runAudit runs the audited variant of script i with keys and args, then
// au's KEY and ARGVs, and extra ARGVs of the script's hook.
func (b *scriptBackend) runAudit(ctx context.Context, i int, au *auditCall, keys []string, args []any, extra ...any) scriptCmd {
	keys, args = luascripts.AuditArgs(keys, args, au.stream, &au.e, nil, extra...)
	return b.run(ctx, auditScript(i), keys, args...)
}

// acquire sends one acquire of token with s's TTL through s's backend,
// with s's holder info, auditing it in its script where it can.
func (s *settings) acquire(ctx context.Context, k *keys, token string) (acquireResult, error) {
	if s.aud != nil {
		if be := s.audited(k, token, 0); be != nil {
			return be.acquire(ctx, k, token, s.ttl)
		}
	}
	if sb, ok := s.be.(*scriptBackend); ok && s.info != nil {
		return sb.acquireInfo(ctx, k, token, s.ttl, s.info)
	}
	return s.be.acquire(ctx, k, token, s.ttl)
}

// release drops the hold of token (fence: its fence, 0 when unknown)
// through s's backend, auditing it in its script where it can.
func (s *settings) release(ctx context.Context, k *keys, token string, fence int64) (extendStatus, error) {
	if s.aud != nil {
		if be := s.audited(k, token, fence); be != nil {
			return be.release(ctx, k, token)
		}
	}
	return s.be.release(ctx, k, token)
}

// extend sets the TTL of the hold of token (fence: its fence) through s's
// backend, auditing it in its script where it can. Renewals do not come
// here: they write no entry.
func (s *settings) extend(ctx context.Context, k *keys, token string, fence int64, ttl time.Duration) (extendStatus, error) {
	if s.aud != nil {
		if be := s.audited(k, token, fence); be != nil {
			return be.extend(ctx, k, token, ttl)
		}
	}
	return s.be.extend(ctx, k, token, ttl)
}

// rwAudit returns the audit part of a read-write lock's call on k for the
// hold of token with fence (see rwRun); nil when the separate XADD writes
// its entry.
func (s *settings) rwAudit(k *keys, token string, fence int64) *auditCall {
	if s.aud == nil {
		return nil
	}
	if a := s.auditIn(k); a != nil {
		return a.call(k, token, fence)
	}
	return nil
}

// run sends script i, or with b.au its audited variant. A handoff's
// waiter has b's settings (see semHandoff): its entry shows b's owner and
// metadata.
func (b semBackend) run(ctx context.Context, i int, keys []string, args ...any) scriptCmd {
	if b.au == nil {
		return b.sb.run(ctx, i, keys, args...)
	}
	var extra []any
	if i == scriptSemHandoff {
		extra = []any{args[1], b.au.e.Owner, b.au.e.Metadata}
	}
	return b.sb.runAudit(ctx, i, b.au, keys, args, extra...)
}
