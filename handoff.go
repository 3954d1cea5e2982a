package lock

import (
	"context"
	"time"
)

// maxHandoffs bounds the consecutive direct handoffs on one key within a
// process. A handoff keeps the key held, so waiters in other processes are
// not woken; after this many, one release frees the key and publishes, and
// every process's longest waiter gets its chance.
const maxHandoffs = 16

// Waiter states, guarded by notifier.mu. A waiter is claimable only while
// idle, so a hold is never handed to a waiter whose own attempt is out, nor
// to one that already holds the lock: a waiter that won its attempt or took
// a handed-over hold stays attempting until it leaves, and only a claimed
// or gifted waiter, which cannot hold the lock with its token, is ever
// cleaned up after.
const (
	waiterIdle       = iota // sleeping or about to: a release may claim it
	waiterAttempting        // its own attempt is out, or it installs a handed-over hold
	waiterClaimed           // a release is handing it the hold
	waiterGifted            // the handoff's outcome is waiting in gift
	waiterGone              // it left while claimed: the release cleans up
)

// gift is what a releasing Lock hands a claimed waiter.
type gift struct {
	fence int64
	sent  time.Time // when the handoff call was sent: the new lease starts after it
	retry bool      // outcome unknown or refused: try with your own token
}

// handoffWaiter reports whether l, waiting on its key, may be handed a hold:
// only plain script-mode locks without a replica WAIT.
func handoffWaiter(l *Lock) bool {
	return l.cfg.mode == ReleaseScript && !l.cfg.ownerSet && l.cfg.acks == 0
}

// claim picks the longest-waiting idle waiter of channel that can take a
// hold, and marks it claimed; nil when there is none, or when the key has
// been handed over maxHandoffs times in a row.
func (n *notifier) claim(channel string) *waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	if cs == nil {
		return nil
	}
	if cs.handoffs >= maxHandoffs {
		cs.handoffs = 0
		return nil
	}
	for _, w := range cs.waiters {
		if w.state == waiterIdle && w.l != nil {
			w.state = waiterClaimed
			cs.handoffs++
			return w
		}
	}
	cs.handoffs = 0
	return nil
}

// settle delivers the handoff's outcome to w. A waiter that left meanwhile
// cannot take the hold, so it is released here with the waiter's token.
func (n *notifier) settle(w *waiter, g gift) {
	n.mu.Lock()
	if w.state == waiterGone {
		n.mu.Unlock()
		w.undo()
		return
	}
	if g.retry {
		w.cs.handoffs = 0
	}
	w.gift, w.state = g, waiterGifted
	signal(w)
	n.mu.Unlock()
}

// beginAttempt marks w as sending its own attempt; false when a release has
// claimed it, and the waiter should wait for its gift instead.
func (w *waiter) beginAttempt() bool {
	if w == nil {
		return true
	}
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	if w.state != waiterIdle {
		return false
	}
	w.state = waiterAttempting
	return true
}

// endAttempt makes w claimable again after its own attempt failed.
func (w *waiter) endAttempt() {
	if w == nil {
		return
	}
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	if w.state == waiterAttempting {
		w.state = waiterIdle
	}
}

// takeGift returns the gift delivered to w, if any. A retry leaves w idle; a
// handed-over hold leaves it attempting, so no release can claim it while it
// installs the hold or after: the waiter calls endAttempt if that fails.
func (w *waiter) takeGift() (gift, bool) {
	if w == nil {
		return gift{}, false
	}
	w.n.mu.Lock()
	if w.state != waiterGifted {
		w.n.mu.Unlock()
		return gift{}, false
	}
	g := w.gift
	w.gift, w.state = gift{}, waiterIdle
	if !g.retry {
		w.state = waiterAttempting
	}
	hook := w.n.giftTaken
	w.n.mu.Unlock()
	if hook != nil {
		hook()
	}
	return g, true
}

// undo releases what a handoff to w may have set, with w's token: w left
// without taking it. The state machine guarantees that w never installed a
// hold with that token; the check on the handle's hold makes sure a slip
// there could never delete a hold its owner trusts.
func (w *waiter) undo() {
	if h := w.l.hold(); h != nil && h.token == w.token {
		return
	}
	w.l.cleanup(w.token)
}

// handoff tries to pass h straight to a waiter of this Client on the same
// key. It reports whether it found one; then st and err are the outcome of
// the release, as for backend.release.
func (l *Lock) handoff(ctx context.Context, h *hold) (found bool, st extendStatus, err error) {
	sb, ok := l.be.(*scriptBackend)
	if !ok || sb.reentrant || l.c.closed.Load() {
		return false, 0, nil
	}
	w := l.c.notifier.claim(l.k.Notify())
	if w == nil {
		return false, 0, nil
	}
	sent := time.Now()
	n, err := sb.run(ctx, scriptHandoff, l.k.AcquireKeys(),
		h.token, w.token, ttlArg(w.l.cfg.ttl), flag(w.l.cfg.fencing)).Int64()
	switch {
	case err != nil:
		// Unknown outcome: the waiter's own acquire, with its token, will
		// find out (a key already holding its token counts as acquired).
		l.c.notifier.settle(w, gift{retry: true})
		return true, 0, err
	case n == -1:
		l.c.notifier.settle(w, gift{retry: true})
		return true, extendGone, nil
	case n < 0:
		l.c.notifier.settle(w, gift{retry: true})
		return true, extendStolen, nil
	}
	l.c.notifier.settle(w, gift{fence: n, sent: sent})
	return true, extendOK, nil
}
