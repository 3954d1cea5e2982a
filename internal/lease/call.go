package lease

import (
	"context"
	"sync"
	"sync/atomic"
)

// bounded reports whether a call for a verb with ctx must run on a
// goroutine of its own to return by ctx's deadline: when the kind's client
// would not keep it (Policy.Bounded). Without a deadline the call runs on
// the caller's goroutine, at no cost.
func (hd *Handle) bounded(ctx context.Context) bool {
	if !hd.pol.Bounded {
		return false
	}
	_, ok := ctx.Deadline()
	return ok
}

// pending is one call runBounded runs.
type pending[R any] struct {
	call  func() R
	after func(R)
	r     R
	done  chan struct{}
	state atomic.Int32 // callRunning, then callDone or callLeft
}

const (
	callRunning = iota
	callDone    // the call returned while its caller waited
	callLeft    // the caller left first: the call's result goes to after
)

// run makes the call, on a goroutine counted in wg (nil: none).
func (p *pending[R]) run(wg *sync.WaitGroup) {
	if wg != nil {
		defer wg.Done()
	}
	p.r = p.call()
	if p.state.CompareAndSwap(callRunning, callDone) {
		close(p.done)
		return
	}
	if p.after != nil {
		p.after(p.r)
	}
}

// runBounded runs call on a goroutine of e and waits for it until ctx is
// done. It returns call's result and true, or, when ctx ended first, the
// zero R and false: call then runs on, and after (when not nil) receives
// its result on that goroutine once it returns.
func runBounded[R any](e *Engine, ctx context.Context, call func() R, after func(R)) (R, bool) {
	p := &pending[R]{call: call, after: after, done: make(chan struct{})}
	if e.track() {
		go p.run(&e.bg)
	} else {
		go p.run(nil) // Close has begun: the call is bounded on its own
	}
	select {
	case <-p.done:
		return p.r, true
	case <-ctx.Done():
	}
	if p.state.CompareAndSwap(callRunning, callLeft) {
		var zero R
		return zero, false
	}
	<-p.done // it returned just now
	return p.r, true
}

// Call runs call, a kind's own call for a verb on hd with ctx. When the
// verb must return by ctx's deadline (see bounded) and ctx ends first, it
// returns the zero R and false, and call's result is dropped when it comes.
func Call[R any](hd *Handle, ctx context.Context, call func() R) (R, bool) {
	if !hd.bounded(ctx) {
		return call(), true
	}
	return runBounded(hd.pol.Engine, ctx, call, nil)
}
