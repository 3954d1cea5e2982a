package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// renewMixed renews hs when some of them are read-write holds: they ride
// the same pipeline as the mutex holds of their group (one backend, one
// cluster master), each with its kind's extend script and, when the
// backend writes holder info, its holder-info key. It reports false,
// doing nothing, when hs holds no read-write hold.
func (g renewGroup) renewMixed(ctx context.Context, hs []*lease.Hold, ttls []time.Duration, out []lease.Outcome) bool {
	sb, ok := g.be.(*scriptBackend)
	if !ok || !anyRW(hs) {
		return false
	}
	calls := make([]luascripts.Call, len(hs))
	for i, h := range hs {
		hd := h.Handle()
		if isRW(hd.Policy()) {
			calls[i] = luascripts.Call{Script: luascripts.RWExtend, Keys: sb.extendKeys(&hd.Keys), Args: []any{h.Token(), ttls[i].Milliseconds()}}
		} else {
			calls[i] = luascripts.ExtendCall(luascripts.ExtendItem{Keys: &hd.Keys, Token: h.Token(), TTL: ttls[i], Holders: sb.info, Fence: sb.keepsFence()}, sb.reentrant)
		}
	}
	for i, cmd := range luascripts.EvalAll(ctx, sb.rdb, calls) {
		n, err := cmd.Int64()
		out[i] = outcome(checkStatus("renewal", n, err))
	}
	return true
}

// isRW reports whether p is a read-write lock's policy.
func isRW(p *lease.Policy) bool {
	_, ok := p.Tag.(rwTag)
	return ok
}

func anyRW(hs []*lease.Hold) bool {
	for _, h := range hs {
		if isRW(h.Handle().Policy()) {
			return true
		}
	}
	return false
}
