package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// semBackend is the backend of a semaphore's permits: each *Lock a
// Semaphore hands out talks to Redis through it, so every verb of a Lock
// works on a permit unchanged. It runs the sem_*.lua scripts (script mode
// only). It is a comparable value: the renewal groups of every semaphore
// of a Client are the one semBackend with n 0 (renewal needs no n), so the
// permits of all of them share per-master batches.
type semBackend struct {
	rdb     redis.UniversalClient
	n       int
	fencing bool
}

var _ backend = semBackend{}

func (b semBackend) acquire(ctx context.Context, k *keys, token string, ttl time.Duration) (acquireResult, error) {
	n, err := luascripts.SemAcquire.Run(ctx, b.rdb, k.AcquireKeys(),
		token, ttlArg(ttl), b.n, flag(b.fencing)).Int64()
	if err != nil {
		return acquireResult{}, mixedKind(k.User, err, "semaphore")
	}
	ok, fence, left := luascripts.AcquireReply(n)
	return acquireResult{ok: ok, fence: fence, pttl: left}, nil
}

func (b semBackend) release(ctx context.Context, k *keys, token string) (extendStatus, error) {
	n, err := luascripts.RunSemRelease(ctx, b.rdb, k.ReleaseKeys(), token).Int64()
	return checkStatus("release", n, err)
}

func (b semBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	n, err := luascripts.SemExtend.Run(ctx, b.rdb, k.LockKeys(), token, ttlArg(ttl)).Int64()
	return checkStatus("extend", n, err)
}

func (b semBackend) pttl(ctx context.Context, k *keys, token string) (time.Duration, error) {
	return pttlReply(luascripts.SemPTTL.Run(ctx, b.rdb, k.LockKeys(), token).Int64())
}

func (b semBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	all := make([]luascripts.ExtendItem, len(items))
	for i, it := range items {
		all[i] = luascripts.ExtendItem{Keys: it.k, Token: it.token, TTL: it.ttl}
	}
	for i, cmd := range luascripts.SemExtendAll(ctx, b.rdb, all) {
		n, err := cmd.Int64()
		st[i], errs[i] = checkStatus("renewal", n, err)
	}
}

// available returns how many of n permits are free now.
func (b semBackend) available(ctx context.Context, k *keys) (int, error) {
	n, err := luascripts.SemAvailable.Run(ctx, b.rdb, k.LockKeys(), b.n).Int()
	return n, mixedKind(k.User, err, "semaphore")
}

// semGroup is the renewal group of a permit: its master's, shared by the
// permits of every semaphore of the Client (see semBackend).
func (s *settings) semGroup(ctx context.Context, h *lease.Hold) lease.Group {
	g := s.group(ctx, h).(renewGroup)
	g.be = semBackend{rdb: s.c.rdb}
	return g
}
