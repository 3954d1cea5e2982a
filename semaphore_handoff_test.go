package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/luascripts"
)

// TestSemaphore_twoReleasesWakeTwo: two permits released one after the
// other must wake two waiters of a process, not one twice. The window: the
// longest-waiting waiter W1 has an attempt out (its reply, a refusal, held
// back by a hook) when both releases' messages arrive, so both are
// delivered to it while it is already owed a wake-up; W1 then takes one
// permit, and the other waiter W2 must take the second. A mutex released
// after them on another key, whose waiter in the same Client wakes,
// proves both messages were delivered (one subscription delivers in
// order). W2's backoff and the permits' TTL are long, so W2 can only get
// in by a wake-up.
func TestSemaphore_twoReleasesWakeTwo(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key, key2 := keyFor(t), keyFor(t)+":other"
	long := time.Hour
	holders := newClient(t, tg.newRDB(t), lock.WithTTL(long))
	hsem := holders.NewSemaphore(key, 2)
	a, b := hsem.Permit(), hsem.Permit()
	must(t, "Acquire() of permit A", a.Acquire(ctx))
	must(t, "Acquire() of permit B", b.Acquire(ctx))
	m2 := holders.NewLock(key2)
	must(t, "Acquire() of the other key", m2.Acquire(ctx))

	rdb := tg.newRDB(t)
	hook := hooktest.New(t, hooktest.Config{After: true, Match: hooktest.Script(luascripts.SemSources[0], luascripts.SemAcquire.Hash()), Nth: 1})
	rdb.AddHook(hook)
	c := newClient(t, rdb, lock.WithTTL(long), lock.WithBackoff(long, long))
	sem := c.NewSemaphore(key, 2)
	w1, w2 := sem.Permit(), sem.Permit()
	got1, got2, gotV := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	go func() { got1 <- w1.Acquire(ctx) }()
	waitUntil(t, "W1 idle", func() bool { return lock.IdleWaiters(c, key) == 1 })
	go func() { got2 <- w2.Acquire(ctx) }()
	waitUntil(t, "W1 and W2 idle", func() bool { return lock.IdleWaiters(c, key) == 2 })
	v := c.NewLock(key2)
	go func() { gotV <- v.Acquire(ctx) }()
	waitUntil(t, "the other key's waiter idle", func() bool { return lock.IdleWaiters(c, key2) == 1 })

	// Wake W1 alone, and hold back its attempt's refusal.
	hook.Arm()
	must(t, "PUBLISH", tg.rdb.Publish(ctx, lockKey(key)+":notify", "released").Err())
	waitClosed(t, hook.Held(), 10*time.Second, "W1's attempt held")

	must(t, "Release() of permit A", a.Release(ctx))
	must(t, "Release() of permit B", b.Release(ctx))
	must(t, "Release() of the other key", m2.Release(ctx))
	select {
	case err := <-gotV:
		must(t, "Acquire() of the other key's waiter", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the other key's waiter was not woken")
	}
	defer func() { _ = v.Release(ctx) }()
	hook.Release()

	for i, got := range []chan error{got1, got2} {
		select {
		case err := <-got:
			must(t, "Acquire() of a waiter", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter W%d still waits with a permit free: a release's wake-up was lost (%d permits out)",
				i+1, tg.rdb.ZCard(ctx, lockKey(key)).Val())
		}
	}
	must(t, "Release() of W1", w1.Release(ctx))
	must(t, "Release() of W2", w2.Release(ctx))
}

// TestSemaphore_handoffToWaiterThatLeft: a release hands its permit to a
// waiter whose wait ends while the handoff call is out (its reply held
// back by a hook after Redis moved the permit to the waiter's token). The
// waiter's Acquire fails, and the permit it never took must not stay out:
// the release undoes it, so the semaphore is free again.
func TestSemaphore_handoffToWaiterThatLeft(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	rdb := tg.newRDB(t)
	hook := hooktest.New(t, hooktest.Config{After: true, Match: hooktest.Script(luascripts.SemSources[4], luascripts.SemHandoff.Hash()), Nth: 1})
	rdb.AddHook(hook)
	c := newClient(t, rdb, lock.WithTTL(time.Hour), lock.WithBackoff(time.Hour, time.Hour))
	sem := c.NewSemaphore(key, 1)
	holder, w := sem.Permit(), sem.Permit()
	must(t, "holder Acquire()", holder.Acquire(ctx))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- w.Acquire(wctx) }()
	waitUntil(t, "an idle waiter", func() bool { return lock.IdleWaiters(c, key) == 1 })

	hook.Arm()
	released := make(chan error, 1)
	go func() { released <- holder.Release(ctx) }()
	waitClosed(t, hook.Held(), 10*time.Second, "the handoff's reply held")
	if m := tg.rdb.ZRange(ctx, lockKey(key), 0, -1).Val(); len(m) != 1 || m[0] == holder.Token() {
		t.Fatalf("members during the handoff %v, want one: the waiter's (the holder's was %q)", m, holder.Token())
	}
	cancel()
	select {
	case err := <-got:
		wantErr(t, "waiter Acquire()", err, lock.ErrNotAcquired)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter's Acquire did not end with its ctx")
	}
	hook.Release()
	must(t, "holder Release()", <-released)
	waitUntil(t, "the handed-over permit undone", func() bool { return tg.rdb.Exists(ctx, lockKey(key)).Val() == 0 })
	if n, err := sem.Available(ctx); err != nil || n != 1 {
		t.Fatalf("Available() = %d, %v; want 1", n, err)
	}
}
