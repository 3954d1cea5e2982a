package lease

import "time"

// maxHandoffs bounds the consecutive direct handoffs on one key within a
// process. A handoff keeps the key held, so waiters in other processes are
// not woken; after this many, one release frees the key and publishes, and
// every process's longest waiter gets its chance.
const maxHandoffs = 16

// Waiter states, guarded by Notifier.mu. A waiter is claimable only while
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

// Gift is what a releasing lock hands a claimed waiter.
type Gift struct {
	Fence int64     // the handed-over hold's fence
	Sent  time.Time // when the handoff call was sent: the new lease starts then
	Retry bool      // outcome unknown or refused: try with your own token
	// Unknown marks a retry whose handoff call failed: Redis may hold the
	// key with the waiter's token, so a waiter that gives up must undo it.
	// A refused handoff set nothing and needs no undo.
	Unknown bool
}

// mayHaveSet reports whether the handoff behind g may have left the key
// with the waiter's token: it did, or its outcome is unknown.
func (g Gift) mayHaveSet() bool { return !g.Retry || g.Unknown }

// Claim picks the longest-waiting idle waiter of channel that can take a
// hold, and marks it claimed; nil when there is none, or when the key has
// been handed over maxHandoffs times in a row. The caller hands it the hold
// with the waiter's token, TTL and fencing (Waiter.Handle, Waiter.Token)
// and then calls Settle, whatever came of it.
func (n *Notifier) Claim(channel string) *Waiter {
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
		if w.state == waiterIdle && w.claimable {
			w.state = waiterClaimed
			cs.handoffs++
			return w
		}
	}
	cs.handoffs = 0
	return nil
}

// Settle delivers the handoff's outcome to w. A waiter that left meanwhile
// cannot take the hold, so it is undone here with the waiter's token.
func (n *Notifier) Settle(w *Waiter, g Gift) {
	n.mu.Lock()
	if w.state == waiterGone {
		n.mu.Unlock()
		if g.mayHaveSet() {
			w.undo()
		}
		return
	}
	if g.Retry {
		w.cs.handoffs = 0
	}
	w.gift, w.state = g, waiterGifted
	signal(w)
	n.mu.Unlock()
}

// Handle returns the handle of the waiting lock.
func (w *Waiter) Handle() *Handle { return w.hd }

// Kind returns the waiting lock's kind, as its Acquire passed it.
func (w *Waiter) Kind() Kind { return w.k }

// Token returns the token the waiting lock acquires with.
func (w *Waiter) Token() string { return w.token }

// beginAttempt marks w as sending its own attempt; false when a release has
// claimed it, and the waiter should wait for its gift instead.
func (w *Waiter) beginAttempt() bool {
	if w == nil {
		return true
	}
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	w.owed = false
	if w.state != waiterIdle {
		return false
	}
	w.state = waiterAttempting
	if w.ttl > 0 {
		w.sent = time.Now()
	}
	return true
}

// retoken makes token the one a release hands w the hold under: its
// Acquire's earlier token was spent by an undo. Called while w is not
// claimable, so no handoff is out with the old one.
func (w *Waiter) retoken(token string) {
	if w == nil {
		return
	}
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	w.token = token
}

// endAttempt makes w claimable again after its own attempt failed.
func (w *Waiter) endAttempt() {
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
func (w *Waiter) takeGift() (Gift, bool) {
	if w == nil {
		return Gift{}, false
	}
	w.n.mu.Lock()
	if w.state != waiterGifted {
		w.n.mu.Unlock()
		return Gift{}, false
	}
	g := w.gift
	w.gift, w.state, w.owed = Gift{}, waiterIdle, false
	if !g.Retry {
		w.state = waiterAttempting
	}
	hook := w.n.giftTaken
	w.n.mu.Unlock()
	if hook != nil {
		hook()
	}
	return g, true
}

// undo releases, in the background, what a handoff to w may have set,
// with w's token: w left without taking it. The state machine guarantees
// that w never installed a hold with that token; the check on the handle's
// hold makes sure a slip there could never delete a hold its owner trusts.
func (w *Waiter) undo() {
	if h := w.hd.Hold(); h != nil && h.token == w.token {
		return
	}
	w.hd.undoLater(w.k, w.token)
}

// SetGiftHook makes every waiter call fn after it takes a hold a release
// handed to it and before it installs that hold, so a test can hold that
// window open. Set it before any waiter starts.
func (n *Notifier) SetGiftHook(fn func()) {
	n.mu.Lock()
	n.giftTaken = fn
	n.mu.Unlock()
}

// IdleWaiters reports, for tests, how many waiters of channel wait between
// attempts: those a release can hand over to.
func (n *Notifier) IdleWaiters(channel string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	if cs == nil {
		return 0
	}
	// A subscribe under way: its confirmation wakes them for another look.
	// One that failed and waits to try again leaves them to their backoff.
	if cs.subscribed && cs.retry == nil && !cs.listening() {
		return 0
	}
	idle := 0
	for _, w := range cs.waiters {
		if w.state == waiterIdle && !w.owed {
			idle++
		}
	}
	return idle
}
