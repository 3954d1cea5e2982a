package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// clocked is the least fence a counter started from the server's clock hands
// out (the clock in µs); smaller values come only from counters written by
// versions that never let them expire.
const clocked = luascripts.Clocked

func fenceKey(key string) string { return lockKey(key) + ":fence" }

// fenceKinds are the ways a hold gets its fence: the acquire script, the
// script-free transaction, and the re-entrant acquire script.
var fenceKinds = []struct {
	name string
	opts []lock.Option
}{
	{"script", nil},
	{"watch", []lock.Option{lock.WithReleaseMode(lock.ReleaseWatch)}},
	{"reentrant", []lock.Option{lock.WithOwner("o")}},
}

// TestFence_counterExpires: the fencing counter gets a TTL (at most
// luascripts.FenceTTL) in every mode, including a counter left without one
// by an older version, so keys used once leave nothing in Redis for good.
func TestFence_counterExpires(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		for _, kind := range fenceKinds {
			for _, legacy := range []bool{false, true} {
				key := fmt.Sprintf("%s:%s:%v", keyFor(t), kind.name, legacy)
				if legacy {
					must(t, "SET fence", tg.rdb.Set(ctx, fenceKey(key), 42, 0).Err())
				}
				l := c.NewLock(key, kind.opts...)
				must(t, "Acquire()", l.Acquire(ctx))
				ttl, err := tg.rdb.PTTL(ctx, fenceKey(key)).Result()
				must(t, "PTTL fence", err)
				if ttl <= 0 || ttl > luascripts.FenceTTL {
					t.Fatalf("%s (counter at 42 before: %v): PTTL of the fence counter = %v, want in (0, %v]", kind.name, legacy, ttl, luascripts.FenceTTL)
				}
				must(t, "Release()", l.Release(ctx))
			}
		}
	})
}

// TestFence_increasesAcrossCounterExpiry: once the counter is gone (deleted,
// expired, or left at a small value by an older version), the next fence is
// still larger than every earlier one, in every mode; a nested re-entrant
// hold still shares its outer hold's fence; a handoff still gives the waiter
// a larger fence than the releaser's.
func TestFence_increasesAcrossCounterExpiry(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		drops := []struct {
			name string
			drop func(t *testing.T, key string)
		}{
			{"deleted", func(t *testing.T, key string) {
				must(t, "DEL fence", tg.rdb.Del(ctx, fenceKey(key)).Err())
			}},
			{"expired", func(t *testing.T, key string) { expireFence(t, tg, key) }},
			{"legacy", func(t *testing.T, key string) {
				must(t, "SET fence", tg.rdb.Set(ctx, fenceKey(key), 3, 0).Err())
			}},
		}
		for _, kind := range fenceKinds {
			for _, d := range drops {
				key := fmt.Sprintf("%s:%s:%s", keyFor(t), kind.name, d.name)
				var last int64
				for i := range 3 {
					l := c.NewLock(key, kind.opts...)
					must(t, "Acquire()", l.Acquire(ctx))
					if l.Fence() <= last {
						t.Fatalf("%s, counter %s: fence %d after %d, want larger", kind.name, d.name, l.Fence(), last)
					}
					last = l.Fence()
					if i == 1 {
						d.drop(t, key) // while held: the next holder still gets more
					}
					must(t, "Release()", l.Release(ctx))
					if i == 0 {
						d.drop(t, key)
					}
				}
			}
		}
	})
}

