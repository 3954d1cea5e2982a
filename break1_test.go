package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// heldThenDown returns a Client with opt of a switchable redis-server, a
// lock of the Client holding key in Redis, and the server switched off.
func heldThenDown(t *testing.T, opt lock.Option) (*lock.Client, *switchedRedis, *lock.Lock, string) {
	t.Helper()
	sw := newSwitchedRedis(t, redistest.Start(t, redistest.Config{}))
	key := keyFor(t)
	c := newClient(t, sw.rdb, opt, lock.WithTTL(30*time.Second))
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(context.Background()))
	sw.setDown(true)
	return c, sw, holder, key
}

// TestFallback_closeEndsDegradedWait: an Acquire that fell back and waits
// for the key in the Client's gate (a Redis hold of the Client is in the
// way) ends with ErrClosed when the Client closes, as a wait for Redis
// does: it does not take a degraded hold after Close once the Redis hold
// ends.
func TestFallback_closeEndsDegradedWait(t *testing.T) {
	ctx := context.Background()
	c, sw, holder, key := heldThenDown(t, lock.WithFallback(lock.FallbackLocal))
	// The trap holds l's Acquire at its wait's first look at ctx.Done:
	// in the degraded wait, the holder's Redis hold in the way.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tc := &trapCtx{Context: cctx, hit: make(chan struct{}), free: make(chan struct{})}
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAcquire && e.Err != nil {
			tc.armedDone.Store(true) // the Redis part ended
		}
	})
	l := c.NewLock(key, lock.WithObserver(obs))
	done := make(chan error, 1)
	go func() { done <- l.Acquire(tc) }()
	select {
	case <-tc.hit:
	case err := <-done:
		t.Fatalf("Acquire() = %v before it waited in the gate", err)
	}

	must(t, "Close()", c.Close())
	close(tc.free)
	// The holder's Redis hold is still in the way: Close alone ends the
	// wait (5s: a bound, not a speed; the holder's TTL is 30s). Once the holder is released, a wait
	// Close did not end takes a degraded hold.
	var err error
	ended := true
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		ended = false
	}
	sw.setDown(false)
	must(t, "holder Release() after Close", holder.Release(ctx))
	if !ended {
		err = <-done
		if err == nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("Close did not end the degraded wait; once the holder released, Acquire() = %v (Degraded() = %v); want ErrClosed at Close", err, l.Degraded())
	}
	if err == nil {
		_ = l.Release(ctx)
		t.Fatalf("Acquire() under way at Close = nil (Degraded() = %v) after Close; want ErrClosed", l.Degraded())
	}
	if !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Acquire() under way at Close = %v; want ErrClosed", err)
	}
	wantGateEmpty(t, c, "after Close and the holder's Release")
}

// TestFallback_panickingObserverOnDegradedHold: an Observer that panics
// when told of a degraded acquisition (EventFallback) ends the degraded
// hold before the panic goes on, as it ends a Redis hold: the caller never
// learnt it held the key, and a degraded hold never expires, so it would
// keep every lock of the Client out of the key for good.
func TestFallback_panickingObserverOnDegradedHold(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	for _, verb := range []string{"Acquire", "TryAcquire", "WithLock"} {
		t.Run(verb, func(t *testing.T) {
			ctx := context.Background()
			var armed atomic.Bool
			obs := lock.ObserverFunc(func(e lock.Event) {
				if e.Kind == lock.EventFallback && e.Degraded && armed.CompareAndSwap(true, false) {
					panic("observer panicked")
				}
			})
			sw := newSwitchedRedis(t, srv)
			key := keyFor(t)
			c := newClient(t, sw.rdb, lock.WithFallback(lock.FallbackLocal))
			l := c.NewLock(key, lock.WithObserver(obs))
			sw.setDown(true)
			armed.Store(true)
			ran := false
			mustPanic(t, verb+"()", "the Observer's panic", func() {
				switch verb {
				case "Acquire":
					_ = l.Acquire(ctx)
				case "TryAcquire":
					_, _ = l.TryAcquire(ctx)
				default:
					_ = c.WithLock(ctx, key, func(context.Context) error { ran = true; return nil }, lock.WithObserver(obs))
				}
			})
			sw.setDown(false)
			if ran {
				t.Fatal("WithLock ran fn although its acquisition panicked")
			}
			wantGateEmpty(t, c, "after the panic")
			degradeProbe(t, c, sw, key, true)
		})
	}
}

