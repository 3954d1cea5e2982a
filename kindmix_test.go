package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestKindMix_mutexReleaseSkipsSemaphoreWaiter: a mutex's release in a
// Client where a semaphore's Acquire waits on the same key must not hand
// that waiter the mutex's hold (handoff.lua writes the waiter's token as a
// mutex string at P{K}): the waiter would return holding a "permit" that is
// a mutex, with no error. The window: the semaphore waiter sleeps (its
// permit holder's key removed behind its back, so no message wakes it), a
// mutex of the same Client takes the now free key and releases it while
// the waiter is idle. The waiter must either fail with an error wrapping
// ErrInvalid (the key is a mutex) or hold a real permit (the key was free
// again when it looked): never return with a mutex hold for a permit.
func TestKindMix_mutexReleaseSkipsSemaphoreWaiter(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 30 * time.Second
	holder := newClient(t, tg.newRDB(t), lock.WithTTL(ttl))
	must(t, "holder Acquire()", holder.NewSemaphore(key, 1).Permit().Acquire(ctx))

	c := newClient(t, tg.newRDB(t), lock.WithTTL(ttl), lock.WithBackoff(time.Minute, time.Minute))
	w := c.NewSemaphore(key, 1).Permit()
	done := make(chan error, 1)
	go func() { done <- w.Acquire(ctx) }()
	waitUntil(t, "an idle semaphore waiter", func() bool { return lock.IdleWaiters(c, key) == 1 })

	// The permit goes without a message (as if its holder's key was
	// flushed), and a mutex of the same Client takes the free key.
	must(t, "DEL", tg.rdb.Del(ctx, lockKey(key)).Err())
	m := c.NewLock(key)
	ok, err := m.TryAcquire(ctx)
	if err != nil || !ok {
		t.Fatalf("mutex TryAcquire() = %v, %v; want true, nil", ok, err)
	}
	must(t, "mutex Release()", m.Release(ctx))

	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the semaphore waiter neither took a permit nor failed")
	}
	if err != nil {
		wantErr(t, "semaphore Acquire()", err, lock.ErrInvalid)
		return
	}
	// Taken: it must be a permit, a member of the semaphore's sorted set.
	defer func() { _ = w.Release(ctx) }()
	if typ := tg.rdb.Type(ctx, lockKey(key)).Val(); typ != "zset" {
		v, _ := tg.rdb.Get(ctx, lockKey(key)).Result()
		t.Fatalf("semaphore Acquire() = nil but P{K} is a %s (%q; the waiter's token %q): handed a mutex hold", typ, v, w.Token())
	}
	if _, err := tg.rdb.ZScore(ctx, lockKey(key), w.Token()).Result(); err != nil {
		t.Fatalf("semaphore Acquire() = nil but its token is no member of P{K}: %v", err)
	}
}