// TestFence_nestedHoldSharesOuterFenceAfterCounterExpiry: a nested
// re-entrant hold gets its outer hold's fence from the lock itself, also
// when the counter is gone.
func TestFence_nestedHoldSharesOuterFenceAfterCounterExpiry(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		outer := c.NewLock(key, lock.WithOwner("o"))
		must(t, "outer Acquire()", outer.Acquire(ctx))
		must(t, "DEL fence", tg.rdb.Del(ctx, fenceKey(key)).Err())
		inner := c.NewLock(key, lock.WithOwner("o"))
		must(t, "inner Acquire()", inner.Acquire(ctx))
		if inner.Fence() != outer.Fence() || outer.Fence() < clocked {
			t.Fatalf("inner fence %d, outer %d: want the outer's, from the clock", inner.Fence(), outer.Fence())
		}
		must(t, "inner Release()", inner.Release(ctx))
		must(t, "outer Release()", outer.Release(ctx))
	})
}

// TestFence_handoffAfterCounterExpiry: a release that hands the hold to a
// waiter of the same Client gives it a larger fence than the releaser's,
// also when the counter expired while the releaser held the lock.
func TestFence_handoffAfterCounterExpiry(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		cur := c.NewLock(key)
		must(t, "Acquire()", cur.Acquire(ctx))
		next := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		done := make(chan error, 1)
		go func() { done <- next.Acquire(ctx) }()
		waitIdle(t, c, key, 1) // a release now hands over
		must(t, "DEL fence", tg.rdb.Del(ctx, fenceKey(key)).Err())
		must(t, "Release()", cur.Release(ctx))
		select {
		case err := <-done:
			must(t, "waiter Acquire()", err)
		case <-time.After(10 * time.Second):
			t.Fatal("waiter did not get the lock")
		}
		if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != next.Token() || next.Fence() <= cur.Fence() {
			t.Fatalf("key %q fence %d after %d, want the waiter's token %q and a larger fence", got, next.Fence(), cur.Fence(), next.Token())
		}
		if ttl := tg.rdb.PTTL(ctx, fenceKey(key)).Val(); ttl <= 0 {
			t.Fatalf("PTTL of the fence counter after a handoff = %v, want a TTL", ttl)
		}
		must(t, "Release()", next.Release(ctx))
	})
}

// expireFence makes the fence counter of key expire: on miniredis by moving
// its clock, on a real server by a 1ms TTL, waiting until the key is gone.
func expireFence(t *testing.T, tg *target, key string) {
	t.Helper()
	ctx := context.Background()
	must(t, "PEXPIRE fence", tg.rdb.PExpire(ctx, fenceKey(key), time.Millisecond).Err())
	if tg.mr != nil {
		tg.mr.FastForward(time.Millisecond)
	}
	eventually(t, "the fence counter expires after a 1ms TTL", func() bool { return tg.rdb.Exists(ctx, fenceKey(key)).Val() == 0 })
}

// TestReleaseWatch_besideReentrantHash: a script-free lock meets a key that
// is a re-entrant hash: it does not take it, and its stale calls leave the
// hash alone.
func TestReleaseWatch_besideReentrantHash(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		w := c.NewLock(key, lock.WithReleaseMode(lock.ReleaseWatch))
		must(t, "watch Acquire()", w.Acquire(ctx))
		tg.expire(t, key)
		owner := c.NewLock(key, lock.WithOwner("o"))
		must(t, "owner Acquire()", owner.Acquire(ctx))

		if ok, err := c.NewLock(key, lock.WithReleaseMode(lock.ReleaseWatch)).TryAcquire(ctx); ok || err != nil {
			t.Fatalf("watch TryAcquire() on a hash = %v, %v, want false, nil", ok, err)
		}
		wantErr(t, "watch Extend()", w.Extend(ctx, time.Minute), lock.ErrNotHeld)
		_, err := w.TTL(ctx)
		wantErr(t, "watch TTL()", err, lock.ErrNotHeld)
		wantErr(t, "watch Release()", w.Release(ctx), lock.ErrNotHeld)
		if v := tg.rdb.HGet(ctx, lockKey(key), "o").Val(); v != "1" {
			t.Fatalf("owner's level = %q after stale watch calls, want 1", v)
		}
		must(t, "owner Release()", owner.Release(ctx))
	})
}
