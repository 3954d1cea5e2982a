package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// tryAcquire fails the test unless l.TryAcquire returns want, nil.
func tryAcquire(t *testing.T, what string, l *lock.Lock, want bool) {
	t.Helper()
	ok, err := l.TryAcquire(context.Background())
	if err != nil || ok != want {
		t.Fatalf("%s: TryAcquire() = %v, %v; want %v, nil", what, ok, err, want)
	}
}

// TestRWLock_share: readers share the lock, a writer needs it empty, and
// no reader gets in beside a writer.
func TestRWLock_share(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		rw := c.NewRWLock(keyFor(t))
		r1, r2 := rw.ReadLock(), rw.ReadLock()
		tryAcquire(t, "first reader", r1, true)
		tryAcquire(t, "second reader", r2, true)
		w := rw.WriteLock()
		tryAcquire(t, "writer beside readers", w, false)
		must(t, "Release() first reader", r1.Release(ctx))
		tryAcquire(t, "writer beside one reader", w, false)
		must(t, "Release() second reader", r2.Release(ctx))
		tryAcquire(t, "writer on a free lock", w, true)
		tryAcquire(t, "second writer", rw.WriteLock(), false)
		tryAcquire(t, "reader beside a writer", rw.ReadLock(), false)
		must(t, "Release() writer", w.Release(ctx))
		tryAcquire(t, "reader after the writer", r1, true)
		must(t, "Release() reader", r1.Release(ctx))
		if n, err := tg.rdb.Exists(ctx, lockKey(keyFor(t))).Result(); n != 0 || err != nil {
			t.Fatalf("EXISTS after the last release = %d, %v; want 0", n, err)
		}
	})
}

// TestRWLock_waitingWriter: a writer that found readers marks itself
// waiting, which keeps new readers out (a reader already in stays); the
// writer gets the lock when the last reader leaves.
func TestRWLock_waitingWriter(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		rw := c.NewRWLock(keyFor(t))
		r := rw.ReadLock()
		tryAcquire(t, "reader", r, true)
		w := rw.WriteLock()
		done := make(chan error, 1)
		go func() { done <- w.Acquire(ctx) }()
		mark := lockKey(keyFor(t)) + ":writer"
		for {
			n, err := tg.rdb.Exists(ctx, mark).Result()
			must(t, "EXISTS mark", err)
			if n == 1 {
				break
			}
			time.Sleep(time.Millisecond) // polls a state, not a timing
		}
		tryAcquire(t, "new reader while a writer waits", rw.ReadLock(), false)
		if d, err := r.TTL(ctx); err != nil || d <= 0 {
			t.Fatalf("TTL() of the reader already in = %v, %v; want > 0, nil", d, err)
		}
		must(t, "Release() reader", r.Release(ctx))
		must(t, "writer Acquire()", <-done)
		if n, _ := tg.rdb.Exists(ctx, mark).Result(); n != 0 {
			t.Fatalf("the waiting mark outlived the writer's acquisition")
		}
		must(t, "Release() writer", w.Release(ctx))
		tryAcquire(t, "reader after the writer", rw.ReadLock(), true)
	})
}

// TestRWLock_fence: each write hold takes a new fence; a read hold
// carries the current one, which the next writer's exceeds.
func TestRWLock_fence(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		rw := c.NewRWLock(keyFor(t))
		r0 := rw.ReadLock()
		tryAcquire(t, "reader on a new key", r0, true)
		if r0.Fence() <= 0 {
			t.Fatalf("reader Fence() = %d on a new key, want > 0", r0.Fence())
		}
		must(t, "Release()", r0.Release(ctx))
		last := r0.Fence()
		for i := range 3 {
			w := rw.WriteLock()
			tryAcquire(t, "writer", w, true)
			if w.Fence() <= last {
				t.Fatalf("round %d: writer Fence() = %d after %d, want greater", i, w.Fence(), last)
			}
			must(t, "Release() writer", w.Release(ctx))
			a, b := rw.ReadLock(), rw.ReadLock()
			tryAcquire(t, "reader a", a, true)
			tryAcquire(t, "reader b", b, true)
			if a.Fence() != w.Fence() || b.Fence() != w.Fence() {
				t.Fatalf("round %d: readers' Fence() = %d, %d after writer's %d, want equal", i, a.Fence(), b.Fence(), w.Fence())
			}
			must(t, "Release() a", a.Release(ctx))
			must(t, "Release() b", b.Release(ctx))
			last = w.Fence()
		}
		// A mutex on another key shares no counter; the mutex on this key
		// cannot hold it while the read-write lock does, but after it takes
		// a fence from the same counter.
		m := c.NewLock(keyFor(t))
		must(t, "mutex Acquire()", m.Acquire(ctx))
		if m.Fence() <= last {
			t.Fatalf("mutex Fence() = %d after writer's %d, want greater", m.Fence(), last)
		}
		must(t, "mutex Release()", m.Release(ctx))
	})
}

