package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/redlock"
)

func TestNew_invalid(t *testing.T) {
	t.Parallel()
	ms, nodes := miniNodes(t, 5)
	var typedNil *redis.Client
	// A Ring shards keys and channels over several servers: not one node
	// (its Subscribe without a channel panics).
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": ms[0].Addr()}})
	t.Cleanup(func() { ring.Close() })
	tests := []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []redlock.Option
	}{
		{"nil list", nil, nil},
		{"empty list", []redis.UniversalClient{}, nil},
		{"nil client", []redis.UniversalClient{nodes[0], nil, nodes[2]}, nil},
		{"typed nil client", []redis.UniversalClient{nodes[0], typedNil, nodes[2]}, nil},
		{"same client twice", []redis.UniversalClient{nodes[0], nodes[1], nodes[0]}, nil},
		{"ring", []redis.UniversalClient{ring, nodes[1], nodes[2]}, nil},
		{"quorum below majority", nodes, []redlock.Option{redlock.WithQuorum(2)}},
		{"quorum above N", nodes, []redlock.Option{redlock.WithQuorum(6)}},
		{"negative drift", nodes, []redlock.Option{redlock.WithDriftFactor(-0.1)}},
		{"drift too large", nodes, []redlock.Option{redlock.WithDriftFactor(0.5)}},
		{"zero node timeout", nodes, []redlock.Option{redlock.WithNodeTimeout(0)}},
		{"zero ttl", nodes, []redlock.Option{redlock.WithTTL(0)}},
		{"ttl under MinTTL", nodes, []redlock.Option{redlock.WithTTL(redlock.MinTTL - time.Millisecond)}},
		{"negative wait", nodes, []redlock.Option{redlock.WithWaitTimeout(-time.Second)}},
		{"backoff min > max", nodes, []redlock.Option{redlock.WithBackoff(time.Second, time.Millisecond)}},
		{"prefix with brace", nodes, []redlock.Option{redlock.WithPrefix("a{")}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := redlock.New(tt.nodes, tt.opts...)
			defer c.Close()
			l := c.NewLock("k")
			wantIs(t, "Acquire()", l.Acquire(ctx), lock.ErrInvalid)
			_, err := l.TryAcquire(ctx)
			wantIs(t, "TryAcquire()", err, lock.ErrInvalid)
			wantIs(t, "Release()", l.Release(ctx), lock.ErrInvalid)
			wantIs(t, "Extend()", l.Extend(ctx, time.Second), lock.ErrInvalid)
			wantIs(t, "WithLock()", c.WithLock(ctx, "k", func(context.Context) error { return nil }), lock.ErrInvalid)
		})
	}
}

func TestNewLock_invalidPerLock(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 3)
	c := newClient(t, nodes)
	ctx := context.Background()
	wantIs(t, "Acquire(empty key)", c.NewLock("").Acquire(ctx), lock.ErrInvalid)
	wantIs(t, "Acquire(quorum 1 of 3)", c.NewLock("k", redlock.WithQuorum(1)).Acquire(ctx), lock.ErrInvalid)
	wantIs(t, "WithLock(nil fn)", c.WithLock(ctx, "k", nil), lock.ErrInvalid)
	l := c.NewLock(keyFor(t))
	must(t, "Acquire()", l.Acquire(ctx))
	defer l.Release(ctx)
	wantIs(t, "Extend(0)", l.Extend(ctx, 0), lock.ErrInvalid)
	wantIs(t, "Acquire(held handle)", l.Acquire(ctx), lock.ErrInvalid)
}

// TestTTL_belowMinTTLIsInvalid: on real servers, WithTTL and Extend refuse
// a lease shorter than MinTTL with ErrInvalid and write nothing; MinTTL
// itself is held.
func TestTTL_belowMinTTLIsInvalid(t *testing.T) {
	_, nodes := realNodes(t, 3)
	ctx := context.Background()
	for _, ttl := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, redlock.MinTTL - time.Millisecond} {
		l := newClient(t, nodes, redlock.WithTTL(ttl)).NewLock(keyFor(t))
		wantIs(t, fmt.Sprintf("Acquire(ttl %v)", ttl), l.Acquire(ctx), lock.ErrInvalid)
		l = newClient(t, nodes).NewLock(keyFor(t), redlock.WithTTL(ttl))
		wantIs(t, fmt.Sprintf("Acquire(ttl %v per lock)", ttl), l.Acquire(ctx), lock.ErrInvalid)
	}
	if n := keysLeft(t, nodes, keyFor(t)); n != 0 {
		t.Fatalf("locks with a TTL under MinTTL wrote the key on %d nodes", n)
	}
	l := newClient(t, nodes).NewLock(keyFor(t), redlock.WithTTL(redlock.MinTTL))
	must(t, "Acquire(MinTTL)", l.Acquire(ctx))
	wantIs(t, "Extend(MinTTL-1ms)", l.Extend(ctx, redlock.MinTTL-time.Millisecond), lock.ErrInvalid)
	must(t, "Extend(MinTTL)", l.Extend(ctx, redlock.MinTTL))
	must(t, "Release()", l.Release(ctx))
}

func TestLock_quorumOfAll(t *testing.T) {
	t.Parallel()
	ms, nodes := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithQuorum(3), redlock.WithWaitTimeout(200*time.Millisecond))
	ms[2].Close()
	err := c.NewLock(keyFor(t)).Acquire(context.Background())
	wantIs(t, "Acquire(quorum 3, one node down)", err, lock.ErrNotAcquired)
}

// TestLock_WithFencing_off: with fencing off a hold has Fence() 0 and no
// node gets a fence counter.
func TestLock_WithFencing_off(t *testing.T) {
	t.Parallel()
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

// TestClient_WithObserver: the Observer sees one acquire start, one acquire
// and one release for a WithLock whose fn fails, and WithLock returns fn's
// error.
func TestClient_WithObserver(t *testing.T) {
	t.Parallel()
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
