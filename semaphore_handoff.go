package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// permitKind is a semaphore's permit as the engine sees it (lease.Kind):
// the mutex's calls over the semaphore's backend, but for a Release, which
// hands the permit over as a permit (permitHandoff). A struct of one
// pointer costs no allocation as an interface.
type permitKind struct{ *kind }

// Release drops h, handing it straight to a waiter of the same settings
// when it can (see kind.Release).
func (k permitKind) Release(ctx context.Context, h *lease.Hold, ended bool) lease.Outcome {
	return k.release(ctx, h, ended, (*Lock).permitHandoff)
}

// permitHandoff is semHandoff over the permit's backend, whose call writes
// the audit entries when the permit is audited.
func (l *Lock) permitHandoff(ctx context.Context, h *lease.Hold) (lease.Outcome, bool) {
	b := l.cfg.sem
	if l.cfg.aud != nil {
		if a := l.cfg.auditIn(&l.hd.Keys); a != nil {
			b.au = a.call(&l.hd.Keys, h.Token(), h.Fence())
		}
	}
	return l.semHandoff(ctx, h, b)
}

// semHandoff passes h, a permit, straight to the longest-waiting Acquire of
// the same settings in this Client (see handoff for the mutex's), in the
// release's one round trip. It reports whether it claimed a waiter; then
// o is the outcome of the release. A waiter with other settings (a
// Semaphore of another n, or made with options of its own, or a mutex
// waiting on the key) is left to try for itself, after the release.
func (l *Lock) semHandoff(ctx context.Context, h *lease.Hold, b semBackend) (o lease.Outcome, found bool) {
	n, w := l.claimWaiter()
	if w == nil {
		return lease.Outcome{}, false
	}
	ifPanic := lease.Gift{Retry: true, Unknown: true}
	defer settlePanicked(n, w, &ifPanic)
	wp := w.Handle().Policy()
	if wp != &l.cfg.pol {
		// It tries for itself, told once our permit is free: woken before,
		// its attempt could beat the release and be wasted (claimed
		// meanwhile, it sends nothing).
		ifPanic = lease.Gift{Retry: true} // a release sets no token of the waiter's
		o = outcome(b.release(ctx, &l.hd.Keys, h.Token()))
		ifPanic = lease.Gift{}
		n.Settle(w, lease.Gift{Retry: true})
		return o, true
	}
	k := &l.hd.Keys
	sent := time.Now()
	v, err := b.handoff(ctx, k, h.Token(), w.Token(), wp.TTL)
	ifPanic = lease.Gift{}
	st := lease.Confirmed // -3: ours released, not handed over, as n was lowered
	switch v {
	case -1: // our permit is gone
		st = lease.Gone
	case -2: // another kind holds the key
		st = lease.Stolen
	}
	return settleHandoff(n, w, sent, v, err, st), true
}
