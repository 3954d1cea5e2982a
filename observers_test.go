package lock_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// TestObservers: each observer given to Observers receives every event, in
// the order given; nil entries are ignored.
func TestObservers(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var order []string
	tag := func(name string) lock.Observer {
		return lock.ObserverFunc(func(e lock.Event) {
			if e.Kind == lock.EventAcquire {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
			}
		})
	}
	a, b := &kindtest.Recorder{}, &kindtest.Recorder{}
	obs := lock.Observers(tag("first"), a, nil, b, tag("last"))
	c := newClient(t, miniTarget(t).rdb, lock.WithObserver(obs))
	l := c.NewLock(keyFor(t))
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "Release()", l.Release(ctx))

	want := []lock.EventKind{lock.EventAcquireStart, lock.EventAcquire, lock.EventRelease}
	if got := a.Kinds(); !slices.Equal(got, want) {
		t.Fatalf("first recorder got %v, want %v", got, want)
	}
	if got := b.Kinds(); !slices.Equal(got, want) {
		t.Fatalf("second recorder got %v, want %v", got, want)
	}
	if !slices.Equal(order, []string{"first", "last"}) {
		t.Fatalf("acquire seen in order %v, want [first last]", order)
	}
}

// TestObservers_nilAndOne: no non-nil observer is no observer; one is
// returned as is.
func TestObservers_nilAndOne(t *testing.T) {
	if o := lock.Observers(); o != nil {
		t.Fatalf("Observers() = %v, want nil", o)
	}
	if o := lock.Observers(nil, nil); o != nil {
		t.Fatalf("Observers(nil, nil) = %v, want nil", o)
	}
	rec := &kindtest.Recorder{}
	if o := lock.Observers(nil, rec); o != lock.Observer(rec) {
		t.Fatalf("Observers(nil, rec) = %v, want rec", o)
	}
}

// TestObserver_lockReplacesClients: a lock's WithObserver replaces the
// Client's for that lock; WithObserver(nil) silences it.
func TestObserver_lockReplacesClients(t *testing.T) {
	ctx := context.Background()
	client, own := &kindtest.Recorder{}, &kindtest.Recorder{}
	c := newClient(t, miniTarget(t).rdb, lock.WithObserver(client))
	l := c.NewLock(keyFor(t), lock.WithObserver(own))
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "Release()", l.Release(ctx))
	q := c.NewLock(keyFor(t)+"-quiet", lock.WithObserver(nil))
	must(t, "Acquire() quiet", q.Acquire(ctx))
	must(t, "Release() quiet", q.Release(ctx))
	if n := len(client.Kinds()); n != 0 {
		t.Fatalf("Client observer got %d events, want 0: %v", n, client.Kinds())
	}
	if n := len(own.Kinds()); n != 3 {
		t.Fatalf("lock observer got %v, want 3 events", own.Kinds())
	}
}

// TestObserver_ownedHoldNamedByOwner: an owned hold is named by its owner
// id everywhere: Token(), and the Token of its acquire and release events.
func TestObserver_ownedHoldNamedByOwner(t *testing.T) {
	ctx := context.Background()
	rec := &kindtest.Recorder{}
	c := newClient(t, miniTarget(t).rdb, lock.WithObserver(rec), lock.WithOwner("agent-7"))
	outer, inner := c.NewLock(keyFor(t)), c.NewLock(keyFor(t))
	must(t, "outer Acquire()", outer.Acquire(ctx))
	must(t, "inner Acquire()", inner.Acquire(ctx))
	if outer.Token() != "agent-7" || inner.Token() != "agent-7" {
		t.Fatalf("Token() = %q, %q, want the owner id", outer.Token(), inner.Token())
	}
	must(t, "inner Release()", inner.Release(ctx))
	must(t, "outer Release()", outer.Release(ctx))
	n := 0
	for _, e := range rec.Events() {
		if e.Kind != lock.EventAcquire && e.Kind != lock.EventRelease {
			continue
		}
		n++
		if e.Token != "agent-7" {
			t.Fatalf("%v event Token = %q, want the owner id", e.Kind, e.Token)
		}
	}
	if n != 4 {
		t.Fatalf("%d acquire and release events, want 4: %v", n, rec.Kinds())
	}
}
