package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestReleaseModes runs the lock's life cycle in both release modes, on both
// targets: one table, both modes.
func TestReleaseModes(t *testing.T) {
	for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
		t.Run(mode.String(), func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg *target) {
				ctx := context.Background()
				c := newClient(t, tg.rdb, lock.WithReleaseMode(mode))
				key := keyFor(t)

				a := c.NewLock(key, lock.WithTTL(5*time.Second))
				must(t, "Acquire()", a.Acquire(ctx))
				if a.Fence() < 1 {
					t.Fatalf("Fence() = %d, want >= 1", a.Fence())
				}
				b := c.NewLock(key)
				if ok, err := b.TryAcquire(ctx); ok || err != nil {
					t.Fatalf("TryAcquire() on a held key = %v, %v, want false, nil", ok, err)
				}
				must(t, "Extend()", a.Extend(ctx, time.Minute))
				d, err := a.TTL(ctx)
				must(t, "TTL()", err)
				if d <= 5*time.Second || d > time.Minute {
					t.Fatalf("TTL() after Extend(1m) = %v, want in (5s, 1m]", d)
				}

				// A waiter with a long backoff is woken by the release's publish.
				done := make(chan error, 1)
				go func() { done <- b.Acquire(ctx) }()
				time.Sleep(50 * time.Millisecond)
				must(t, "Release()", a.Release(ctx))
				select {
				case err := <-done:
					must(t, "waiter Acquire()", err)
				case <-time.After(10 * time.Second):
					t.Fatal("waiter not woken")
				}
				if b.Fence() <= a.Fence() {
					t.Fatalf("fence %d after %d, want larger", b.Fence(), a.Fence())
				}
				wantErr(t, "stale Release()", a.Release(ctx), lock.ErrNotHeld)
				wantErr(t, "stale Extend()", a.Extend(ctx, time.Second), lock.ErrNotHeld)
				_, err = a.TTL(ctx)
				wantErr(t, "stale TTL()", err, lock.ErrNotHeld)
				if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != b.Token() {
					t.Fatalf("stale calls touched the holder's key: %q, want %q", got, b.Token())
				}

				tg.expire(t, key)
				wantErr(t, "Release() after expiry", b.Release(ctx), lock.ErrNotHeld)
				if !isClosed(b.Lost()) {
					t.Fatal("Lost() open after Release found the hold gone")
				}
			})
		})
	}
}

func TestLock_reentrant(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		outer := c.NewLock(key, lock.WithOwner("job-7"))
		inner := c.NewLock(key, lock.WithOwner("job-7"))
		stranger := c.NewLock(key, lock.WithOwner("job-8"))
		plain := c.NewLock(key)
		must(t, "outer Acquire()", outer.Acquire(ctx))
		must(t, "inner Acquire()", inner.Acquire(ctx))
		if inner.Fence() != outer.Fence() || inner.Token() != "job-7" {
			t.Fatalf("inner hold: fence %d token %q, want the outer's fence %d and token job-7", inner.Fence(), inner.Token(), outer.Fence())
		}
		for name, l := range map[string]*lock.Lock{"other owner": stranger, "plain lock": plain} {
			if ok, err := l.TryAcquire(ctx); ok || err != nil {
				t.Fatalf("%s TryAcquire() = %v, %v, want false, nil", name, ok, err)
			}
		}
		must(t, "inner Release()", inner.Release(ctx))
		if ok, _ := stranger.TryAcquire(ctx); ok {
			t.Fatal("lock free while the outer hold remains")
		}
		if isClosed(outer.Lost()) {
			t.Fatal("inner release closed the outer hold's Lost()")
		}
		must(t, "outer Extend()", outer.Extend(ctx, time.Minute))
		must(t, "outer Release()", outer.Release(ctx))
		if tg.rdb.Exists(ctx, lockKey(key)).Val() != 0 {
			t.Fatal("key left after every re-entrant hold was released")
		}
		if ok, err := plain.TryAcquire(ctx); !ok || err != nil {
			t.Fatalf("plain TryAcquire() after the owner let go = %v, %v, want true, nil", ok, err)
		}
		// A re-entrant lock does not take a plain lock's key.
		if ok, err := stranger.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("owner TryAcquire() on a plain hold = %v, %v, want false, nil", ok, err)
		}
		must(t, "plain Release()", plain.Release(ctx))
	})
}

// TestLock_TTL_keyGone: TTL on a hold whose key is gone asks Redis, returns
// an error matching ErrNotHeld, and reports the hold lost, in both modes.
func TestLock_TTL_keyGone(t *testing.T) {
	for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
		t.Run(mode.String(), func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg *target) {
				ctx := context.Background()
				c := newClient(t, tg.rdb, lock.WithReleaseMode(mode))
				key := keyFor(t)
				l := c.NewLock(key)
				must(t, "Acquire()", l.Acquire(ctx))
				tg.expire(t, key)

				_, err := l.TTL(ctx)
				wantErr(t, "TTL() on a deleted key", err, lock.ErrNotHeld)
				waitClosed(t, l.Lost(), time.Second, "Lost() after TTL() found the key gone")
				var lost *lock.LostError
				if !errors.As(l.LostErr(), &lost) || lost.Reason != lock.LossForceReleased {
					t.Fatalf("LostErr() = %v, want reason %v", l.LostErr(), lock.LossForceReleased)
				}
			})
		})
	}
}

// TestExtend_afterFailedReleaseNeverOutlivesKey: a Release whose call fails
// (here before it reaches Redis) takes the hold out of renewal and ends it,
// while Redis still has the key. An Extend on the handle then reaches Redis
// and is confirmed. If it returns nil, the hold is live again with the new
// TTL, so its Lost() must close before that TTL runs out: when another
// client takes the key, the first handle must not still look held.
func TestExtend_afterFailedReleaseNeverOutlivesKey(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	fail := &failReleases{}
	rdb.AddHook(fail)
	l := newClient(t, rdb).NewLock(keyFor(t), lock.WithTTL(3*time.Second))
	must(t, "Acquire()", l.Acquire(ctx))
	fail.armed.Store(true)
	if err := l.Release(ctx); err == nil {
		t.Fatal("Release() = nil, want the injected connection reset")
	}
	const short = 600 * time.Millisecond
	switch err := l.Extend(ctx, short); {
	case errors.Is(err, lock.ErrNotHeld):
		return // refused: the hold was given up
	case err != nil:
		t.Fatalf("Extend() after a failed Release: %v, want nil or ErrNotHeld", err)
	}
	takeOver(t, newClient(t, srv.Client(t)), rdb, l, short+2*time.Second,
		fmt.Sprintf("Extend(%v) returned nil after a failed Release", short))
}
