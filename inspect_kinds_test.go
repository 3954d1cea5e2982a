package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// eachRealTarget runs fn against one real redis-server and against a
// 3-master cluster.
func eachRealTarget(t *testing.T, fn func(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient)) {
	t.Run("redis", func(t *testing.T) {
		s := redistest.Start(t, redistest.Config{})
		fn(t, func(t *testing.T) redis.UniversalClient { return s.Client(t) })
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3, 0)
		fn(t, func(t *testing.T) redis.UniversalClient { return cl.Client(t) })
	})
}

// inspectHolders inspects key and fails unless it is held as kind by
// exactly the holds with tokens, each with a TTL in (0, ttl].
func inspectHolders(t *testing.T, c *lock.Client, key, kind string, ttl time.Duration, tokens ...string) lock.Info {
	t.Helper()
	info, err := c.Inspect(context.Background(), key)
	must(t, "Inspect()", err)
	if info.Key != key || info.Kind != kind || len(info.Holders) != len(tokens) {
		t.Fatalf("Inspect(%q) = %+v, want a %s with %d holders", key, info, kind, len(tokens))
	}
	want := map[string]bool{}
	for _, tok := range tokens {
		want[tok] = true
	}
	for _, h := range info.Holders {
		if !want[h.Token] || h.TTL <= 0 || h.TTL > ttl {
			t.Fatalf("Inspect(%q) holder %+v, want one of %v with a TTL in (0, %v]", key, h, tokens, ttl)
		}
		delete(want, h.Token)
	}
	return info
}

// TestClient_ForceRelease_rwlock: Inspect shows each reader with its own
// TTL; ForceReleaseToken drops one reader (its Lost closes at once,
// force-released) and leaves the other held; ForceRelease drops the rest;
// a free key gives ErrNotHeld.
func TestClient_ForceRelease_rwlock(t *testing.T) {
	t.Parallel()
	eachRealTarget(t, func(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
		ctx := context.Background()
		holder := newClient(t, newRDB(t), lock.WithTTL(time.Minute))
		op := newClient(t, newRDB(t))
		key := keyFor(t)
		rw := holder.NewRWLock(key)
		r1, r2 := rw.ReadLock(), rw.ReadLock()
		forceOneOfTwo(t, holder, op, key, "rwlock", r1, r2)
		wantErr(t, "ForceReleaseToken(r1) again", lock.ForceReleaseToken(op, ctx, key, r1.Token()), lock.ErrNotHeld)

		must(t, "ForceRelease()", op.ForceRelease(ctx, key))
		waitClosed(t, r2.Lost(), 10*time.Second, "r2.Lost()")
		wantForced(t, r2)
		inspectHolders(t, op, key, "", 0)
		wantErr(t, "ForceRelease() of a free key", op.ForceRelease(ctx, key), lock.ErrNotHeld)

		// A writer: one holder; forced, the key is free for a reader.
		w := rw.WriteLock()
		must(t, "w.Acquire()", w.Acquire(ctx))
		inspectHolders(t, op, key, "rwlock", time.Minute, w.Token())
		must(t, "ForceReleaseToken(w)", lock.ForceReleaseToken(op, ctx, key, w.Token()))
		waitClosed(t, w.Lost(), 10*time.Second, "w.Lost()")
		wantForced(t, w)
		inspectHolders(t, op, key, "", 0)
		r3 := op.NewRWLock(key).ReadLock()
		mustTry(t, "r3.TryAcquire()", r3, true)
		must(t, "r3.Release()", r3.Release(ctx))
	})
}

