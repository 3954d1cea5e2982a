package lease

import (
	"context"
	"log/slog"
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
	call     func() R
	after    func(R, error)
	r        R
	returned bool // the call returned (a panic then came from after)
	panicked any  // the call panicked with this while its caller waited (see recover)
	done     chan struct{}
	state    atomic.Int32 // callRunning, then callDone or callLeft
	lg       *slog.Logger
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
	defer p.recover()
	p.r = p.call()
	p.returned = true
	if p.state.CompareAndSwap(callRunning, callDone) {
		close(p.done)
		return
	}
	if p.after != nil {
		p.after(p.r, nil)
	}
}

// recover, deferred by run, recovers a panic of the call (a go-redis hook,
// say) or of after. While the caller still waits, the panic is handed to
// it, to go on on its own goroutine (result); once it has left, the panic
// is logged and after, if the call itself panicked, receives the zero R and
// an error matching ErrPanicked: the call's outcome is unknown.
func (p *pending[R]) recover() {
	v := recover()
	if v == nil {
		return
	}
	if !p.returned && p.state.CompareAndSwap(callRunning, callDone) {
		p.panicked = v
		close(p.done)
		return
	}
	err := Recovered(p.lg, "call", v)
	if p.after != nil && !p.returned {
		var zero R
		p.after(zero, err)
	}
}

// result returns the call's result, or panics with what the call panicked
// with: on the caller's goroutine, as if the call had run there.
func (p *pending[R]) result() R {
	if p.panicked != nil {
		panic(p.panicked)
	}
	return p.r
}

// runBounded runs call on a goroutine of e and waits for it until ctx is
// done. It returns call's result and true, or, when ctx ended first, the
// zero R and false: call then runs on, and after (when not nil) receives
// its result on that goroutine once it returns, or the zero R and an error
// matching ErrPanicked if it panicked (see pending.recover). A call that
// panics while the caller waits panics on the caller's goroutine.
func runBounded[R any](e *Engine, ctx context.Context, call func() R, after func(R, error)) (R, bool) {
	p := &pending[R]{call: call, after: after, done: make(chan struct{}), lg: e.Logger}
	if e.track() {
		go p.run(&e.bg)
	} else {
		go p.run(nil) // Close has begun: the call is bounded on its own
	}
	select {
	case <-p.done:
		return p.result(), true
	case <-ctx.Done():
	}
	if p.state.CompareAndSwap(callRunning, callLeft) {
		var zero R
		return zero, false
	}
	<-p.done // it returned just now
	return p.result(), true
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

// CallOn runs call, a call to Redis made outside a handle's verbs (a read,
// an operator's verb), on a goroutine of e, and waits for it until ctx is
// done: for a client that would not end the call at ctx's deadline. It
// returns call's result and true, or the zero R and false when ctx ended
// first; call then runs on and its result is dropped. A call that panics
// while the caller waits panics on the caller's goroutine.
func CallOn[R any](e *Engine, ctx context.Context, call func() R) (R, bool) {
	return runBounded(e, ctx, call, nil)
}

// Unanswered returns the error of a call that ctx cut short: sent, its
// outcome unknown. It matches context.Cause(ctx).
func Unanswered(ctx context.Context) error { return unanswered(ctx) }
