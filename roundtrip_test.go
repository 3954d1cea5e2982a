package lock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// TestRoundTrips counts, with a go-redis hook, the round trips of an
// uncontended acquire and release: one each, from the very first call on a
// fresh server on. The Client's first hold subscribes its force channel,
// and once that is confirmed the hold is asked about in Redis, by a
// renewal (a force-release before then went unheard): round trips in the
// background, for that hold alone, which the test lets pass first.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb := tg.newRDB(t)
		if err := rdb.Ping(ctx).Err(); err != nil { // dial outside the count
			t.Fatal(err)
		}
		rt := &roundTrips{}
		rdb.AddHook(rt)
		rec := &kindtest.Recorder{Renewals: true}
		c := newClient(t, rdb, lock.WithObserver(rec))
		first := c.NewLock(keyFor(t) + ":first")
		before := rt.n.Load()
		must(t, "Acquire() first", first.Acquire(ctx))
		if n := rt.n.Load() - before; n < 1 {
			t.Fatalf("first acquire took %d round trips, want at least 1", n)
		}
		waitUntil(t, "the first hold's check", func() bool { return slices.Contains(rec.Kinds(), lock.EventRenewed) })
		must(t, "Release() first", first.Release(ctx))
		for i := range 3 {
			l := c.NewLock(keyFor(t))
			before := rt.n.Load()
			must(t, "Acquire()", l.Acquire(ctx))
			if n := rt.n.Load() - before; n != 1 {
				t.Fatalf("acquire %d took %d round trips, want 1", i, n)
			}
			before = rt.n.Load()
			must(t, "Release()", l.Release(ctx))
			if n := rt.n.Load() - before; n != 1 {
				t.Fatalf("release %d took %d round trips, want 1", i, n)
			}
		}
		for i := range 2 {
			before := rt.n.Load()
			ok, err := c.NewLock(fmt.Sprintf("%s:try%d", keyFor(t), i)).TryAcquire(ctx)
			if !ok || err != nil || rt.n.Load()-before != 1 {
				t.Fatalf("TryAcquire %d = %v, %v in %d round trips, want true, nil in 1", i, ok, err, rt.n.Load()-before)
			}
		}
	})
}
