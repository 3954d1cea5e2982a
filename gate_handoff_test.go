package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestGate_handoffRespectsDegradedHold: a lock of the Client that takes
// part in the local gate ([WithFallback] given to the lock) waits while a
// degraded hold of the key is live; a release in this process by a lock
// outside the gate must not hand it the key then: it would hold the key in
// Redis beside the degraded hold.
func TestGate_handoffRespectsDegradedHold(t *testing.T) {
	// Not parallel: stops and restarts its server.
	srv, rdb := downTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, rdb, lock.WithTTL(30*time.Second))
	fb := lock.WithFallback(lock.FallbackLocal)

	srv.Kill()
	deg := c.NewLock(key, fb)
	must(t, "Acquire() with Redis down", deg.Acquire(ctx))
	if !deg.Degraded() {
		t.Fatal("Degraded() = false with Redis down")
	}
	restart(t, srv, rdb)

	plain := c.NewLock(key) // outside the gate: its attempt goes to Redis
	must(t, "Acquire() of the ungated lock", plain.Acquire(ctx))

	waiter := c.NewLock(key, fb, lock.WithBackoff(time.Minute, time.Minute))
	got := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { got <- waiter.Acquire(wctx) }()
	waitIdle(t, c, key, 1)

	must(t, "Release() of the ungated lock", plain.Release(ctx))
	// The release hands the waiter the key (the handoff is settled by the
	// time Release returns); the waiter must refuse it, undo it, and wait
	// on.
	deadline := time.Now().Add(10 * time.Second)
	for lock.IdleWaiters(c, key) != 1 || rdb.Exists(ctx, lockKey(key)).Val() != 0 {
		select {
		case err := <-got:
			t.Fatalf("gated waiter Acquire() = %v, Degraded() = %v, Redis has %q, while the degraded hold is live",
				err, waiter.Degraded(), rdb.Get(ctx, lockKey(key)).Val())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiter not idle again with the key free: %d idle, Redis has %q",
				lock.IdleWaiters(c, key), rdb.Get(ctx, lockKey(key)).Val())
		}
		time.Sleep(time.Millisecond)
	}
	must(t, "Release() of the degraded hold", deg.Release(ctx))
	cancel()
	wantErr(t, "waiter Acquire()", <-got, lock.ErrNotAcquired)
	if n := rdb.Exists(ctx, lockKey(key)).Val(); n != 0 {
		t.Fatal("the refused handoff left the key set")
	}
}
