package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// semBackend is the backend of a semaphore's permits: each *Lock a
// Semaphore hands out talks to Redis through it, so every verb of a Lock
// works on a permit unchanged. It runs the sem_*.lua scripts (script mode
// only) through the Client's script backend, sharing its coalescer. It is
// a comparable value: the renewal groups of every semaphore of a Client
// are one semBackend with n 0 (renewal needs no n), so the permits of all
// of them share per-master batches (one per holder-info setting: sb.info).
// With holder info (sb.info) every call but pttl and available carries the
// holder-info hash, and an acquire its holder's info.
type semBackend struct {
	sb   *scriptBackend
	rdb  redis.UniversalClient // for Available
	n    int
	info any        // the holder info its permits write (holderinfo.go); nil for none
	au   *auditCall // set for one call whose script writes its audit entry (audit_script.go)
}

var _ backend = semBackend{}

func (b semBackend) acquire(ctx context.Context, k *keys, token string, ttl time.Duration) (acquireResult, error) {
	var cmd scriptCmd
	if b.sb.info {
		cmd = b.run(ctx, scriptSemAcquire, k.InfoAcquireKeys(),
			token, ttlArg(ttl), b.n, flag(b.sb.fencing), b.info)
	} else {
		cmd = b.run(ctx, scriptSemAcquire, k.AcquireKeys(),
			token, ttlArg(ttl), b.n, flag(b.sb.fencing))
	}
	n, err := cmd.Int64()
	return b.sb.readAcquire(token, n, mixedKind(k.User, err, "semaphore"))
}

func (b semBackend) release(ctx context.Context, k *keys, token string) (extendStatus, error) {
	if err := b.sb.awaitAcquire(ctx, token); err != nil {
		return 0, err
	}
	n, err := b.run(ctx, scriptSemRelease, b.sb.releaseKeys(k), token).Int64()
	return checkStatus("release", n, err)
}

func (b semBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	n, err := b.run(ctx, scriptSemExtend, b.sb.extendKeys(k), token, ttlArg(ttl)).Int64()
	return checkStatus("extend", n, err)
}

func (b semBackend) pttl(ctx context.Context, k *keys, token string) (time.Duration, error) {
	return pttlReply(b.sb.run(ctx, scriptSemPTTL, k.LockKeys(), token).Int64())
}

func (b semBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	all := make([]luascripts.ExtendItem, len(items))
	for i, it := range items {
		all[i] = luascripts.ExtendItem{Keys: it.k, Token: it.token, TTL: it.ttl, Holders: b.sb.info}
	}
	for i, cmd := range luascripts.SemExtendAll(ctx, b.sb.rdb, all) {
		n, err := cmd.Int64()
		st[i], errs[i] = checkStatus("renewal", n, err)
	}
}

// handoff moves our permit to token with ttl (see sem_handoff.lua) and
// returns the script's reply. The waiter has our settings: its holder info
// is ours.
func (b semBackend) handoff(ctx context.Context, k *keys, ours, token string, ttl time.Duration) (int64, error) {
	if b.sb.info {
		return b.run(ctx, scriptSemHandoff, []string{k.Lock(), k.Fence(), k.Notify(), k.Holders()},
			ours, token, ttlArg(ttl), flag(b.sb.fencing), b.n, b.info).Int64()
	}
	return b.run(ctx, scriptSemHandoff, []string{k.Lock(), k.Fence(), k.Notify()},
		ours, token, ttlArg(ttl), flag(b.sb.fencing), b.n).Int64()
}

// available returns how many of n permits are free now.
func (b semBackend) available(ctx context.Context, k *keys) (int, error) {
	n, err := luascripts.SemAvailable.Run(ctx, b.rdb, k.LockKeys(), b.n).Int()
	return n, mixedKind(k.User, err, "semaphore")
}