// trapCtx is a context whose Deadline or Done, once armed, blocks its
// first caller until the test lets it go. Armed when the Redis part of an
// Acquire ends: Deadline is next called when the fallback derives its
// wait's context (WithWaitTimeout), before the degraded wait counts
// itself as a waiter; Done (without WithWaitTimeout) when the degraded
// wait, the key held in the gate, begins to wait.
type trapCtx struct {
	context.Context
	armed     atomic.Bool // traps the next Deadline
	armedDone atomic.Bool // traps the next Done
	hit       chan struct{}
	free      chan struct{}
}

func (c *trapCtx) Done() <-chan struct{} {
	if c.armedDone.CompareAndSwap(true, false) {
		close(c.hit)
		<-c.free
	}
	return c.Context.Done()
}

func (c *trapCtx) Deadline() (time.Time, bool) {
	if c.armed.CompareAndSwap(true, false) {
		close(c.hit)
		<-c.free
	}
	return c.Context.Deadline()
}

// TestMaxWaiters_fallbackStaysCounted: an Acquire with WithFallback counts
// as a waiter under WithMaxWaiters from its start until it returns, its
// change from the Redis part to the degraded wait included: while it is
// under way, a further Acquire of the key is refused with ErrContended,
// and the Acquire that was admitted is never refused halfway.
func TestMaxWaiters_fallbackStaysCounted(t *testing.T) {
	ctx := context.Background()
	c, sw, holder, key := heldThenDown(t, lock.WithMaxWaiters(1))

	tc := &trapCtx{Context: ctx, hit: make(chan struct{}), free: make(chan struct{})}
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAcquire && e.Err != nil {
			tc.armed.Store(true) // the Redis part ended: trap the fallback's first step
		}
	})
	l := c.NewLock(key, lock.WithFallback(lock.FallbackLocal), lock.WithWaitTimeout(time.Minute), lock.WithObserver(obs))
	done := make(chan error, 1)
	go func() { done <- l.Acquire(tc) }()
	select {
	case <-tc.hit:
	case err := <-done:
		t.Fatalf("Acquire() = %v before it fell back", err)
	}

	// l is under way (between its Redis part and its degraded wait): a
	// further Acquire of the key is one too many.
	other := c.NewLock(key)
	octx, ocancel := context.WithTimeout(ctx, 500*time.Millisecond)
	oerr := other.Acquire(octx)
	ocancel()
	close(tc.free)
	if oerr == nil {
		_ = other.Release(ctx)
	}
	sw.setDown(false)
	must(t, "holder Release()", holder.Release(ctx))
	lerr := <-done
	if lerr == nil {
		_ = l.Release(ctx)
	}
	if !errors.Is(oerr, lock.ErrContended) {
		t.Errorf("a second Acquire while the first is under way = %v; want ErrContended", oerr)
	}
	if lerr != nil {
		t.Errorf("the admitted Acquire = %v; want the lock once the holder released it", lerr)
	}
	wantGateEmpty(t, c, "at the end")
}

// TestFallback_handleBusyDuringDegradedWait: one handle holds the lock at
// most once at a time, and a second acquisition on it while one is under
// way fails with ErrInvalid, also while the first waits for the key in the
// Client's gate after falling back.
func TestFallback_handleBusyDuringDegradedWait(t *testing.T) {
	ctx := context.Background()
	c, sw, holder, key := heldThenDown(t, lock.WithFallback(lock.FallbackLocal))

	tc := &trapCtx{Context: ctx, hit: make(chan struct{}), free: make(chan struct{})}
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAcquire && e.Err != nil {
			tc.armed.Store(true)
		}
	})
	l := c.NewLock(key, lock.WithWaitTimeout(time.Minute), lock.WithObserver(obs))
	done := make(chan error, 1)
	go func() { done <- l.Acquire(tc) }()
	select {
	case <-tc.hit: // l's Acquire fell back: its Redis part is over
	case err := <-done:
		t.Fatalf("Acquire() = %v before it fell back", err)
	}
	close(tc.free)

	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	oerr := l.Acquire(octx)
	ocancel()
	sw.setDown(false)
	must(t, "holder Release()", holder.Release(ctx))
	if err := <-done; err == nil {
		_ = l.Release(ctx)
	}
	if !errors.Is(oerr, lock.ErrInvalid) {
		t.Fatalf("a second Acquire() on the handle while its first waits degraded = %v; want ErrInvalid", oerr)
	}
}
