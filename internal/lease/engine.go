package lease

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Engine is one Client's background machinery: the renewal loop for every
// hold of the Client, its wake-up subscriptions, and the goroutines it owns.
// A kind's Client embeds one and calls Init before use; the zero Engine
// reports Ready false.
type Engine struct {
	closed atomic.Bool
	ctx    context.Context // ends at Close, stopping background work
	cancel context.CancelFunc
	wg     sync.WaitGroup // the renewal loop and its calls: Close waits for them
	bg     sync.WaitGroup // background tasks (Go): Close waits for them up to BackgroundWait

	// Notifier is the Client's pub/sub subscription for wake-ups.
	Notifier Notifier
	// Logger is where the Engine's own trouble goes (nil: silent): the
	// Client's default logger.
	Logger *slog.Logger

	// The renewal loop's state, and every hold's term.
	mu    sync.Mutex
	q     holdHeap
	kick  chan struct{} // wakes the loop when an earlier event arrives
	armed int64         // when the loop's timer fires next (see mono)
	// lead is how far ahead of its sending the last hold added was due
	// (its renewal time, TTL/3 for most), and idle the loop's wake-ups in a
	// row with no hold to renew: an idle loop sleeps lead/2 rather than an
	// hour, maxIdle times, so that the next hold of the same TTL finds the
	// loop due before it and need not wake it (see add).
	lead      time.Duration
	idle      int
	started   bool
	abandoned bool // Close has run: holds only get deadline timers
	// lowered is closed, and replaced, when the deadline of a hold in a
	// renewal call is brought forward, so the call's watch looks again.
	lowered chan struct{}
	// flights are the renewals out: holds taken off the heap are found
	// there (holdOf).
	flights map[*flight]struct{}
	// applied, when not nil, is closed, and set to nil, when the next
	// chunk of renewals is applied: an Extend waiting for its hold's
	// renewal made it (Engine.extending).
	applied chan struct{}
	// forced remembers the force messages that named no registered hold,
	// token -> when heard, for holds not installed yet; forcedLast is when
	// the last came, and forgot when the last one forgotten came
	// (math.MinInt64: none). See force.go.
	forced     map[string]int64
	forcedLast int64
	forgot     int64

	// installed, set only by tests before the first hold, runs on the
	// acquiring goroutine once install has put a new hold into renewal,
	// before install returns it, so a test can end the hold there.
	installed func(*Hold)
	// extendWaits, set only by tests (SetExtendWaitHook), runs on an
	// Extend's goroutine when it waits for its hold's renewal to be
	// applied.
	extendWaits func()
}

// SetExtendWaitHook makes every Extend of e's holds call fn each time it
// waits for a renewal of its hold, out when it began, to be applied, so a
// test can let that renewal go then. Set it before any Extend.
func (e *Engine) SetExtendWaitHook(fn func()) {
	e.mu.Lock()
	e.extendWaits = fn
	e.mu.Unlock()
}

// flight is the holds one tick of the renewal loop sent renewals for, out
// of the heap until their replies are applied. left counts its chunks not
// yet applied (Engine's mu); the last one takes it off Engine.flights.
type flight struct {
	hs   []*Hold
	left int
}

// Init readies e; sources tells its Notifier where a channel's messages
// come from (see Notifier), and logger is the Client's. It starts no
// goroutine.
func (e *Engine) Init(sources Sources, logger *slog.Logger) {
	e.Logger = logger
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.kick = make(chan struct{}, 1)
	e.lowered = make(chan struct{})
	e.armed = math.MinInt64 // no timer yet: the loop looks at the heap when it starts
	e.forgot = math.MinInt64
	e.Notifier.init(e, sources)
}

// Ready reports whether Init has run: false for the Engine of a zero Client.
func (e *Engine) Ready() bool { return e != nil && e.cancel != nil }

// Closed reports whether Close has begun.
func (e *Engine) Closed() bool { return e.closed.Load() }

// Context returns a context that ends when Close begins, for the Client's
// background calls.
func (e *Engine) Context() context.Context { return e.ctx }

// BackgroundWait bounds how long Close waits for the background tasks
// still running (Go): each is bounded on its own, but a call to a server
// that does not answer lasts until go-redis gives it up, whatever its
// context says, unless the client sets ContextTimeoutEnabled.
const BackgroundWait = 5 * time.Second

// Go runs fn, a task bounded on its own, on a goroutine that Close waits
// for (up to BackgroundWait), and reports true; once Close has begun it
// runs nothing and reports false. A panic of fn is recovered and logged
// (see Survive).
func (e *Engine) Go(fn func()) bool {
	if !e.track() {
		return false
	}
	go func() {
		defer e.bg.Done()
		e.guard(fn)
	}()
	return true
}

// guard runs fn, recovering and logging a panic of it (see Survive).
func (e *Engine) guard(fn func()) {
	defer e.Survive("background task")
	fn()
}

// track counts one more background task that Close waits for and reports
// true, or reports false once Close has begun.
func (e *Engine) track() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Close sets closed, then takes e.mu before it waits: a task counted
	// here is counted before that wait.
	if e.closed.Load() {
		return false
	}
	e.bg.Add(1)
	return true
}

// background runs fn on a goroutine, one Close waits for unless Close has
// begun: fn must be bounded on its own.
func (e *Engine) background(fn func()) {
	if !e.Go(fn) {
		go e.guard(fn)
	}
}

// Close stops the renewal loop and the subscriptions and waits for the
// loop and its calls, then for the background tasks up to BackgroundWait;
// stop, if not nil, runs after the background context ended and before the
// waits. Holds still held get timers that report them lost at their
// deadlines. Only the first call does anything; it reports whether it was
// that one.
func (e *Engine) Close(stop func()) bool {
	if e.closed.Swap(true) {
		return false
	}
	// An empty section, as a barrier: it orders every add and Go before
	// the wait below.
	e.mu.Lock()
	//lint:ignore SA2001 a barrier, see above
	e.mu.Unlock()
	e.cancel()
	// Before any wait: a renewal call out to a stalled server can keep the
	// loop's goroutines for seconds, and holds on healthy servers must be
	// watched meanwhile, by a timer each. A hold whose renewal call is out
	// is watched by that call until it returns, and gets its timer then
	// (requeue).
	e.abandon()
	e.Notifier.close()
	if stop != nil {
		stop()
	}
	e.wg.Wait()
	waitFor(&e.bg, BackgroundWait)
	return true
}

// WaitFor waits until wg's count is zero, at most d.
func WaitFor(wg *sync.WaitGroup, d time.Duration) { waitFor(wg, d) }

// waitFor waits until wg's count is zero, at most d.
func waitFor(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
