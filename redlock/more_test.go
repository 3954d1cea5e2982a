package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/redlock"
)

func TestLock_WithFencing_off(t *testing.T) {
	ms, nodes := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithFencing(false))
	ctx := context.Background()
	key := keyFor(t)
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	if l.Fence() != 0 {
		t.Fatalf("Fence() = %d with fencing off, want 0", l.Fence())
	}
	must(t, "Release()", l.Release(ctx))
	for i, m := range ms {
		if m.Exists(lockKey(key) + ":fence") {
			t.Fatalf("node %d has a fence counter with fencing off", i)
		}
	}
}

func TestLock_Acquire_ctxDone(t *testing.T) {
	_, nodes := miniNodes(t, 5)
	c := newClient(t, nodes)
	key := keyFor(t)
	a := c.NewLock(key)
	must(t, "Acquire()", a.Acquire(context.Background()))
	defer a.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	b := c.NewLock(key)
	err := b.Acquire(ctx)
	wantIs(t, "Acquire(held, ctx times out)", err, lock.ErrNotAcquired)
	wantIs(t, "Acquire(held, ctx times out)", err, context.DeadlineExceeded)
	// Acquire returns at quorum, so a straggling node may have granted b
	// first (b then undid it): a keeps at least its quorum.
	if n := holders(t, nodes, key, a.Token()); n < 3 {
		t.Fatalf("nodes still holding the first token = %d, want at least the quorum 3", n)
	}
}

func TestClient_Close_lostAtValidity(t *testing.T) {
	_, nodes := miniNodes(t, 3)
	c := redlock.New(nodes, redlock.WithTTL(300*time.Millisecond))
	l := c.NewLock(keyFor(t))
	must(t, "Acquire()", l.Acquire(context.Background()))
	must(t, "Close()", c.Close())
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatalf("Lost() not closed after Close and the validity ran out")
	}
	wantIs(t, "LostErr()", l.LostErr(), lock.ErrClosed)
	must(t, "Release()", l.Release(context.Background()))
}

func TestClient_WithObserver(t *testing.T) {
	_, nodes := miniNodes(t, 3)
	var mu sync.Mutex
	kinds := map[lock.EventKind]int{}
	obs := lock.ObserverFunc(func(e lock.Event) {
		mu.Lock()
		kinds[e.Kind]++
		mu.Unlock()
	})
	c := newClient(t, nodes, redlock.WithObserver(obs))
	ctx := context.Background()
	errFn := errors.New("fn")
	err := c.WithLock(ctx, keyFor(t), func(ctx context.Context) error { return errFn })
	if !errors.Is(err, errFn) {
		t.Fatalf("WithLock() error = %v, want %v", err, errFn)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []lock.EventKind{lock.EventAcquireStart, lock.EventAcquire, lock.EventRelease} {
		if kinds[k] != 1 {
			t.Fatalf("events of kind %v = %d, want 1 (all: %v)", k, kinds[k], kinds)
		}
	}
}
