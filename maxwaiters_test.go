package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestMaxWaiters_storm: one holder keeps the key while 40 goroutines of
// one Client call Acquire with WithMaxWaiters(n): exactly n of them wait,
// every other one fails with ErrContended before the holder lets go (at
// once: it does not wait for the key), and the n get the key in turn once
// it does. The gate counts no waiter afterwards.
func TestMaxWaiters_storm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tg   func(*testing.T) *target
	}{{"miniredis", miniTarget}, {"redis", realTarget}} {
		t.Run(tc.name, func(t *testing.T) {
			tg := tc.tg(t)
			ctx := context.Background()
			key := keyFor(t)
			const n, callers = 3, 40
			c := newClient(t, tg.rdb, lock.WithMaxWaiters(n), lock.WithTTL(5*time.Second))
			holder := c.NewLock(key)
			must(t, "holder Acquire()", holder.Acquire(ctx))

			contended := make(chan error, callers)
			acquired := make(chan *lock.Lock, callers)
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					l := c.NewLock(key)
					err := l.Acquire(ctx)
					switch {
					case errors.Is(err, lock.ErrContended):
						contended <- err
					case err != nil:
						t.Errorf("Acquire() = %v", err)
					default:
						acquired <- l
					}
				})
			}
			for range callers - n {
				select {
				case <-contended:
				case l := <-acquired:
					t.Fatalf("a caller acquired %q while the holder still held it (fence %d)", key, l.Fence())
				}
			}
			if _, w := lock.LocalGate(c, key); w != n {
				t.Fatalf("waiters counted = %d with the rest refused, want %d", w, n)
			}
			must(t, "holder Release()", holder.Release(ctx))
			for range n {
				l := <-acquired
				must(t, "Release()", l.Release(ctx))
			}
			wg.Wait()
			if keys, w := lock.LocalGate(c, key); keys != 0 || w != 0 {
				t.Fatalf("gate after the storm: %d keys, %d waiters; want none", keys, w)
			}
		})
	}
}

// TestMaxWaiters_tryAndOff: TryAcquire is never refused; without the
// option any number waits.
func TestMaxWaiters_tryAndOff(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, tg.rdb)
	holder := c.NewLock(key)
	must(t, "Acquire()", holder.Acquire(ctx))
	capped := c.NewLock(key, lock.WithMaxWaiters(1))
	if ok, err := capped.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() = (%v, %v), want (false, nil)", ok, err)
	}
	// One waiter of the capped kind is under way: a second capped call is
	// refused, an uncapped one is not counted and waits.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- capped.Acquire(wctx) }()
	for {
		if _, w := lock.LocalGate(c, key); w == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the first capped Acquire() returned %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	wantErr(t, "second capped Acquire()", c.NewLock(key, lock.WithMaxWaiters(1)).Acquire(ctx), lock.ErrContended)
	sctx, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer scancel()
	wantErr(t, "uncapped Acquire()", c.NewLock(key).Acquire(sctx), lock.ErrNotAcquired)
	cancel()
	wantErr(t, "first capped Acquire()", <-done, lock.ErrNotAcquired)
}
