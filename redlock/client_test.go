package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/redlock"
)

// Zero values and nil pointers of the exported types report ErrInvalid
// (Close returns nil, accessors zero values); none panics.
func TestZeroValues_invalidNotPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	var nilClient *redlock.Client
	var nilLock *redlock.Lock
	tryAcquire := func(l *redlock.Lock) error { _, err := l.TryAcquire(ctx); return err }
	tests := []struct {
		name string
		call func() error // ErrInvalid wanted
	}{
		{"Client.NewLock.Acquire", func() error { return new(redlock.Client).NewLock("k").Acquire(ctx) }},
		{"Client.WithLock", func() error { return new(redlock.Client).WithLock(ctx, "k", noop) }},
		{"nil Client.NewLock.Acquire", func() error { return nilClient.NewLock("k").Acquire(ctx) }},
		{"nil Client.WithLock", func() error { return nilClient.WithLock(ctx, "k", noop) }},
		{"Lock.Acquire", func() error { return new(redlock.Lock).Acquire(ctx) }},
		{"Lock.TryAcquire", func() error { return tryAcquire(new(redlock.Lock)) }},
		{"Lock.Release", func() error { return new(redlock.Lock).Release(ctx) }},
		{"Lock.Extend", func() error { return new(redlock.Lock).Extend(ctx, time.Second) }},
		{"nil Lock.Acquire", func() error { return nilLock.Acquire(ctx) }},
		{"nil Lock.TryAcquire", func() error { return tryAcquire(nilLock) }},
		{"nil Lock.Release", func() error { return nilLock.Release(ctx) }},
		{"nil Lock.Extend", func() error { return nilLock.Extend(ctx, time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantIs(t, tt.name+"()", tt.call(), lock.ErrInvalid)
		})
	}
	for _, c := range []*redlock.Client{new(redlock.Client), nilClient} {
		must(t, "Close()", c.Close())
		must(t, "second Close()", c.Close())
	}
	for _, l := range []*redlock.Lock{new(redlock.Lock), nilLock} {
		if l.Key() != "" || l.Token() != "" || l.Fence() != 0 || l.Validity() != 0 || l.Lost() != nil || l.LostErr() != nil {
			t.Fatalf("accessors of a zero Lock = %q %q %d %v %v %v, want zero values",
				l.Key(), l.Token(), l.Fence(), l.Validity(), l.Lost(), l.LostErr())
		}
	}
	var qe redlock.QuorumError
	if qe.Error() == "" || !errors.Is(&qe, lock.ErrNotAcquired) {
		t.Fatalf("zero QuorumError: Error() = %q, want text matching ErrNotAcquired", qe.Error())
	}
}

// TestClient_Close_lostAtValidity: after Close a hold is no longer renewed:
// its Lost() closes when the validity runs out, with ErrClosed, and Release
// still succeeds.
func TestClient_Close_lostAtValidity(t *testing.T) {
	t.Parallel()
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

// Close sends at once a delete that a Release left to an acquire call
// still out (as if Close had begun when the acquire call returned): Close
// does not wait for that call. The delete leaves a tombstone, since the
// acquire may land after it, and it does: node 2 must not be held.
func TestClient_Close_sendsDeleteLeftToStragglingAcquire(t *testing.T) {
	t.Parallel()
	nodes, key, late, dels, undos, c := releasedWithStraggler(t)
	must(t, "Close()", c.Close())
	if n, u := dels.calls.Load(), undos.calls.Load(); n != 0 || u != 1 {
		t.Fatalf("deletes sent to node 2 by the time Close returned = %d plain, %d with a tombstone; want 0 and 1", n, u)
	}
	late.open() // node 2's acquire lands now, after its delete
	late.await(t, late.passed, "node 2's acquire")
	if n := keysLeft(t, nodes[2:], key); n != 0 {
		t.Fatalf("node 2 is held after its acquire landed behind the delete, want it refused by the tombstone")
	}
}
