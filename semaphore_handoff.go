package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// semHandoff passes h, a permit, straight to the longest-waiting Acquire of
// the same settings in this Client (see handoff for the mutex's), in the
// release's one round trip. It reports whether it claimed a waiter; then
// o is the outcome of the release. A waiter with other settings (a
// Semaphore of another n, or made with options of its own, or a mutex
// waiting on the key) is left to try for itself, after the release.
func (l *Lock) semHandoff(ctx context.Context, h *lease.Hold, b semBackend) (o lease.Outcome, found bool) {
	n := &l.cfg.c.eng.Notifier
	if l.cfg.c.eng.Closed() {
		return lease.Outcome{}, false
	}
	w := n.Claim(l.hd.Keys.Notify())
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