// TestClient_ForceRelease_semaphore: Inspect shows each permit with its
// own TTL; ForceReleaseToken drops one permit (its Lost closes at once,
// force-released) and leaves the other held, freeing a place;
// ForceRelease drops the rest; a free key gives ErrNotHeld.
func TestClient_ForceRelease_semaphore(t *testing.T) {
	t.Parallel()
	eachRealTarget(t, func(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
		ctx := context.Background()
		holder := newClient(t, newRDB(t), lock.WithTTL(time.Minute))
		op := newClient(t, newRDB(t))
		key := keyFor(t)
		s := holder.NewSemaphore(key, 2)
		p1, p2 := s.Permit(), s.Permit()
		forceOneOfTwo(t, holder, op, key, "semaphore", p1, p2)
		// The freed place is taken at once; the semaphore is full again.
		p3 := op.NewSemaphore(key, 2).Permit()
		mustTry(t, "p3.TryAcquire()", p3, true)
		mustTry(t, "a fourth TryAcquire()", op.NewSemaphore(key, 2).Permit(), false)
		// p3 is op's first hold: its Client's inbox subscription is made now.
		waitUntil(t, "op's inbox subscription", func() bool { return lock.InboxReady(op) })

		must(t, "ForceRelease()", op.ForceRelease(ctx, key))
		waitClosed(t, p2.Lost(), 10*time.Second, "p2.Lost()")
		waitClosed(t, p3.Lost(), 10*time.Second, "p3.Lost()")
		wantForced(t, p2)
		wantForced(t, p3)
		inspectHolders(t, op, key, "", 0)
		wantErr(t, "ForceRelease() of a free key", op.ForceRelease(ctx, key), lock.ErrNotHeld)
	})
}

// TestClient_Inspect_perHolderTTL: a reader's and a permit's TTL left is
// its own, not the key's (which lives as long as its longest hold).
func TestClient_Inspect_perHolderTTL(t *testing.T) {
	t.Parallel()
	eachRealTarget(t, func(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
		ctx := context.Background()
		long := newClient(t, newRDB(t), lock.WithTTL(time.Hour))
		short := newClient(t, newRDB(t), lock.WithTTL(time.Minute))
		op := newClient(t, newRDB(t))
		for _, kind := range []string{"rwlock", "semaphore"} {
			key := keyFor(t) + ":" + kind
			a, b := long.NewRWLock(key).ReadLock(), short.NewRWLock(key).ReadLock()
			if kind == "semaphore" {
				a, b = long.NewSemaphore(key, 2).Permit(), short.NewSemaphore(key, 2).Permit()
			}
			must(t, "long Acquire()", a.Acquire(ctx))
			must(t, "short Acquire()", b.Acquire(ctx))
			info := inspectHolders(t, op, key, kind, time.Hour, a.Token(), b.Token())
			for _, h := range info.Holders {
				if h.Token == b.Token() && h.TTL > time.Minute {
					t.Fatalf("%s: the one-minute hold shows a TTL of %v", kind, h.TTL)
				}
				if h.Token == a.Token() && h.TTL <= time.Minute {
					t.Fatalf("%s: the one-hour hold shows a TTL of %v", kind, h.TTL)
				}
			}
			must(t, "long Release()", a.Release(ctx))
			must(t, "short Release()", b.Release(ctx))
		}
	})
}

// TestClient_ForceRelease_fair: Inspect counts a fair lock's queued waiter;
// ForceRelease frees the key and keeps the queue, so its head takes the
// key next.
func TestClient_ForceRelease_fair(t *testing.T) {
	t.Parallel()
	eachRealTarget(t, func(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
		ctx := context.Background()
		holder := newClient(t, newRDB(t), lock.WithTTL(time.Minute), lock.WithFair(true))
		other := newClient(t, newRDB(t), lock.WithTTL(time.Minute), lock.WithFair(true))
		op := newClient(t, newRDB(t))
		key := keyFor(t)
		l := holder.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		w := other.NewLock(key)
		got := make(chan error, 1)
		go func() { got <- w.Acquire(ctx) }()
		waitUntil(t, "the queued waiter", func() bool {
			info, err := op.Inspect(ctx, key)
			return err == nil && info.Waiters == 1
		})
		inspectHolders(t, op, key, "mutex", time.Minute, l.Token())
		waitUntil(t, "the inbox subscription", func() bool { return lock.InboxReady(holder) })

		must(t, "ForceRelease()", op.ForceRelease(ctx, key))
		waitClosed(t, l.Lost(), 10*time.Second, "Lost()")
		wantForced(t, l)
		must(t, "the queue's head Acquire()", <-got)
		info := inspectHolders(t, op, key, "mutex", time.Minute, w.Token())
		if info.Waiters != 0 {
			t.Fatalf("Inspect().Waiters = %d after the head took the key, want 0", info.Waiters)
		}
		must(t, "Release()", w.Release(ctx))
		wantErr(t, "ForceRelease() of a free key", op.ForceRelease(ctx, key), lock.ErrNotHeld)
	})
}

