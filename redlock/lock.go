package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// Lock is a handle on one quorum lock. It is not held until Acquire or
// TryAcquire succeeds; after Release it may be acquired again, each hold
// getting a fresh token and fence. Its methods are safe for concurrent use,
// but one handle holds the lock at most once at a time.
type Lock struct {
	c   *Client
	key string
	cfg config
	err error // configuration error, returned by every verb

	k           luascripts.Keys
	quorum      int
	nodeTimeout time.Duration
	ttlArg      string // the TTL in ms, as a script argument

	mu   sync.Mutex
	busy bool  // an Acquire or TryAcquire is under way
	h    *hold // the current or last hold; nil before the first
}

// errZeroLock is what the verbs of a Lock not made by Client.NewLock return.
var errZeroLock = fmt.Errorf("redlock: %w: Lock not made by Client.NewLock", lock.ErrInvalid)

// check returns the error every verb returns before it does anything: the
// configuration error, or errZeroLock for a zero or nil Lock.
func (l *Lock) check() error {
	switch {
	case l == nil:
		return errZeroLock
	case l.err != nil:
		return l.err
	case l.c == nil:
		return errZeroLock
	}
	return nil
}

// Key returns the caller's key, as given to NewLock ("" for a zero Lock).
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the token of the current or last hold, the same on every
// node: a random UUID v4. "" before the first acquisition.
func (l *Lock) Token() string {
	if h := l.hold(); h != nil {
		return h.token
	}
	return ""
}

// Fence returns the fencing token of the current or last hold. Fences of
// successive holds of the key strictly increase as long as a majority of the
// nodes keeps its counters (see SAFETY.md: a node restarted empty breaks
// it). 0 before the first acquisition, or with [WithFencing](false).
func (l *Lock) Fence() int64 {
	if h := l.hold(); h != nil {
		return h.fence
	}
	return 0
}

// Validity returns how long the current hold stays valid from now, by this
// process's monotonic clock: the TTL less the time its last confirmed
// acquire, extend or renewal round took and the drift allowance. It never
// exceeds the TTL; it is 0 before the first acquisition and once the hold
// was released, lost or ran out.
func (l *Lock) Validity() time.Duration {
	if h := l.hold(); h != nil {
		return max(h.validity(time.Now()), 0)
	}
	return 0
}

// Lost returns a channel closed when the current hold ends involuntarily:
// too many nodes hold someone else's token or none, or no quorum confirmed
// a renewal before the hold's validity ran out. A Release does not close it.
// Each hold has its own channel; before the first acquisition Lost returns
// nil (a channel that never closes). See [Lock.LostErr].
func (l *Lock) Lost() <-chan struct{} {
	if h := l.hold(); h != nil {
		return h.lost
	}
	return nil
}

// LostErr returns the [*lock.LostError] of the current hold once
// [Lock.Lost] has closed, and nil before. It matches [lock.ErrLockLost].
func (l *Lock) LostErr() error {
	if h := l.hold(); h != nil {
		return h.lostErr()
	}
	return nil
}

func (l *Lock) hold() *hold {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h
}

// begin checks that an acquisition may start and marks the handle busy.
func (l *Lock) begin() error {
	if err := l.check(); err != nil {
		return err
	}
	if l.c.closed.Load() {
		return fmt.Errorf("redlock: acquire %q: %w", l.key, lock.ErrClosed)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy {
		return fmt.Errorf("redlock: acquire %q: %w: another acquisition on this handle is under way", l.key, lock.ErrInvalid)
	}
	if l.h != nil && l.h.active() {
		return fmt.Errorf("redlock: acquire %q: %w: already held by this handle; release it first", l.key, lock.ErrInvalid)
	}
	l.busy = true
	return nil
}

func (l *Lock) done() {
	l.mu.Lock()
	l.busy = false
	l.mu.Unlock()
}

func newToken(key string) (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("redlock: acquire %q: token: %w", key, err)
	}
	return u.String(), nil
}

// install schedules h's renewal, then makes h the current hold (so that an
// Extend or Release on it finds the schedule in place).
func (l *Lock) install(h *hold) {
	h.scheduleRenewal()
	l.mu.Lock()
	l.h = h
	l.mu.Unlock()
}

// TryAcquire makes one attempt on every node. It returns (true, nil) when
// the lock is now held, (false, nil) when other holders keep the quorum out
// of reach, and (false, err) otherwise: a [*QuorumError] (matching
// [lock.ErrNotAcquired]) when failed or slow nodes kept the quorum out of
// reach, or an error wrapping [lock.ErrInvalid] (also for a Lock not made
// by [Client.NewLock]) or [lock.ErrClosed].
//
// A failed attempt is undone on every node that may have granted it: each
// node's delete is sent once that node's acquire call has returned, so that
// it cannot overtake an acquire still on its way. TryAcquire waits for the
// deletes up to a node timeout past the attempt's deadline; a node whose
// acquire call is still out then gets its delete from a goroutine of the
// Client when the call returns (at most a TTL later; at once when Close
// begins, and Close waits for it).
func (l *Lock) TryAcquire(ctx context.Context) (bool, error) {
	if err := l.begin(); err != nil {
		return false, err
	}
	defer l.done()
	token, err := newToken(l.key)
	if err != nil {
		return false, err
	}
	start := time.Now()
	l.observe(lock.Event{Kind: lock.EventAcquireStart})
	o := l.attempt(ctx, token)
	switch {
	case o.h != nil:
		l.observe(lock.Event{Kind: lock.EventAcquire, Token: token, Fence: o.h.fence, Duration: time.Since(start), Attempts: 1})
		return true, nil
	case o.err == nil:
		l.observe(lock.Event{Kind: lock.EventAcquire, Token: token, Duration: time.Since(start), Attempts: 1, Err: lock.ErrNotAcquired})
		return false, nil
	}
	err = fmt.Errorf("redlock: acquire %q: %w", l.key, o.err)
	l.observe(lock.Event{Kind: lock.EventAcquire, Token: token, Duration: time.Since(start), Attempts: 1, Err: err})
	return false, err
}

func (l *Lock) observe(e lock.Event) {
	if o := l.cfg.observer; o != nil {
		e.Key = l.key
		o.Observe(e)
	}
}
