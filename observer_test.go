package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

func TestObserver(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rec := &kindtest.Recorder{}
		c := newClient(t, tg.rdb, lock.WithObserver(rec))
		key := keyFor(t)
		l := c.NewLock(key, lock.WithTTL(600*time.Millisecond))
		must(t, "Acquire()", l.Acquire(ctx))
		if ok, err := c.NewLock(key).TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() = %v, %v", ok, err)
		}
		must(t, "Extend()", l.Extend(ctx, time.Second))
		tg.expire(t, key)
		waitClosed(t, l.Lost(), 5*time.Second, "Lost()")

		want := []lock.EventKind{
			lock.EventAcquireStart, lock.EventAcquire, // Acquire
			lock.EventAcquireStart, lock.EventAcquire, // TryAcquire, held by l
			lock.EventExtend, lock.EventLost,
		}
		got := rec.Kinds()
		if len(got) != len(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("events %v, want %v", got, want)
			}
		}
		events := rec.Events()
		acq := events[1]
		if acq.Key != key || acq.Token != l.Token() || acq.Fence != l.Fence() || acq.Attempts != 1 || acq.Err != nil {
			t.Fatalf("acquire event %+v, want key %q, the hold's token and fence, 1 attempt, no error", acq, key)
		}
		if !errors.Is(events[3].Err, lock.ErrNotAcquired) {
			t.Fatalf("TryAcquire event error = %v, want ErrNotAcquired", events[3].Err)
		}
		if !errors.Is(events[5].Err, lock.ErrLockLost) {
			t.Fatalf("lost event error = %v, want ErrLockLost", events[5].Err)
		}
		if lock.EventRenewalFailed.String() != "renewal_failed" {
			t.Fatalf("EventRenewalFailed.String() = %q", lock.EventRenewalFailed.String())
		}
	})
}

// TestObserver_eventsCarryCallerCtx: the events of a call (acquire start
// and end, release, extend) carry the caller's context, so a tracing
// Observer can join its trace; background events (a loss found by renewal)
// carry none.
func TestObserver_eventsCarryCallerCtx(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	rec := &kindtest.Recorder{}
	c := newClient(t, tg.rdb, lock.WithObserver(rec))
	key := keyFor(t)
	ctx := kindtest.CallerCtx()
	l := c.NewLock(key, lock.WithTTL(600*time.Millisecond))
	kindtest.EveryCall(t, ctx, l)
	tg.expire(t, key)
	waitClosed(t, l.Lost(), 5*time.Second, "Lost()")
	// Those of every call, then the loss.
	kindtest.CallerCtxOnly(t, rec, 7)
}

// TestObserver_failedExtendAndRelease: a stolen hold found by Extend
// reports the extend's error and one loss; a stale Release reports its
// error.
func TestObserver_failedExtendAndRelease(t *testing.T) {
	tg := miniTarget(t)
	ctx := context.Background()
	var mu sync.Mutex
	var got []lock.Event
	obs := lock.ObserverFunc(func(e lock.Event) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	})
	c := newClient(t, tg.rdb, lock.WithObserver(obs))
	key := keyFor(t)
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	tg.rdb.Set(ctx, lockKey(key), "intruder", time.Minute)
	wantErr(t, "Extend()", l.Extend(ctx, time.Minute), lock.ErrNotHeld)
	wantErr(t, "Release()", l.Release(ctx), lock.ErrNotHeld)
	mu.Lock()
	defer mu.Unlock()
	count := map[lock.EventKind]int{}
	for _, e := range got {
		count[e.Kind]++
		if e.Key != key {
			t.Fatalf("event %v for key %q", e.Kind, e.Key)
		}
		switch e.Kind {
		case lock.EventExtend, lock.EventRelease:
			if !errors.Is(e.Err, lock.ErrNotHeld) || e.Token != l.Token() {
				t.Fatalf("%v event Err %v Token %q", e.Kind, e.Err, e.Token)
			}
		case lock.EventLost:
			var le *lock.LostError
			if !errors.As(e.Err, &le) || le.Reason != lock.LossStolen {
				t.Fatalf("lost event Err %v, want stolen", e.Err)
			}
		}
	}
	if count[lock.EventLost] != 1 || count[lock.EventExtend] != 1 || count[lock.EventRelease] != 1 {
		t.Fatalf("events %v, want one extend, one release, one lost", count)
	}
}
