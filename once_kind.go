package lock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// onceKind is a Once's lock as the engine sees it: the mutex (kind), whose
// attempt also looks for a stored result and whose release stores fn's.
type onceKind struct {
	*kind
	keys  []string // once_acquire.lua's KEYS: acquire's (with holder info's), then P{K}:result
	found atomic.Pointer[stored]
	kept  atomic.Bool // Release stored fn's outcome (set on its goroutine)

	// Set by fn's wrapper, read by Release on the same goroutine.
	ran  bool
	val  []byte
	ferr error
}

// Try returns a stored result (Done), or makes the mutex's acquire attempt.
func (k *onceKind) Try(ctx context.Context, token string) lease.Attempt {
	start := time.Now()
	sb := k.cfg.be.(*scriptBackend)
	var au *auditCall
	if a := k.cfg.auditIn(&k.hd.Keys); a != nil {
		au = a.call(&k.hd.Keys, token, 0)
	}
	v, err := sb.onceAcquire(ctx, k.keys, token, k.cfg.ttl, k.cfg.info, au)
	if kerr := kindReply(k.hd.Keys.User, err, "mutex"); kerr != nil {
		// The acquire found another kind of lock at P{K}: bad input, not a
		// Redis failure.
		return lease.Attempt{Err: kerr, Final: true}
	}
	if err != nil {
		return lease.Attempt{Err: err, Unknown: sent(err), Final: !retryable(err)}
	}
	if s, ok := v.(string); ok {
		st := stored(s)
		k.found.Store(&st)
		return lease.Attempt{Done: true}
	}
	n, ok := v.(int64)
	if !ok {
		return lease.Attempt{Err: fmt.Errorf("lock: unexpected once acquire reply %T", v), Final: true}
	}
	ours, fence, left := luascripts.AcquireReply(n)
	return lease.Attempt{OK: ours, Fence: fence, Sent: start, PTTL: left}
}

// Release stores fn's outcome with the release when there is one to store
// and the hold was not lost; otherwise it releases as the mutex does
// (waking one waiter, who runs fn next).
func (k *onceKind) Release(ctx context.Context, h *lease.Hold, ended bool) lease.Outcome {
	what, ttl, msg := byte(storedValue), k.cfg.resultTTL, lease.MsgAll
	switch {
	case ended || !k.ran || h.LostErr() != nil:
		return k.kind.Release(ctx, h, ended)
	case k.ferr != nil && k.cfg.errorTTL == 0:
		return k.kind.Release(ctx, h, ended)
	case k.ferr != nil:
		what, ttl = storedFailure, k.cfg.errorTTL
		k.val = []byte(lease.Bare(k.ferr))
	}
	sb := k.cfg.be.(*scriptBackend)
	out := encodeStored(what, h.Token(), k.val)
	var au *auditCall
	if a := k.cfg.auditIn(&k.hd.Keys); a != nil {
		au = a.call(&k.hd.Keys, h.Token(), h.Fence())
	}
	n, err := sb.onceStore(ctx, &k.hd.Keys, k.keys[len(k.keys)-1], h.Token(), out, ttl, msg, au)
	// The store is safe to resend (once_store.lua): a call whose outcome is
	// unknown is sent again while ctx lasts, so a lost reply neither leaves
	// the lock to expire nor reports a result that landed as lost.
	for try := 0; err != nil && sent(err) && retryable(err) && ctx.Err() == nil && try < storeResends; try++ {
		n, err = sb.onceStore(ctx, &k.hd.Keys, k.keys[len(k.keys)-1], h.Token(), out, ttl, msg, au)
	}
	if k.ferr != nil {
		k.val = nil
	}
	st, err := checkStatus("once store", n, err)
	k.kept.Store(err == nil && st == extendOK)
	return k.checkForced(ctx, h, outcome(st, err))
}

// storeResends bounds how often a store whose outcome is unknown is sent
// again.
const storeResends = 3
