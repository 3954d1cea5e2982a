package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// handoff tries to pass h straight to a waiter of this Client on the same
// key (the engine's Notifier picks the longest-waiting one that can take
// it), in the release's one round trip. It reports whether it claimed
// one; then o is the outcome of the release. Another kind's waiter is
// only woken, after the release.
func (l *Lock) handoff(ctx context.Context, h *lease.Hold) (o lease.Outcome, found bool) {
	if b, ok := l.cfg.be.(semBackend); ok {
		return l.semHandoff(ctx, h, b)
	}
	sb, ok := l.cfg.be.(*scriptBackend)
	n := &l.cfg.c.eng.Notifier
	if !ok || sb.reentrant || l.cfg.c.eng.Closed() {
		return lease.Outcome{}, false
	}
	w := n.Claim(l.hd.Keys.Notify())
	if w == nil {
		return lease.Outcome{}, false
	}
	wp := w.Handle().Policy()
	if wp.Tag != nil {
		// Another kind's waiter on the key (a semaphore's: see NewSemaphore):
		// a mutex hold is not what it waits for. It tries for itself, told
		// once the key is free (claimed meanwhile, it sends nothing).
		o = outcome(l.cfg.be.release(ctx, &l.hd.Keys, h.Token()))
		n.Settle(w, lease.Gift{Retry: true})
		return o, true
	}
	sent := time.Now()
	var v int64
	var err error
	if sb.info {
		// Our holder info goes; the waiter's comes, if it writes any.
		args := []any{h.Token(), w.Token(), ttlArg(wp.TTL), flag(wp.Fencing)}
		if wk, ok := w.Kind().(*kind); ok && wk.cfg.info != nil {
			args = append(args, wk.cfg.info)
		}
		v, err = sb.run(ctx, scriptHandoff, l.hd.Keys.InfoAcquireKeys(), args...).Int64()
	} else {
		v, err = sb.run(ctx, scriptHandoff, l.hd.Keys.AcquireKeys(),
			h.Token(), w.Token(), ttlArg(wp.TTL), flag(wp.Fencing)).Int64()
	}
	st := lease.Stolen
	if v == -1 {
		st = lease.Gone
	}
	return settleHandoff(n, w, sent, v, err, st), true
}

// settleHandoff gives w the outcome of a handoff call sent at sent that
// replied v (>= 0: the new hold's fence) or err, and returns the release's
// outcome: st when v < 0 (nothing handed over).
func settleHandoff(n *lease.Notifier, w *lease.Waiter, sent time.Time, v int64, err error, st lease.Status) lease.Outcome {
	switch {
	case err != nil:
		// Unknown outcome: the waiter's own acquire, with its token, will
		// find out (a key already holding its token counts as acquired).
		// The call may have set the waiter's token: a waiter that gives
		// up must undo it.
		n.Settle(w, lease.Gift{Retry: true, Unknown: true})
		return lease.Outcome{Err: err}
	case v < 0:
		n.Settle(w, lease.Gift{Retry: true})
		return lease.Outcome{Status: st}
	}
	n.Settle(w, lease.Gift{Fence: v, Sent: sent})
	return lease.Outcome{Status: lease.Confirmed}
}
