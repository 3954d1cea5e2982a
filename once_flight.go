package lock

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// onceState is a Client's state for Once: its policy for the Client's
// defaults, and the calls under way, by result key.
type onceState struct {
	set atomic.Pointer[settings] // the defaults with Once's policy; made on first use

	mu      sync.Mutex
	flights map[string]*flight
}

// flight is one Once call to Redis that other calls of the same Client on
// the same key wait for instead of sending their own: in-process
// singleflight in front of the one across processes.
type flight struct {
	done   chan struct{}
	v      []byte
	err    error
	shared bool // the followers take v and err; otherwise each tries itself
	// followers counts the calls that joined, under onceState.mu (tests).
	followers int
	// waiting counts the calls that joined and still wait for it, under
	// onceState.mu: they count as waiters for WithMaxWaiters.
	waiting int
}

// join returns the flight under way for rk, or a new one that the caller
// leads (lead true); nil when maxWaiters (WithMaxWaiters; 0: no cap) calls
// already wait for the one under way.
func (o *onceState) join(rk string, maxWaiters int) (f *flight, lead bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f = o.flights[rk]; f != nil {
		if maxWaiters > 0 && f.waiting >= maxWaiters {
			return nil, false
		}
		f.followers++
		f.waiting++
		return f, false
	}
	if o.flights == nil {
		o.flights = map[string]*flight{}
	}
	f = &flight{done: make(chan struct{})}
	o.flights[rk] = f
	return f, true
}

// leave counts a call that joined f as no longer waiting for it.
func (o *onceState) leave(f *flight) {
	o.mu.Lock()
	f.waiting--
	o.mu.Unlock()
}

// cut makes the call under way for rk, if any, no flight for calls that
// come later: they start their own. The calls that joined it still get its
// outcome.
func (o *onceState) cut(rk string) {
	o.mu.Lock()
	delete(o.flights, rk)
	o.mu.Unlock()
}

// lead makes call for f and ends f with its outcome, also when call
// panics (the panic continues; the followers then try themselves). Only
// what Redis keeps (call's kept true: a result or a failure stored by
// WithErrorTTL that it found, or fn's result that the leader stored) is
// shared; any other outcome is the leader's own (its ctx, its fn's error,
// even one that matches ErrOnceFailed because fn got it from another Once,
// fn's result whose store was still out at the leader's deadline) and is
// not.
func (o *onceState) lead(rk string, f *flight, call func() (v []byte, shared, kept bool, err error)) ([]byte, bool, error) {
	defer func() {
		o.mu.Lock()
		if o.flights[rk] == f { // not cut by Forget, which may have let a new one in
			delete(o.flights, rk)
		}
		o.mu.Unlock()
		close(f.done)
	}()
	v, shared, kept, err := call()
	if f.shared = kept; f.shared {
		// The caller owns v: the followers get copies of a copy.
		f.v, f.err = bytes.Clone(v), err
	}
	return v, shared, err
}
