package lock_test

import (
	"context"
	"errors"
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
