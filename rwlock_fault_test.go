package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// TestRWLock_crashedReader: a reader whose Client stops renewing (closed,
// as a crashed process) is reported lost before its lease runs out, and
// keeps a writer out only until its own hold expires, although another
// reader kept renewing the lock's key meanwhile.
func TestRWLock_crashedReader(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	ttl := 800 * time.Millisecond
	crashed := newClient(t, tg.newRDB(t), lock.WithTTL(ttl))
	live := newClient(t, tg.newRDB(t), lock.WithTTL(ttl))
	writers := newClient(t, tg.newRDB(t), lock.WithTTL(ttl), lock.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	key := keyFor(t)
	a := crashed.NewRWLock(key).ReadLock()
	must(t, "Acquire() a", a.Acquire(ctx))
	b := live.NewRWLock(key).ReadLock()
	must(t, "Acquire() b", b.Acquire(ctx))
	crashed.Close()
	waitClosed(t, a.Lost(), 5*time.Second, "crashed reader's Lost()")
	// b renews the key past a's expiry; a's field alone must not count.
	time.Sleep(ttl)
	if n, err := tg.rdb.PTTL(ctx, lockKey(key)).Result(); err != nil || n <= 0 {
		t.Fatalf("PTTL of the lock while b renews = %v, %v", n, err)
	}
	must(t, "Release() b", b.Release(ctx))
	w := writers.NewRWLock(key).WriteLock()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	must(t, "writer Acquire()", w.Acquire(wctx))
	if ok, _ := tg.rdb.HExists(ctx, lockKey(key), a.Token()).Result(); ok {
		t.Fatalf("the crashed reader's field is still there beside the writer")
	}
	must(t, "Release() writer", w.Release(ctx))
}

// TestRWLock_crashedWriter: a writer holding the lock whose Client stops
// renewing is reported lost, and a reader gets in once its hold expired.
func TestRWLock_crashedWriter(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	ttl := 500 * time.Millisecond
	crashed := newClient(t, tg.newRDB(t), lock.WithTTL(ttl))
	readers := newClient(t, tg.newRDB(t), lock.WithTTL(ttl), lock.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	key := keyFor(t)
	w := crashed.NewRWLock(key).WriteLock()
	must(t, "Acquire() writer", w.Acquire(ctx))
	crashed.Close()
	r := readers.NewRWLock(key).ReadLock()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	must(t, "reader Acquire()", r.Acquire(rctx))
	if !isClosed(w.Lost()) {
		t.Fatalf("a reader got in while the crashed writer's Lost() is open")
	}
	if r.Fence() < w.Fence() {
		t.Fatalf("reader Fence() = %d below the crashed writer's %d", r.Fence(), w.Fence())
	}
	must(t, "Release() reader", r.Release(ctx))
}

// TestRWLock_writerGivesUp: a writer whose wait ended leaves its waiting
// mark behind for at most its own expiry (twice the backoff cap, at least
// 200ms): then readers get in again.
func TestRWLock_writerGivesUp(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb, lock.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	key := keyFor(t)
	rw := c.NewRWLock(key)
	r := rw.ReadLock()
	must(t, "Acquire() reader", r.Acquire(ctx))
	w := c.NewRWLock(key, lock.WithWaitTimeout(150*time.Millisecond)).WriteLock()
	wantErr(t, "writer Acquire()", w.Acquire(ctx), lock.ErrNotAcquired)
	mark := lockKey(key) + ":" + luascripts.RWWaiting
	if d, err := tg.rdb.PTTL(ctx, mark).Result(); err == nil && d > 200*time.Millisecond {
		t.Fatalf("waiting mark PTTL = %v, want at most 200ms", d)
	}
	r2 := rw.ReadLock()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	must(t, "Acquire() of a new reader", r2.Acquire(rctx))
	must(t, "Release()", r.Release(ctx))
	must(t, "Release()", r2.Release(ctx))
}

// TestRWLock_readerReplyLost: a reader's acquire whose reply is lost is
// confirmed by the retry that carries the same token: one hold in Redis,
// which one Release frees.
func TestRWLock_readerReplyLost(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb := tg.newRDB(t)
		rdb.AddHook(&dropReplies{drop: 1})
		c := newClient(t, rdb, lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
		key := keyFor(t)
		r := c.NewRWLock(key).ReadLock()
		must(t, "Acquire()", r.Acquire(ctx))
		if n, err := tg.rdb.HLen(ctx, lockKey(key)).Result(); err != nil || n != 2 {
			t.Fatalf("HLEN after a retried acquire = %d, %v; want 2 (mode and one reader)", n, err)
		}
		must(t, "Release()", r.Release(ctx))
		tg.wantFree(t, key, "after the release")
	})
}

// TestRWLock_releaseResent: a reader's release whose reply is lost has an
// unknown outcome; the same release sent again (as a resend would) finds
// the hold gone and drops nothing of the other reader's, and the handle's
// next Release says ErrNotHeld without reporting a loss.
func TestRWLock_releaseResent(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	hook := &cutReplies{}
	rdb := tg.newRDB(t)
	rdb.AddHook(hook)
	c := newWarmClient(t, rdb)
	key := keyFor(t)
	rw := c.NewRWLock(key)
	a, b := rw.ReadLock(), rw.ReadLock()
	must(t, "Acquire() a", a.Acquire(ctx))
	must(t, "Acquire() b", b.Acquire(ctx))
	// Loaded, so the cut reply is the release's, not a NOSCRIPT.
	must(t, "SCRIPT LOAD", luascripts.RWRelease.Load(ctx, tg.rdb).Err())
	hook.arm(a.Token(), 0)
	err := a.Release(ctx)
	if err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release() with its reply cut = %v, want a connection error", err)
	}
	if hook.cut() != 1 {
		t.Fatalf("cut %d connections, want 1", hook.cut())
	}
	keys := []string{lockKey(key), lockKey(key) + ":notify", lockKey(key) + ":" + luascripts.RWWaiting}
	n, err := luascripts.RWRelease.Run(ctx, tg.rdb, keys, a.Token()).Int64()
	if err != nil || n != 0 {
		t.Fatalf("resent release = %d, %v; want 0 (gone)", n, err)
	}
	wantErr(t, "second Release()", a.Release(ctx), lock.ErrNotHeld)
	if isClosed(a.Lost()) || isClosed(b.Lost()) {
		t.Fatalf("a loss reported after our own release")
	}
	if d, err := b.TTL(ctx); err != nil || d <= 0 {
		t.Fatalf("other reader's TTL() = %v, %v", d, err)
	}
	must(t, "Release() b", b.Release(ctx))
	tg.wantFree(t, key, "after both releases")
}

// TestRWLock_twoWriters: writers racing for a free lock: exactly one gets
// it, and the other's attempt changes nothing of the holder's.
func TestRWLock_twoWriters(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c1, c2 := newClient(t, tg.newRDB(t)), newClient(t, tg.newRDB(t))
		key := keyFor(t)
		for range 20 {
			w1, w2 := c1.NewRWLock(key).WriteLock(), c2.NewRWLock(key).WriteLock()
			got := make(chan bool, 2)
			for _, w := range []*lock.Lock{w1, w2} {
				go func() {
					ok, err := w.TryAcquire(ctx)
					if err != nil {
						ok = false
					}
					got <- ok
				}()
			}
			if n := btoi(<-got) + btoi(<-got); n != 1 {
				t.Fatalf("%d of two racing writers got the lock, want 1", n)
			}
			for _, w := range []*lock.Lock{w1, w2} {
				if err := w.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
					t.Fatalf("Release() = %v", err)
				}
			}
			if n, _ := tg.rdb.Exists(ctx, lockKey(key)).Result(); n != 0 {
				t.Fatalf("lock still there after both releases")
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
