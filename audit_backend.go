package lock

import (
	"context"
	"time"
)

// audited returns a backend whose next call on k, for the hold of token
// with fence, writes its audit entry in its script; nil when the separate
// XADD writes it.
func (s *settings) audited(k *keys, token string, fence int64) backend {
	a := s.auditIn(k)
	if a == nil {
		return nil
	}
	au := a.call(k, token, fence)
	if s.permits() {
		b := s.sem
		b.au = au
		return b
	}
	return auditedBackend{s.be.(*scriptBackend), au, s.info}
}

// auditedBackend is a mutex's script backend for one call that writes its
// audit entry (the audited variant of its script).
type auditedBackend struct {
	*scriptBackend
	au   *auditCall
	info any // the holder info an acquire writes; nil for none
}

func (b auditedBackend) acquire(ctx context.Context, k *keys, token string, ttl time.Duration) (acquireResult, error) {
	keys, args := k.AcquireKeys(), []any{token, ttlArg(ttl), flag(b.reentrant), flag(b.fencing)}
	if b.info != nil {
		keys, args = k.InfoAcquireKeys(), append(args, argEmpty, b.info)
	}
	n, err := b.runAudit(ctx, scriptAcquire, b.au, keys, args).Int64()
	return b.readAcquire(token, n, err)
}

func (b auditedBackend) release(ctx context.Context, k *keys, token string) (extendStatus, error) {
	if err := b.awaitAcquire(ctx, token); err != nil {
		return 0, err
	}
	n, err := b.runAudit(ctx, scriptRelease, b.au, b.releaseKeys(k), []any{token, flag(b.reentrant)}).Int64()
	return releaseStatus(n, err)
}

func (b auditedBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	keys, counter := b.mutexExtendKeys(k)
	n, err := b.runAudit(ctx, scriptExtend, b.au, keys, []any{token, ttlArg(ttl), flag(b.reentrant), counter}).Int64()
	return checkStatus("extend", n, err)
}