// TestRWLock_verbs: Extend, TTL, Lost and the ErrNotHeld answers of a
// released hold, for both sides.
func TestRWLock_verbs(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newWarmClient(t, tg.rdb, lock.WithTTL(5*time.Second))
		rw := c.NewRWLock(keyFor(t))
		for _, l := range []*lock.Lock{rw.ReadLock(), rw.WriteLock()} {
			if l.Key() != keyFor(t) || l.Token() != "" || l.Fence() != 0 || l.Lost() != nil {
				t.Fatalf("fresh handle: Key %q Token %q Fence %d", l.Key(), l.Token(), l.Fence())
			}
			wantErr(t, "Release() before Acquire", l.Release(ctx), lock.ErrNotHeld)
			must(t, "Acquire()", l.Acquire(ctx))
			if len(l.Token()) != 36 {
				t.Fatalf("Token() = %q, want a UUID", l.Token())
			}
			must(t, "Extend()", l.Extend(ctx, 20*time.Second))
			d, err := l.TTL(ctx)
			must(t, "TTL()", err)
			if d <= 5*time.Second || d > 20*time.Second {
				t.Fatalf("TTL() after Extend(20s) = %v", d)
			}
			wantErr(t, "Extend(1ms)", l.Extend(ctx, time.Millisecond), lock.ErrInvalid)
			must(t, "Release()", l.Release(ctx))
			wantErr(t, "second Release()", l.Release(ctx), lock.ErrNotHeld)
			wantErr(t, "Extend() after Release", l.Extend(ctx, time.Second), lock.ErrNotHeld)
			_, err = l.TTL(ctx)
			wantErr(t, "TTL() after Release", err, lock.ErrNotHeld)
			if isClosed(l.Lost()) {
				t.Fatalf("Lost() closed by a Release")
			}
		}
	})
}

// TestRWLock_lost: a reader's hold removed from the hash, or the whole
// key deleted, is reported lost by renewal; the other reader's hold is
// untouched.
func TestRWLock_lost(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		ttl := 600 * time.Millisecond
		c := newClient(t, tg.rdb, lock.WithTTL(ttl))
		rw := c.NewRWLock(keyFor(t))
		a, b := rw.ReadLock(), rw.ReadLock()
		must(t, "Acquire() a", a.Acquire(ctx))
		must(t, "Acquire() b", b.Acquire(ctx))
		must(t, "HDEL", tg.rdb.HDel(ctx, lockKey(keyFor(t)), a.Token()).Err())
		waitClosed(t, a.Lost(), 5*time.Second, "a.Lost()")
		if !errors.Is(a.LostErr(), lock.ErrLockLost) {
			t.Fatalf("LostErr() = %v", a.LostErr())
		}
		if isClosed(b.Lost()) {
			t.Fatalf("b.Lost() closed with a's loss")
		}
		must(t, "b.Extend()", b.Extend(ctx, ttl))
		must(t, "b.Release()", b.Release(ctx))

		w := rw.WriteLock()
		must(t, "writer Acquire()", w.Acquire(ctx))
		tg.expire(t, keyFor(t))
		waitClosed(t, w.Lost(), 5*time.Second, "w.Lost()")
		wantErr(t, "Release() of a lost writer", w.Release(ctx), lock.ErrNotHeld)
	})
}