// TestClient_List_kinds: List reports each kind's lock once and none of
// the companions beside them (fence counter, fair queue and its times, a
// waiting writer's mark).
func TestClient_List_kinds(t *testing.T) {
	t.Parallel()
	eachRealTarget(t, func(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
		ctx := context.Background()
		rdb := newRDB(t)
		c := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithFencing(true))
		base := keyFor(t)
		want := map[string]string{base + ":rw": "rwlock", base + ":sem": "semaphore", base + ":fair": "mutex"}

		r := c.NewRWLock(base + ":rw").ReadLock()
		must(t, "reader Acquire()", r.Acquire(ctx))
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wdone := make(chan error, 1)
		go func() { wdone <- c.NewRWLock(base + ":rw").WriteLock().Acquire(wctx) }()
		waitUntil(t, "the writer's mark", func() bool {
			return rdb.Exists(ctx, lockKey(base+":rw")+":writer").Val() == 1
		})
		p := c.NewSemaphore(base+":sem", 2).Permit()
		must(t, "permit Acquire()", p.Acquire(ctx))
		f := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithFair(true), lock.WithFencing(true))
		fl := f.NewLock(base + ":fair")
		must(t, "fair Acquire()", fl.Acquire(ctx))
		fctx, fcancel := context.WithCancel(ctx)
		defer fcancel()
		fdone := make(chan error, 1)
		go func() { fdone <- f.NewLock(base + ":fair").Acquire(fctx) }()
		waitUntil(t, "the fair queue", func() bool {
			return rdb.Exists(ctx, lockKey(base+":fair")+":qtimes").Val() == 1
		})

		got := map[string]string{}
		for info, err := range c.List(ctx, base+":*") {
			must(t, "List()", err)
			if _, dup := got[info.Key]; dup {
				t.Fatalf("List() reported %q twice", info.Key)
			}
			got[info.Key] = info.Kind
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("List() = %v, want %v", got, want)
		}
		cancel()
		fcancel()
		<-wdone
		<-fdone
	})
}

// mustTry fails unless l.TryAcquire succeeds with ok.
func mustTry(t *testing.T, call string, l *lock.Lock, ok bool) {
	t.Helper()
	got, err := l.TryAcquire(context.Background())
	must(t, call, err)
	if got != ok {
		t.Fatalf("%s = %v, want %v", call, got, ok)
	}
}

// forceOneOfTwo acquires a and b of holder's lock of kind on key, checks
// Inspect shows both, and force-releases a through op: a's Lost closes at
// once, force-released, and b keeps holding.
func forceOneOfTwo(t *testing.T, holder, op *lock.Client, key, kind string, a, b *lock.Lock) {
	t.Helper()
	ctx := context.Background()
	must(t, "a.Acquire()", a.Acquire(ctx))
	must(t, "b.Acquire()", b.Acquire(ctx))
	inspectHolders(t, op, key, kind, time.Minute, a.Token(), b.Token())
	waitUntil(t, "the inbox subscription", func() bool { return lock.InboxReady(holder) })

	must(t, "ForceReleaseToken(a)", lock.ForceReleaseToken(op, ctx, key, a.Token()))
	waitClosed(t, a.Lost(), 10*time.Second, "a.Lost()")
	wantForced(t, a)
	if isClosed(b.Lost()) {
		t.Fatal("b.Lost() closed by a force-release of a")
	}
	inspectHolders(t, op, key, kind, time.Minute, b.Token())
}
