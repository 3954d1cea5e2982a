package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestFair_fenceCounterLivesAsLongAsTheHold: a fair hold keeps its key's
// fence counter alive at least as long as itself, as a mutex hold does,
// whether it took the key itself or a release handed it over: Inspect (and
// a force release's audit entry) read a mutex hold's fence there. The
// counter is made to expire soon before each acquisition.
func TestFair_fenceCounterLivesAsLongAsTheHold(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb, lock.WithTTL(time.Minute), lock.WithFair(true), lock.WithBackoff(time.Minute, time.Minute))
	key := keyFor(t)
	counter := lockKey(key) + ":fence"
	shorten := func() {
		t.Helper()
		if ok, err := tg.rdb.PExpire(ctx, counter, 500*time.Millisecond).Result(); !ok || err != nil {
			t.Fatalf("PEXPIRE %s = (%v, %v)", counter, ok, err)
		}
	}
	wantKept := func(l *lock.Lock, how string) {
		t.Helper()
		hold, cnt := tg.rdb.PTTL(ctx, lockKey(key)).Val(), tg.rdb.PTTL(ctx, counter).Val()
		if cnt < hold-time.Second {
			t.Fatalf("%s: fence counter PTTL %v, hold's %v: the counter expires first", how, cnt, hold)
		}
		info, err := c.Inspect(ctx, key)
		must(t, "Inspect()", err)
		if len(info.Holders) != 1 || info.Fence != l.Fence() {
			t.Fatalf("%s: Inspect() = %+v, want one holder and fence %d", how, info, l.Fence())
		}
	}
	warm := c.NewLock(key)
	must(t, "Acquire()", warm.Acquire(ctx)) // makes the counter
	must(t, "Release()", warm.Release(ctx))

	shorten()
	a := c.NewLock(key)
	must(t, "a.Acquire()", a.Acquire(ctx))
	wantKept(a, "taken")

	b := c.NewLock(key)
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx) }()
	waitUntil(t, "b to queue", func() bool { n, _ := a.Waiters(ctx); return n == 1 })
	shorten()
	must(t, "a.Release()", a.Release(ctx))
	must(t, "b.Acquire()", <-got)
	wantKept(b, "handed over")
	must(t, "b.Release()", b.Release(ctx))
}

// TestMultiLock_fenceCountersLiveAsLongAsTheHold: each member of a fencing
// multi-lock keeps its fence counter alive as long as itself, from the
// acquire and through Extend (and renewal), as a mutex hold does: Inspect
// of a member reads the hold's fence there.
func TestMultiLock_fenceCountersLiveAsLongAsTheHold(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
	key := keyFor(t)
	members := []string{key + ":a", key + ":b"}
	for _, k := range members {
		warm := c.NewLock(k)
		must(t, "Acquire()", warm.Acquire(ctx)) // makes the counter
		must(t, "Release()", warm.Release(ctx))
		tg.rdb.PExpire(ctx, lockKey(k)+":fence", 500*time.Millisecond)
	}
	m := c.NewMultiLock(members)
	must(t, "Acquire()", m.Acquire(ctx))
	wantKept := func(how string) {
		t.Helper()
		for _, k := range members {
			hold, cnt := tg.rdb.PTTL(ctx, lockKey(k)).Val(), tg.rdb.PTTL(ctx, lockKey(k)+":fence").Val()
			if cnt < hold-time.Second {
				t.Fatalf("%s: %s: fence counter PTTL %v, member's %v: the counter expires first", how, k, cnt, hold)
			}
		}
	}
	wantKept("acquired")
	must(t, "Extend()", m.Extend(ctx, 3*time.Minute))
	wantKept("extended")
	must(t, "Release()", m.Release(ctx))
}