// TestRWLock_invalid: configurations a read-write lock cannot serve, and
// zero values, give ErrInvalid from every verb, never a panic.
func TestRWLock_invalid(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	var zero lock.RWLock
	var nilRW *lock.RWLock
	for name, rw := range map[string]*lock.RWLock{
		"ReleaseWatch":   c.NewRWLock("k", lock.WithReleaseMode(lock.ReleaseWatch)),
		"WithOwner":      c.NewRWLock("k", lock.WithOwner("me")),
		"WithReplicaAck": c.NewRWLock("k", lock.WithReplicaAck(1, time.Second)),
		"empty key":      c.NewRWLock(""),
		"bad TTL":        c.NewRWLock("k", lock.WithTTL(-1)),
		"zero Client":    new(lock.Client).NewRWLock("k"),
		"zero RWLock":    &zero,
		"nil RWLock":     nilRW,
	} {
		for _, l := range []*lock.Lock{rw.ReadLock(), rw.WriteLock()} {
			wantErr(t, name+": Acquire()", l.Acquire(ctx), lock.ErrInvalid)
			_, err := l.TryAcquire(ctx)
			wantErr(t, name+": TryAcquire()", err, lock.ErrInvalid)
			wantErr(t, name+": Release()", l.Release(ctx), lock.ErrInvalid)
			wantErr(t, name+": Extend()", l.Extend(ctx, time.Second), lock.ErrInvalid)
			_, err = l.TTL(ctx)
			wantErr(t, name+": TTL()", err, lock.ErrInvalid)
		}
		wantErr(t, name+": WithReadLock()", rw.WithReadLock(ctx, func(context.Context) error { return nil }), lock.ErrInvalid)
		wantErr(t, name+": WithWriteLock()", rw.WithWriteLock(ctx, func(context.Context) error { return nil }), lock.ErrInvalid)
	}
	rw := c.NewRWLock("k")
	wantErr(t, "WithReadLock(nil)", rw.WithReadLock(ctx, nil), lock.ErrInvalid)
}

// TestRWLock_otherKind: a read-write lock on a key another kind holds
// fails at once with ErrInvalid naming both kinds, and leaves the holder
// alone.
func TestRWLock_otherKind(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		for _, tc := range []struct {
			name, kind string
			hold       func(key string)
		}{
			{"mutex", "mutex", func(key string) { must(t, "mutex Acquire()", c.NewLock(key).Acquire(ctx)) }},
			{"re-entrant mutex", "mutex", func(key string) {
				must(t, "mutex Acquire()", c.NewLock(key, lock.WithOwner("me")).Acquire(ctx))
			}},
			{"semaphore", "semaphore", func(key string) {
				must(t, "ZADD", tg.rdb.ZAdd(ctx, lockKey(key), redis.Z{Score: 1, Member: "x"}).Err())
			}},
		} {
			key := keyFor(t) + ":" + tc.name
			tc.hold(key)
			before, _ := tg.rdb.Dump(ctx, lockKey(key)).Result()
			rw := c.NewRWLock(key)
			for _, l := range []*lock.Lock{rw.ReadLock(), rw.WriteLock()} {
				_, err := l.TryAcquire(ctx)
				wantErr(t, tc.name+": TryAcquire()", err, lock.ErrInvalid)
				want := `is a ` + tc.kind + `, not a read-write lock`
				if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "WRONGTYPE") {
					t.Fatalf("%s: error %q, want it to say %q", tc.name, err, want)
				}
				wantErr(t, tc.name+": Acquire()", l.Acquire(ctx), lock.ErrInvalid)
			}
			if after, _ := tg.rdb.Dump(ctx, lockKey(key)).Result(); after != before {
				t.Fatalf("%s: the holder's key changed", tc.name)
			}
		}
	})
}

// TestRWLock_observer: a read-write lock's holds report the same events
// as a mutex's, with the caller's context.
func TestRWLock_observer(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	for _, side := range []string{"read", "write"} {
		rec := &kindtest.Recorder{}
		c := newClient(t, tg.rdb, lock.WithObserver(rec))
		rw := c.NewRWLock(keyFor(t) + ":" + side)
		l := rw.ReadLock()
		if side == "write" {
			l = rw.WriteLock()
		}
		kindtest.EveryCall(t, kindtest.CallerCtx(), l)
		kindtest.CallerCtxOnly(t, rec, 6)
		must(t, "Release()", l.Release(context.Background()))
	}
}

// TestRWLock_withLockLost: a hold lost while fn runs cancels fn's context
// with the loss, and WithReadLock/WithWriteLock return an error matching
// ErrLockLost.
func TestRWLock_withLockLost(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb, lock.WithTTL(600*time.Millisecond))
		rw := c.NewRWLock(keyFor(t))
		for name, with := range map[string]func(context.Context, func(context.Context) error) error{
			"WithReadLock": rw.WithReadLock, "WithWriteLock": rw.WithWriteLock,
		} {
			err := with(ctx, func(ctx context.Context) error {
				tg.expire(t, keyFor(t))
				<-ctx.Done()
				if !errors.Is(context.Cause(ctx), lock.ErrLockLost) {
					return fmt.Errorf("cause %v", context.Cause(ctx))
				}
				return nil
			})
			wantErr(t, name+"()", err, lock.ErrLockLost)
		}
	})
}

