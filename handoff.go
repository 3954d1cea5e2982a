package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// handoff tries to pass h, a mutex's hold, straight to a waiter of this
// Client on the same key (the engine's Notifier picks the longest-waiting
// one that can take it), in the release's one round trip. It reports
// whether it claimed one; then o is the outcome of the release. Another
// kind's waiter is only woken, after the release. A permit's is
// permitHandoff.
func (l *Lock) handoff(ctx context.Context, h *lease.Hold) (o lease.Outcome, found bool) {
	sb, ok := l.cfg.be.(*scriptBackend)
	if !ok || sb.reentrant {
		return lease.Outcome{}, false
	}
	n, w := l.claimWaiter()
	if w == nil {
		return lease.Outcome{}, false
	}
	ifPanic := lease.Gift{Retry: true, Unknown: true}
	defer settlePanicked(n, w, &ifPanic)
	ours, theirs, ok := l.handoffAudit(w)
	if !ok {
		// Another kind's waiter on the key (a semaphore's: see NewSemaphore):
		// a mutex hold is not what it waits for. Or a waiter whose acquire
		// the handoff's script could not audit as its own would (see
		// audit_script.go). It tries for itself, told once the key is free
		// (claimed meanwhile, it sends nothing).
		ifPanic = lease.Gift{Retry: true} // a release sets no token of the waiter's
		o = outcome(l.cfg.release(ctx, &l.hd.Keys, h.Token(), h.Fence()))
		ifPanic = lease.Gift{}
		n.Settle(w, lease.Gift{Retry: true})
		return o, true
	}
	sent := time.Now()
	var v int64
	var err error
	if ours != nil {
		v, err = l.handoffAudited(ctx, h, w, ours, theirs)
	} else {
		v, err = l.handoffPlain(ctx, sb, h, w)
	}
	ifPanic = lease.Gift{}
	st := lease.Stolen
	if v == -1 {
		st = lease.Gone
	}
	return settleHandoff(n, w, sent, v, err, st), true
}

// handoffAudit returns the auditors of a handoff of our hold to w: ours,
// and the waiter's. ok is false when w cannot take a mutex hold from us:
// it waits for another kind (Policy.Tag), or the handoff's script could
// not audit its acquire as its own would (one side audited, or the two
// writing to different streams).
func (l *Lock) handoffAudit(w *lease.Waiter) (ours, theirs *auditor, ok bool) {
	if w.Handle().Policy().Tag != nil {
		return nil, nil, false
	}
	ours = l.cfg.auditIn(&l.hd.Keys)
	if wk, isMutex := w.Kind().(*kind); isMutex {
		theirs = wk.cfg.auditIn(&l.hd.Keys)
	}
	if ours == nil && theirs == nil {
		return nil, nil, true
	}
	return ours, theirs, ours != nil && theirs != nil && ours.stream == theirs.stream
}

// handoffPlain runs the unaudited handoff of h to w.
func (l *Lock) handoffPlain(ctx context.Context, sb *scriptBackend, h *lease.Hold, w *lease.Waiter) (int64, error) {
	keys, args := l.handoffArgs(sb, h, w)
	return sb.run(ctx, scriptHandoff, keys, args...).Int64()
}

// handoffArgs returns the keys and arguments of handoff.lua for a handoff
// of h to w, with the waiter's TTL and fencing. The holder-info hash goes
// with them when either side writes holder info: our field goes, the
// waiter's, if it writes any, comes.
func (l *Lock) handoffArgs(sb *scriptBackend, h *lease.Hold, w *lease.Waiter) ([]string, []any) {
	wp := w.Handle().Policy()
	args := []any{h.Token(), w.Token(), ttlArg(wp.TTL), flag(wp.Fencing)}
	var info any
	if wk, ok := w.Kind().(*kind); ok {
		info = wk.cfg.info
	}
	if !sb.info && info == nil {
		return l.hd.Keys.AcquireKeys(), args
	}
	if info != nil {
		args = append(args, info)
	}
	return l.hd.Keys.InfoAcquireKeys(), args
}

// claimWaiter claims a waiter of this Client for the key, to hand it the
// hold: nil when none waits or the Client is closing.
func (l *Lock) claimWaiter() (*lease.Notifier, *lease.Waiter) {
	n := &l.cfg.c.eng.Notifier
	if l.cfg.c.eng.Closed() {
		return n, nil
	}
	return n, n.Claim(l.hd.Keys.Notify())
}

// settlePanicked, deferred by a release that claimed w, settles w with
// *g when the release's call panicked (a go-redis hook; a ctx without
// deadline runs the call on the caller's goroutine) before it returned:
// the panic goes on to the caller, and w, no longer claimed, tries with
// its own token, which finds whatever the handoff may have set (or, if it
// gave up, undoes it). Otherwise w would stay claimed, making no attempt
// of its own until its wait ended, while its token held the key for
// nobody. The release sets *g to the zero Gift once its call returned:
// it settles w itself then.
func settlePanicked(n *lease.Notifier, w *lease.Waiter, g *lease.Gift) {
	if *g != (lease.Gift{}) {
		n.Settle(w, *g)
	}
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

// handoffAudited runs the audited handoff of h to w: the script writes our
// "released" entry (ours) and the waiter's "acquired" (theirs).
func (l *Lock) handoffAudited(ctx context.Context, h *lease.Hold, w *lease.Waiter, ours, theirs *auditor) (int64, error) {
	sb, k := l.cfg.be.(*scriptBackend), &l.hd.Keys
	keys, args := l.handoffArgs(sb, h, w)
	wa := theirs.call(k, w.Token(), 0)
	return sb.runAudit(ctx, scriptHandoff, ours.call(k, h.Token(), h.Fence()), keys, args,
		wa.e.Token, wa.e.Owner, wa.e.Metadata).Int64()
}
