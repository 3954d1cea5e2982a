package redlock

import (
	"sync/atomic"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// Lock is a handle on one quorum lock. It is not held until Acquire or
// TryAcquire succeeds; after Release it may be acquired again, each hold
// getting a fresh token and fence. Its methods are safe for concurrent use,
// but one handle holds the lock at most once at a time.
type Lock struct {
	cfg *settings // nil on a zero Lock or one with a configuration error
	hd  lease.Handle
	// acq is the acquire round of the current hold: its release and undo
	// wait for each node's acquire call to return.
	acq atomic.Pointer[round]
}

// handle returns the engine's part of the Lock, nil for a nil Lock: its
// accessors and verbs are safe on nil, and on a zero Lock they report
// ErrInvalid.
func (l *Lock) handle() *lease.Handle {
	if l == nil {
		return nil
	}
	return &l.hd
}

// Key returns the caller's key, as given to NewLock ("" for a zero Lock).
func (l *Lock) Key() string { return l.handle().Key() }

// Token returns the token of the current or last hold, the same on every
// node: a random UUID v4. "" before the first acquisition.
func (l *Lock) Token() string { return l.handle().Token() }

// Fence returns the fencing token of the current or last hold. Fences of
// successive holds of the key strictly increase as long as a majority of the
// nodes keeps its counters (see docs/safety.md: a node restarted empty breaks
// it). 0 before the first acquisition, or with [WithFencing](false).
func (l *Lock) Fence() int64 { return l.handle().Fence() }

// Validity returns how long the current hold stays valid from now, by this
// process's monotonic clock: the TTL less the time its last confirmed
// acquire, extend or renewal round took and the drift allowance. It never
// exceeds the TTL; it is 0 before the first acquisition and once the hold
// was released, lost or ran out.
func (l *Lock) Validity() time.Duration { return l.handle().Left() }

// Lost returns a channel closed when the current hold ends involuntarily:
// too many nodes hold someone else's token or none, or no quorum confirmed
// a renewal before the hold's validity ran out. A Release does not close it.
// Each hold has its own channel; before the first acquisition Lost returns
// nil (a channel that never closes). See [Lock.LostErr].
func (l *Lock) Lost() <-chan struct{} { return l.handle().Lost() }

// LostErr returns the [*lock.LostError] of the current hold once
// [Lock.Lost] has closed, and nil before. It matches [lock.ErrLockLost].
func (l *Lock) LostErr() error { return l.handle().LostErr() }

// kind is a Lock as the engine sees it (lease.Kind): the quorum calls of
// its verbs. (*kind)(l) converts a *Lock at no cost.
type kind Lock

// Token returns a fresh random UUID v4: every attempt has its own.
func (*kind) Token() (string, error) { return lease.NewToken() }
