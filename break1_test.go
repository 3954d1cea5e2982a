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

// TestFallback_closeEndsDegradedWait: an Acquire that fell back and waits
// for the key in the Client's gate (a Redis hold of the Client is in the
// way) ends with ErrClosed when the Client closes, as a wait for Redis
// does: it does not take a degraded hold after Close once the Redis hold
// ends.
func TestFallback_closeEndsDegradedWait(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	sw := newSwitchedRedis(t, srv)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, sw.rdb, lock.WithFallback(lock.FallbackLocal), lock.WithTTL(5*time.Second))
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))

	sw.setDown(true)
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
