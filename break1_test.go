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
	c := newClient(t, sw.rdb, opt, lock.WithTTL(5*time.Second))
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
	redisPartEnded := make(chan struct{})
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAcquire && e.Err != nil {
			close(redisPartEnded) // once: the Redis part ends once
		}
	})
	l := c.NewLock(key, lock.WithObserver(obs))
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Acquire(actx) }()
	select {
	case <-redisPartEnded:
	case err := <-done:
		t.Fatalf("Acquire() = %v before its Redis part ended; want it waiting in the gate", err)
	}

	must(t, "Close()", c.Close())
	sw.setDown(false)
	must(t, "holder Release() after Close", holder.Release(ctx))
	err := <-done
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

// trapCtx is a context whose Deadline, once armed, blocks its first caller
// until the test lets it go: acquireLocal derives its wait's context
// (WithWaitTimeout) from the Acquire's ctx after the Redis part of the
// Acquire ended and before the degraded wait counts itself as a waiter.
type trapCtx struct {
	context.Context
	armed atomic.Bool
	hit   chan struct{}
	free  chan struct{}
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
