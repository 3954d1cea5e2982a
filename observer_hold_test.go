package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/obstest"
)

// eventsOf returns an Observer that sends every event of kind k to the
// returned channel (buffered; events past its room are dropped).
func eventsOf(k lock.EventKind) (lock.Observer, <-chan lock.Event) {
	ch := make(chan lock.Event, 16)
	return lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == k {
			select {
			case ch <- e:
			default:
			}
		}
	}), ch
}

// nextEvent returns the next event from ch, failing after d.
func nextEvent(t *testing.T, ch <-chan lock.Event, d time.Duration) lock.Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
		return lock.Event{}
	}
}

// TestObserver_renewed: a renewal the loop confirms is reported with the
// TTL it set and the validity the hold had left, which is more than the
// safety margin and less than the TTL.
func TestObserver_renewed(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		const ttl = time.Second
		obs, renewed := eventsOf(lock.EventRenewed)
		c := newClient(t, tg.rdb, lock.WithObserver(obs))
		l := c.NewLock(keyFor(t), lock.WithTTL(ttl))
		must(t, "Acquire()", l.Acquire(context.Background()))
		e := nextEvent(t, renewed, 10*ttl)
		if e.Key != keyFor(t) || e.Token != l.Token() || e.Fence != l.Fence() || e.Ctx != nil || e.Err != nil {
			t.Fatalf("renewed event %+v, want the hold's key, token and fence, no ctx, no error", e)
		}
		if e.TTL != ttl {
			t.Fatalf("renewed event TTL = %v, want %v", e.TTL, ttl)
		}
		// Renewed before the safety deadline, i.e. with more than the
		// margin (a tenth of the TTL) left; never with all of it.
		if e.Validity <= ttl/10 || e.Validity >= ttl {
			t.Fatalf("renewed event Validity = %v, want in (%v, %v)", e.Validity, ttl/10, ttl)
		}
		must(t, "Release()", l.Release(context.Background()))
	})
}

// TestObserver_heldOnReleaseAndLoss: Release and a loss report how long
// the hold lasted: for Release at least the time from Acquire's return to
// Release's call, and for both at most the time since Acquire was called.
func TestObserver_heldOnReleaseAndLoss(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rec := &kindtest.Recorder{}
		c := newClient(t, tg.rdb, lock.WithObserver(rec))
		l := c.NewLock(keyFor(t))

		before := time.Now()
		must(t, "Acquire()", l.Acquire(ctx))
		held := time.Now()
		must(t, "Release()", l.Release(ctx))
		min, max := time.Since(held), time.Since(before)

		before = time.Now()
		must(t, "Acquire()", l.Acquire(ctx))
		tg.expire(t, keyFor(t))
		wantErr(t, "Extend()", l.Extend(ctx, time.Minute), lock.ErrNotHeld)
		lostMax := time.Since(before)

		var rel, lost []lock.Event
		for _, e := range rec.Events() {
			switch e.Kind {
			case lock.EventRelease:
				rel = append(rel, e)
			case lock.EventLost:
				lost = append(lost, e)
			}
		}
		if len(rel) != 1 || len(lost) != 1 {
			t.Fatalf("events %v, want one release and one loss", rec.Kinds())
		}
		if h := rel[0].Held; h <= 0 || h > max || h < min-rel[0].Duration {
			t.Fatalf("release Held = %v, want in [%v, %v]", h, min-rel[0].Duration, max)
		}
		if h := lost[0].Held; h <= 0 || h > lostMax {
			t.Fatalf("loss Held = %v, want in (0, %v]", h, lostMax)
		}
	})
}

// TestObserver_withLock: WithLock is reported once, after its release,
// with its whole duration, the hold's fence, and what it returned; also
// when fn panics, and when the lock was never acquired.
func TestObserver_withLock(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	rec := &kindtest.Recorder{}
	c := newClient(t, tg.rdb, lock.WithObserver(rec))
	key := keyFor(t)
	errFn := errors.New("fn failed")

	var fence int64
	start := time.Now()
	err := c.WithLock(ctx, key, func(context.Context) error {
		l := c.NewLock(key)
		if ok, _ := l.TryAcquire(ctx); ok {
			return errors.New("held twice")
		}
		return errFn
	})
	elapsed := time.Since(start)
	wantErr(t, "WithLock()", err, errFn)
	events := rec.Events()
	last := events[len(events)-1]
	if last.Kind != lock.EventWithLock || events[len(events)-2].Kind != lock.EventRelease {
		t.Fatalf("events %v, want the release, then with_lock last", rec.Kinds())
	}
	fence = events[len(events)-2].Fence
	if last.Key != key || last.Fence != fence || fence == 0 || !errors.Is(last.Err, errFn) || last.Ctx != ctx {
		t.Fatalf("with_lock event %+v, want key %q, fence %d, fn's error, the caller's ctx", last, key, fence)
	}
	if last.Duration <= 0 || last.Duration > elapsed || last.Held <= 0 || last.Held > last.Duration {
		t.Fatalf("with_lock Duration = %v, Held = %v, want 0 < Held <= Duration <= %v", last.Duration, last.Held, elapsed)
	}

	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the fn's panic", r)
			}
		}()
		_ = c.WithLock(ctx, key, func(context.Context) error { panic("boom") })
	}()
	last = rec.Events()[len(rec.Events())-1]
	if last.Kind != lock.EventWithLock || last.Err == nil || last.Fence <= fence {
		t.Fatalf("event after a panic %+v, want with_lock with an error and a new fence", last)
	}

	other := c.NewLock(key)
	must(t, "Acquire()", other.Acquire(ctx))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = c.WithLock(cctx, key, func(context.Context) error { return nil })
	last = rec.Events()[len(rec.Events())-1]
	if last.Kind != lock.EventWithLock || !errors.Is(last.Err, lock.ErrNotAcquired) || last.Fence != 0 || last.Held != 0 || !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("event of a WithLock never acquired %+v (returned %v), want with_lock, ErrNotAcquired, no fence", last, err)
	}
}

// TestObserver_releaseAllocs: an Observer costs no allocation on the
// release path, on a real redis-server (miniredis would count its own).
func TestObserver_releaseAllocs(t *testing.T) {
	tg := realTarget(t)
	var sum atomic.Int64
	obs := lock.ObserverFunc(func(e lock.Event) { sum.Add(int64(e.Held) + e.Fence) })
	without := obstest.ReleaseAllocs(t, newClient(t, tg.rdb, lock.WithNotify(false)), keyFor(t)+":without")
	with := obstest.ReleaseAllocs(t, newClient(t, tg.rdb, lock.WithNotify(false), lock.WithObserver(obs)), keyFor(t)+":with")
	// Half an allocation of slack for the background's own; one more per
	// Release is caught.
	if with >= without+0.5 {
		t.Fatalf("allocations per Release with an Observer = %.2f, without = %.2f; want no more", with, without)
	}
	if sum.Load() == 0 {
		t.Fatal("the Observer saw no release")
	}
}
