package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/redlock"
)

// TestFanout_panickingNodeCallFailsThatNodeOnly: a go-redis hook that
// panics in one node's calls (on a call goroutine of the Client, where no
// caller could recover it) fails that node's call with an error matching
// lock.ErrPanicked, logged once at Error level with its stack; the call
// goroutines go on serving: the other nodes still make the quorum, and
// later calls reach every node.
func TestFanout_panickingNodeCallFailsThatNodeOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, nodes := realNodes(t, 3)
	h := &kindtest.PanicWhen{Match: kindtest.AnyScript}
	nodes[0].(*redis.Client).AddHook(h)
	logs := &kindtest.SyncBuffer{}
	c := newClient(t, nodes, redlock.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	h.Armed.Store(true)
	l := c.NewLock(keyFor(t))
	ok, err := l.TryAcquire(ctx)
	if !ok || err != nil {
		t.Fatalf("TryAcquire() with node 0's calls panicking = %v, %v; want true, nil (2 of 3 nodes)", ok, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "redlock node call panicked") {
		if time.Now().After(deadline) {
			t.Fatalf("node 0's panic not logged within 5s; log:\n%s", logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	if s := logs.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "hook panicked") || !strings.Contains(s, "goroutine") {
		t.Fatalf("log of node 0's panic = %q, want an Error record with the panic and its stack", s)
	}
	// A node's error is what a failed quorum reports.
	other := c.NewLock(keyFor(t) + ":other")
	setOther(t, nodes[1], other.Key())
	if ok, err := other.TryAcquire(ctx); ok || !errors.Is(err, lock.ErrPanicked) {
		t.Fatalf("TryAcquire() with node 0 panicking and node 1 taken = %v, %v; want false and an error matching ErrPanicked", ok, err)
	}
	h.Armed.Store(false)
	must(t, "Release()", l.Release(ctx))
	again := c.NewLock(keyFor(t) + ":again")
	if ok, err := again.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("TryAcquire() after the panics = %v, %v; want true, nil", ok, err)
	}
	waitHolders(t, nodes, again.Key(), again.Token(), 3) // every call goroutine still serves
	must(t, "Release()", again.Release(ctx))
}

// TestRenewal_panickingHookLosesHoldInsteadOfCrashing: a go-redis hook
// that panics in the renewal calls of a majority of nodes (on the Client's
// call goroutines) does not take the process down: those nodes' calls
// fail, renewal misses its quorum and is retried, and the hold is lost at
// its safety deadline with an error matching lock.ErrPanicked.
func TestRenewal_panickingHookLosesHoldInsteadOfCrashing(t *testing.T) {
	t.Parallel()
	_, nodes := realNodes(t, 3)
	hooks := []*kindtest.PanicWhen{{Match: kindtest.AnyScript}, {Match: kindtest.AnyScript}}
	for i, h := range hooks {
		nodes[i].(*redis.Client).AddHook(h)
	}
	c := newClient(t, nodes, redlock.WithTTL(600*time.Millisecond))
	l := c.NewLock(keyFor(t))
	must(t, "Acquire()", l.Acquire(context.Background()))
	for _, h := range hooks {
		h.Armed.Store(true)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() not closed within 5s of renewals panicking on 2 of 3 nodes")
	}
	for _, h := range hooks {
		h.Armed.Store(false)
	}
	if err := l.LostErr(); !errors.Is(err, lock.ErrLockLost) || !errors.Is(err, lock.ErrPanicked) {
		t.Fatalf("LostErr() = %v, want a loss matching ErrLockLost and ErrPanicked", err)
	}
}