// TestRWLock_wakeups: waiters with a backoff far longer than the test are
// woken by the releases' publish alone: the last reader's release wakes a
// waiting writer, and a writer's release wakes every waiting reader of a
// process (not only the longest-waiting one).
func TestRWLock_wakeups(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		key := keyFor(t)
		holders := newClient(t, tg.newRDB(t))
		waiters := newClient(t, tg.newRDB(t), lock.WithBackoff(time.Hour, time.Hour))
		idle := func(n int) {
			t.Helper()
			for lock.IdleWaiters(waiters, key) != n {
				if ctx.Err() != nil {
					t.Fatalf("IdleWaiters() = %d, want %d", lock.IdleWaiters(waiters, key), n)
				}
				time.Sleep(time.Millisecond) // polls a state, not a timing
			}
		}

		r := holders.NewRWLock(key).ReadLock()
		must(t, "reader Acquire()", r.Acquire(ctx))
		w := waiters.NewRWLock(key).WriteLock()
		wdone := make(chan error, 1)
		go func() { wdone <- w.Acquire(ctx) }()
		idle(1)
		must(t, "reader Release()", r.Release(ctx))
		must(t, "writer Acquire() woken by the last reader's release", <-wdone)
		must(t, "Release() writer", w.Release(ctx))

		hw := holders.NewRWLock(key).WriteLock()
		must(t, "writer Acquire()", hw.Acquire(ctx))
		rdone := make(chan error, 3)
		rs := make([]*lock.Lock, 3)
		for i := range rs {
			rs[i] = waiters.NewRWLock(key).ReadLock()
			go func() { rdone <- rs[i].Acquire(ctx) }()
		}
		idle(len(rs))
		must(t, "writer Release()", hw.Release(ctx))
		for range rs {
			must(t, "reader Acquire() woken by the writer's release", <-rdone)
		}
		for _, r := range rs {
			must(t, "Release()", r.Release(ctx))
		}
	})
}

// TestRWLock_model: random TryAcquire and Release calls on readers and
// writers of one key agree, call by call, with the model: a reader gets
// the lock when no writer holds it, a writer when nobody does, a Release
// succeeds exactly when its handle holds the lock.
func TestRWLock_model(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		rw := c.NewRWLock(keyFor(t))
		const handles = 6
		ls := make([]*lock.Lock, handles)
		write := make([]bool, handles)
		held := make([]bool, handles)
		for i := range ls {
			write[i] = i%3 == 0
			ls[i] = rw.ReadLock()
			if write[i] {
				ls[i] = rw.WriteLock()
			}
		}
		seed := time.Now().UnixNano()
		rnd := rand.New(rand.NewPCG(uint64(seed), 0))
		for step := range 400 {
			i := rnd.IntN(handles)
			readers, writer := 0, false
			for j := range held {
				if held[j] && write[j] {
					writer = true
				} else if held[j] {
					readers++
				}
			}
			if held[i] {
				if err := ls[i].Release(ctx); err != nil {
					t.Fatalf("seed %d step %d: Release() of a held handle = %v", seed, step, err)
				}
				held[i] = false
				continue
			}
			want := !writer && (!write[i] || readers == 0)
			got, err := ls[i].TryAcquire(ctx)
			if err != nil || got != want {
				t.Fatalf("seed %d step %d: TryAcquire() by a %s = %v, %v with %d readers and writer %v; want %v",
					seed, step, map[bool]string{true: "writer", false: "reader"}[write[i]], got, err, readers, writer, want)
			}
			held[i] = got
			if !got {
				wantErr(t, fmt.Sprintf("seed %d step %d: Release() after a failed TryAcquire", seed, step), ls[i].Release(ctx), lock.ErrNotHeld)
			}
		}
	})
}

// TestRWLock_ownerNamedMode: a re-entrant mutex whose owner id is "mode"
// (the read-write lock's own field name) does not take a reader's hash for
// one of its holds: it fails with ErrInvalid naming the read-write lock,
// and the hash is left as it was.
func TestRWLock_ownerNamedMode(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newWarmClient(t, tg.rdb)
		key := keyFor(t)
		r := c.NewRWLock(key).ReadLock()
		must(t, "ReadLock Acquire()", r.Acquire(ctx))
		defer r.Release(ctx)
		before, _ := tg.rdb.Dump(ctx, lockKey(key)).Result()
		_, err := c.NewLock(key, lock.WithOwner("mode")).TryAcquire(ctx)
		wantErr(t, "TryAcquire() by owner \"mode\"", err, lock.ErrInvalid)
		if !strings.Contains(err.Error(), "read-write lock") {
			t.Fatalf("error %q, want it to name the read-write lock", err)
		}
		if after, _ := tg.rdb.Dump(ctx, lockKey(key)).Result(); after != before {
			t.Fatalf("the reader's hash changed")
		}
	})
}
