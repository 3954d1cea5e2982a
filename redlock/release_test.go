package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

// A Release whose ctx is already done still deletes the hold on every node
// (its calls do not end with ctx) and reports that.
func TestLock_Release_ctxDoneReportsDeletes(t *testing.T) {
	_, nodes := realNodes(t, 3)
	c := newClient(t, nodes, loadTolerant)
	key := keyFor(t)
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(context.Background()))
	waitHolders(t, nodes, key, l.Token(), 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	must(t, "Release(ctx done)", l.Release(ctx))
	if n := keysLeft(t, nodes, key); n != 0 {
		t.Fatalf("nodes with the key after Release = %d, want 0", n)
	}
}

// An Extend whose ctx is already done reports what the nodes did.
func TestLock_Extend_ctxDoneReportsOutcome(t *testing.T) {
	_, nodes := realNodes(t, 3)
	c := newClient(t, nodes, redlock.WithTTL(10*time.Second), loadTolerant)
	key := keyFor(t)
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(context.Background()))
	defer l.Release(context.Background())
	waitHolders(t, nodes, key, l.Token(), 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := l.Extend(ctx, 300*time.Millisecond)
	pttl := nodes[0].PTTL(context.Background(), lockKey(key)).Val()
	if v := l.Validity(); err != nil || v <= 0 || v > 300*time.Millisecond {
		t.Fatalf("Extend(ctx done, 300ms) = %v with Validity() = %v and node 0 at PTTL %v; want nil and a validity in (0, 300ms]", err, v, pttl)
	}
}

// An Extend to a shorter TTL that fails still lowers the validity at once
// (the nodes that answered, and maybe others, have the short TTL), and Lost
// closes when it runs out.
func TestLock_Extend_failedShorterLowersValidity(t *testing.T) {
	ss, nodes := hookableNodes(t, 3)
	c := newClient(t, nodes, redlock.WithTTL(10*time.Second), loadTolerant)
	key := keyFor(t)
	l := c.NewLock(key)
	ctx := context.Background()
	must(t, "Acquire()", l.Acquire(ctx))
	waitHolders(t, nodes, key, l.Token(), 3)
	hookScript(t, nodes[1], luascripts.Extend, true, every) // node 1 answers late
	must(t, "Pause()", ss[2].Pause())                       // node 2 not at all
	t.Cleanup(func() { ss[2].Resume() })

	err := l.Extend(ctx, 300*time.Millisecond)
	v := l.Validity()
	pttl := nodes[0].PTTL(ctx, lockKey(key)).Val()
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Extend(300ms, one node slow, one stopped) = %v, want a *QuorumError", err)
	}
	if v > 300*time.Millisecond {
		t.Fatalf("Validity() after a failed Extend(300ms) = %v while node 0 is at PTTL %v; want at most 300ms", v, pttl)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatalf("Lost() still open 5s after a failed Extend(300ms); Validity() = %v", l.Validity())
	}
	wantIs(t, "LostErr()", l.LostErr(), lock.ErrLockLost)
}

// An Extend's round ends by the validity the new TTL gives: replies that
// come later do not confirm a hold whose validity has run out.
func TestLock_Extend_roundBoundedByNewTTL(t *testing.T) {
	_, nodes := hookableNodes(t, 3)
	// A node timeout far above the new TTL: only the new TTL bounds the round.
	c := newClient(t, nodes, redlock.WithTTL(20*time.Second), redlock.WithNodeTimeout(time.Second))
	key := keyFor(t)
	l := c.NewLock(key)
	ctx := context.Background()
	must(t, "Acquire()", l.Acquire(ctx))
	defer l.Release(ctx)
	waitHolders(t, nodes, key, l.Token(), 3)
	var hooks []*scriptHook
	for _, rdb := range nodes {
		hooks = append(hooks, hookScript(t, rdb, luascripts.Extend, true, every))
	}
	const ttl = redlock.MinTTL
	done := make(chan error, 1)
	go func() { done <- l.Extend(ctx, ttl) }()
	hooks[0].await(t, hooks[0].arrived, "extend at node 0")
	arrived := time.Now() // after Extend began: its validity ends before arrived+ttl
	time.Sleep(time.Until(arrived.Add(ttl)))
	for _, h := range hooks {
		h.open()
	}
	err := <-done
	if v := l.Validity(); err == nil {
		t.Fatalf("Extend(%v) with replies after %v = nil with Validity() = %v; want an error", ttl, ttl, v)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Extend(%v) = %v, want a *QuorumError", ttl, err)
	}
}
