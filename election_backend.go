package lock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// electBackend is the backend of an election's term: the Election's *Lock
// talks to Redis through it, so the engine leases, renews and loses a term
// as any hold. It runs the election_*.lua scripts (script mode only), the
// publishing ones in their sharded variant when wake-ups are sharded. It
// is a comparable value: the renewal group of every election of a Client
// is one electBackend with no val.
type electBackend struct {
	rdb redis.UniversalClient
	pub *shardedPub
	val *atomic.Pointer[string] // the value a campaign writes; nil in the renewal group
}

var _ backend = electBackend{}

func (b electBackend) acquire(ctx context.Context, k *keys, token string, ttl time.Duration) (acquireResult, error) {
	s, _ := b.pub.script(ctx, luascripts.ElectionCampaign, luascripts.ElectionCampaignSrc)
	n, err := s.Run(ctx, b.rdb, []string{k.Lock(), k.Fence(), k.Notify()}, token, ms(ttl), *b.val.Load()).Int64()
	if err != nil {
		return acquireResult{}, mixedKind(k.User, err, "election")
	}
	ok, term, left := luascripts.AcquireReply(n)
	return acquireResult{ok: ok, fence: term, pttl: left}, nil
}

func (b electBackend) release(ctx context.Context, k *keys, token string) (extendStatus, error) {
	s, src := b.pub.script(ctx, luascripts.ElectionResign, luascripts.ElectionResignSrc)
	n, err := luascripts.RunOnceText(ctx, b.rdb, s, src, k.ReleaseKeys(), token).Int64()
	return checkStatus("resign", n, err)
}

func (b electBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	n, err := luascripts.ElectionExtend.Run(ctx, b.rdb, k.LockKeys(), token, ms(ttl)).Int64()
	return checkStatus("extend", n, err)
}

func (b electBackend) pttl(ctx context.Context, k *keys, token string) (time.Duration, error) {
	return pttlReply(luascripts.ElectionPTTL.Run(ctx, b.rdb, k.LockKeys(), token).Int64())
}

func (b electBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	all := make([]luascripts.ExtendItem, len(items))
	for i, it := range items {
		all[i] = luascripts.ExtendItem{Keys: it.k, Token: it.token, TTL: it.ttl}
	}
	for i, cmd := range luascripts.ElectionExtendAll(ctx, b.rdb, all) {
		n, err := cmd.Int64()
		st[i], errs[i] = checkStatus("renewal", n, err)
	}
}

// proclaim sets the value of token's term (election_proclaim.lua).
func (b electBackend) proclaim(ctx context.Context, k *keys, token, value string) (extendStatus, error) {
	s, _ := b.pub.script(ctx, luascripts.ElectionProclaim, luascripts.ElectionProclaimSrc)
	n, err := s.Run(ctx, b.rdb, k.ReleaseKeys(), token, value).Int64()
	return checkStatus("proclaim", n, err)
}
