package lock_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentlock/lock"
)

// ctxMark is the context key a markingObserver sets.
type ctxMark struct{}

// markingObserver is a ContextObserver that marks the context of every
// WithLock call, and records which events carried the mark.
type markingObserver struct {
	mu     sync.Mutex
	starts int
	marked map[lock.EventKind]int
}

func (o *markingObserver) ObserveContext(ctx context.Context, e lock.Event) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.Kind == lock.EventWithLockStart && e.Ctx == ctx {
		o.starts++
	}
	return context.WithValue(ctx, ctxMark{}, e.Key)
}

func (o *markingObserver) Observe(e lock.Event) {
	if e.Ctx == nil || e.Ctx.Value(ctxMark{}) != e.Key {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.marked == nil {
		o.marked = map[lock.EventKind]int{}
	}
	o.marked[e.Kind]++
}

// TestContextObserver_everyWithX: Client.WithLock and each kind's WithX tell
// a ContextObserver, also one among others in Observers, that they began,
// and run the acquire, fn and the release with the context it returned,
// which their closing EventWithLock carries too.
func TestContextObserver_everyWithX(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	mark := &markingObserver{}
	plain := lock.ObserverFunc(func(lock.Event) {})
	c := newClient(t, tg.rdb, lock.WithObserver(lock.Observers(plain, mark)))
	key := keyFor(t)
	ctx := context.Background()
	fn := func(k string) func(context.Context) error {
		return func(ctx context.Context) error {
			if got := ctx.Value(ctxMark{}); got != k {
				t.Errorf("fn's context mark = %v, want %q", got, k)
			}
			return nil
		}
	}
	calls := []struct {
		name string
		run  func() error
	}{
		{"WithLock", func() error { return c.WithLock(ctx, key+":m", fn(key+":m")) }},
		{"fair WithLock", func() error { return c.WithLock(ctx, key+":f", fn(key+":f"), lock.WithFair(true)) }},
		{"WithReadLock", func() error { return c.NewRWLock(key+":rw").WithReadLock(ctx, fn(key+":rw")) }},
		{"WithWriteLock", func() error { return c.NewRWLock(key+":rw").WithWriteLock(ctx, fn(key+":rw")) }},
		{"WithPermit", func() error { return c.NewSemaphore(key+":s", 2).WithPermit(ctx, fn(key+":s")) }},
	}
	for _, call := range calls {
		must(t, call.name+"()", call.run())
	}
	mark.mu.Lock()
	defer mark.mu.Unlock()
	n := len(calls)
	if mark.starts != n || mark.marked[lock.EventAcquire] != n || mark.marked[lock.EventRelease] != n || mark.marked[lock.EventWithLock] != n {
		t.Fatalf("starts %d, marked events %v; want %d starts and %d acquire, release and with_lock events with the mark", mark.starts, mark.marked, n, n)
	}
}

// TestContextObserver_multiLock: WithMultiLock tells a ContextObserver too
// (its events name each key's lock as the MultiLock's first key).
func TestContextObserver_multiLock(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	var mu sync.Mutex
	var starts, marked int
	obs := &funcContextObserver{
		enter: func(ctx context.Context, e lock.Event) context.Context {
			mu.Lock()
			starts++
			mu.Unlock()
			return context.WithValue(ctx, ctxMark{}, "multi")
		},
		observe: func(e lock.Event) {
			if e.Kind == lock.EventWithLock && e.Ctx != nil && e.Ctx.Value(ctxMark{}) == "multi" {
				mu.Lock()
				marked++
				mu.Unlock()
			}
		},
	}
	c := newClient(t, tg.rdb, lock.WithObserver(obs))
	key := keyFor(t)
	err := c.WithMultiLock(context.Background(), []string{key + ":a", key + ":b"}, func(ctx context.Context) error {
		if ctx.Value(ctxMark{}) != "multi" {
			t.Error("fn's context lacks the observer's mark")
		}
		return nil
	})
	must(t, "WithMultiLock()", err)
	mu.Lock()
	defer mu.Unlock()
	if starts != 1 || marked != 1 {
		t.Fatalf("starts %d, marked with_lock events %d; want 1 and 1", starts, marked)
	}
}

type funcContextObserver struct {
	enter   func(context.Context, lock.Event) context.Context
	observe func(lock.Event)
}

func (o *funcContextObserver) ObserveContext(ctx context.Context, e lock.Event) context.Context {
	return o.enter(ctx, e)
}
func (o *funcContextObserver) Observe(e lock.Event) { o.observe(e) }
