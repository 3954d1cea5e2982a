package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestLock_Acquire_wokenByPublish: a waiter in another Client (as in another
// process) is woken by the release's publish, long before its backoff.
func TestLock_Acquire_wokenByPublish(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		holder := newClient(t, tg.rdb).NewLock(key)
		must(t, "Acquire()", holder.Acquire(ctx))
		wc := newClient(t, tg.newRDB(t))
		waiter := wc.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		done := make(chan error, 1)
		go func() { done <- waiter.Acquire(ctx) }()
		waitIdle(t, wc, key, 1) // the waiter failed once and listens
		released := time.Now()
		must(t, "Release()", holder.Release(ctx))
		select {
		case err := <-done:
			must(t, "waiter Acquire()", err)
			t.Logf("waiter held the lock %v after the release returned", time.Since(released).Round(time.Microsecond))
		case <-time.After(10 * time.Second):
			t.Fatal("waiter in another Client not woken by the release")
		}
		must(t, "Release()", waiter.Release(ctx))
	})
}

// TestLock_handoff: a release with a waiter of the same Client hands the
// hold over in its own round trip: the waiter holds the lock with a new
// token and a larger fence, nobody is woken by a publish, and after
// maxHandoffs (16) handoffs in a row one release frees the key for all.
func TestLock_handoff(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		sub := tg.newRDB(t).Subscribe(ctx, lockKey(key)+":notify")
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil { // the subscribe confirmation
			t.Fatal(err)
		}
		c := newClient(t, tg.rdb)
		cur := c.NewLock(key)
		must(t, "Acquire()", cur.Acquire(ctx))
		for i := range 20 {
			next := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
			done := make(chan error, 1)
			go func() { done <- next.Acquire(ctx) }()
			waitIdle(t, c, key, 1) // a release now hands over
			must(t, "Release()", cur.Release(ctx))
			select {
			case err := <-done:
				must(t, "waiter Acquire()", err)
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: waiter did not get the lock", i)
			}
			if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != next.Token() || next.Fence() <= cur.Fence() {
				t.Fatalf("round %d: key %q fence %d after %d, want the waiter's token %q and a larger fence", i, got, next.Fence(), cur.Fence(), next.Token())
			}
			cur = next
		}
		must(t, "Release()", cur.Release(ctx))
		// 20 handoff rounds: 16 handed over, the 17th released (publish), 3
		// more handed over; then the final release publishes.
		msgs := 0
		for {
			rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := sub.ReceiveMessage(rctx)
			cancel()
			if err != nil {
				break
			}
			msgs++
		}
		if msgs != 2 {
			t.Fatalf("%d release messages published over 20 handoff rounds and a final release, want 2", msgs)
		}
	})
}

// TestLock_handoffChurn: waiters of one Client that give up at random while
// releases hand the lock over. Every hold is exclusive, and when all is done
// no key is left behind.
func TestLock_handoffChurn(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.rdb, lock.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
		var (
			inside, overlaps, held, gaveUp atomic.Int32
			wg                             sync.WaitGroup
			errs                           = make(chan error, 64)
		)
		for g := range 8 {
			wg.Go(func() {
				for i := range 25 {
					wait := time.Duration(1+(g*7+i*3)%9) * time.Millisecond
					l := c.NewLock(key, lock.WithWaitTimeout(wait))
					err := l.Acquire(ctx)
					if errors.Is(err, lock.ErrNotAcquired) {
						gaveUp.Add(1)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					held.Add(1)
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("worker error = %v", err)
		}
		t.Logf("%d holds, %d waits given up", held.Load(), gaveUp.Load())
		if overlaps.Load() != 0 {
			t.Fatalf("%d overlapping holds", overlaps.Load())
		}
		if held.Load() == 0 || gaveUp.Load() == 0 {
			t.Fatalf("%d holds and %d give-ups: the test did not exercise both", held.Load(), gaveUp.Load())
		}
		// A waiter that left while a hold was being handed to it must not
		// strand the key: it is free now.
		ok, err := c.NewLock(key).TryAcquire(ctx)
		if !ok || err != nil {
			t.Fatalf("TryAcquire() after the churn = %v, %v, want true: a handed-over hold was stranded (key holds %q)",
				ok, err, tg.rdb.Get(ctx, lockKey(key)).Val())
		}
	})
}

// waitIdle waits until n waiters of c on key sit between attempts.
func waitIdle(t *testing.T, c *lock.Client, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for lock.IdleWaiters(c, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle waiters on %q, want %d", lock.IdleWaiters(c, key), key, n)
		}
		time.Sleep(time.Millisecond)
	}
}
