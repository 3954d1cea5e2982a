package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

// An undo of a failed attempt that reaches a node late must not delete what
// a later attempt of the same Acquire won there: each attempt has its own
// token.
func TestLock_Acquire_lateUndoSparesLaterAttempt(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	ctx := context.Background()
	key := keyFor(t)
	// Another holder has nodes 0 and 1: attempt 1 wins node 2 only and is
	// undone there; that undo is held on the wire.
	setOther(t, nodes[0], key)
	setOther(t, nodes[1], key)
	undo := hookScript(t, nodes[2], luascripts.Release, false, first(1))
	// Each attempt's call to node 0 waits for the test: it paces the attempts.
	pace := hookScript(t, nodes[0], luascripts.Acquire, false, every)
	c := newClient(t, nodes, redlock.WithTTL(10*time.Second), redlock.WithBackoff(time.Millisecond, 2*time.Millisecond), loadTolerant)
	l := c.NewLock(key)
	done := make(chan error, 1)
	go func() { done <- l.Acquire(ctx) }()

	pace.await(t, pace.arrived, "attempt 1 at node 0")
	pace.allow <- struct{}{}
	undo.await(t, undo.arrived, "attempt 1's undo at node 2")
	delKey(t, nodes[0], key) // node 0 is free; node 1 keeps the other holder
	pace.await(t, pace.arrived, "attempt 2 at node 0")
	pace.allow <- struct{}{}
	// Attempt 2 either won (node 0 and node 2) or failed and attempt 3 is
	// at node 0: only then does attempt 1's undo reach node 2.
	var err error
	returned := false
	select {
	case err = <-done:
		returned = true
	case <-pace.arrived:
	case <-time.After(10 * time.Second):
		t.Fatalf("neither Acquire returned nor attempt 3 began")
	}
	undo.open()
	undo.await(t, undo.passed, "attempt 1's undo at node 2")
	pace.open()
	if !returned {
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Acquire() did not return after the late undo")
		}
	}
	must(t, "Acquire()", err)
	defer l.Release(ctx)
	if n := holders(t, nodes, key, l.Token()); n < 2 {
		t.Fatalf("nodes holding the hold's token = %d with Validity() = %v, want at least the quorum 2", n, l.Validity())
	}
	// The other holder leaves node 1: a third party must still be kept out.
	delKey(t, nodes[1], key)
	_, own := ownClients(t, nodes)
	// Only a grant fails the test; an error is as good as a refusal here.
	if ok, _ := newClient(t, own, loadTolerant).NewLock(key).TryAcquire(ctx); ok {
		t.Fatalf("TryAcquire() by another client = true while the hold has Validity() = %v; want false", l.Validity())
	}
}

// A failed TryAcquire undoes its grant on a node whose acquire lands after
// the round's deadline: the undo waits for that node's acquire call.
func TestLock_TryAcquire_undoesAcquireLandingLate(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	ctx := context.Background()
	key := keyFor(t)
	setOther(t, nodes[1], key)
	late := hookScript(t, nodes[2], luascripts.Acquire, false, first(1))
	c := newClient(t, nodes, loadTolerant) // TTL 30s
	ok, err := c.NewLock(key).TryAcquire(ctx)
	var qe *redlock.QuorumError
	if ok || !errors.As(err, &qe) {
		t.Fatalf("TryAcquire(node 1 held, node 2 late) = %v, %v; want false and a *QuorumError", ok, err)
	}
	late.open() // node 2's acquire lands now, after the round and its undo
	late.await(t, late.passed, "node 2's acquire")
	waitKeysGone(t, nodes[2:], key, "node 2's late acquire undone")
	if n := keysLeft(t, nodes[:1], key); n != 0 {
		t.Fatalf("node 0 keeps the failed attempt's key, want it undone")
	}
}

// A ctx that ends while the fence round waits reports its cause for the
// node that did not answer in time, not a node timeout.
func TestLock_TryAcquire_ctxEndsInFenceRound(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	key := keyFor(t)
	// Counters apart: the fence round has to raise nodes 1 and 2 (node 0's
	// counter is far ahead of the clock the others restart from).
	must(t, "SET fence", nodes[0].Set(context.Background(), lockKey(key)+":fence", 2*luascripts.Clocked, time.Minute).Err())
	raise := hookScript(t, nodes[1], luascripts.FenceRaise, false, first(1))
	c := newClient(t, nodes, redlock.WithQuorum(3), redlock.WithNodeTimeout(5*time.Second), redlock.WithTTL(time.Minute))
	errCause := errors.New("caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		<-raise.arrived
		cancel(errCause)
	}()
	ok, err := c.NewLock(key).TryAcquire(ctx)
	if ok {
		t.Fatalf("TryAcquire() = true, want false: the fence round did not finish")
	}
	wantIs(t, "TryAcquire(ctx ended in fence round)", err, lock.ErrNotAcquired)
	wantIs(t, "TryAcquire(ctx ended in fence round)", err, errCause)
}

// TestLock_TryAcquire_returnsByDeadlineWithStoppedNodes: with every node
// stopped, TryAcquire and Acquire return by their caller's deadline, far
// inside the node timeout; the undo of the attempt goes on in the
// background.
func TestLock_TryAcquire_returnsByDeadlineWithStoppedNodes(t *testing.T) {
	ss, nodes := realNodes(t, 3)
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second))
	key := keyFor(t)
	for _, s := range ss {
		must(t, "Pause()", s.Pause())
		t.Cleanup(func() { s.Resume() })
	}
	for _, tt := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"TryAcquire", func(ctx context.Context) error { _, err := c.NewLock(key).TryAcquire(ctx); return err }},
		{"Acquire", func(ctx context.Context) error { return c.NewLock(key).Acquire(ctx) }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := tt.call(ctx)
		took := time.Since(start)
		cancel()
		if took > 350*time.Millisecond {
			t.Fatalf("%s(ctx 200ms) with every node stopped returned after %v (error %v), want by the deadline", tt.name, took, err)
		}
		wantIs(t, tt.name+"(ctx 200ms)", err, lock.ErrNotAcquired)
	}
}

// cutAtDeadline is a go-redis hook on one node's client modelling a call
// cut by ContextTimeoutEnabled while its bytes are still on the wire (a
// lost segment waits for TCP's retransmit, 200ms at least on Linux): the
// first call of one script fails with a timeout at its ctx deadline without
// reaching the node, and a copy of it reaches the node when land is called.
type cutAtDeadline struct {
	sha    string
	calls  atomic.Int32
	mu     sync.Mutex
	landFn func()
}

func (h *cutAtDeadline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cutAtDeadline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *cutAtDeadline) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || cmd.Name() != "evalsha" || args[1] != h.sha || h.calls.Add(1) != 1 {
			return next(ctx, cmd)
		}
		late := redis.NewCmd(context.Background(), args...)
		h.mu.Lock()
		h.landFn = func() { _ = next(context.Background(), late) }
		h.mu.Unlock()
		<-ctx.Done()
		err := fmt.Errorf("read tcp: i/o timeout: %w", os.ErrDeadlineExceeded)
		cmd.SetErr(err)
		return err
	}
}

// land sends the cut call's copy to the node and waits for its reply.
func (h *cutAtDeadline) land(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	fn := h.landFn
	h.mu.Unlock()
	if fn == nil {
		t.Fatalf("no call was cut")
	}
	fn()
}

// A failed TryAcquire whose acquire call to node 2 was cut at the node
// timeout (ContextTimeoutEnabled, as the docs advise) while the command was
// still on its way: the call has returned, so the undo goes at once, and
// the acquire lands after it (bytes already sent cannot be recalled). The
// undo's tombstone refuses it: node 2 is not held, and the tombstone
// expires within a TTL.
func TestLock_TryAcquire_acquireLandingAfterItsUndoIsRefused(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	ctx := context.Background()
	key := keyFor(t)
	setOther(t, nodes[1], key)
	cut := &cutAtDeadline{sha: luascripts.Acquire.Hash()}
	nodes[2].(*redis.Client).AddHook(cut)
	const ttl = 2 * time.Second
	c := newClient(t, nodes, redlock.WithTTL(ttl), loadTolerant)
	l := c.NewLock(key)
	ok, err := l.TryAcquire(ctx)
	var qe *redlock.QuorumError
	if ok || !errors.As(err, &qe) {
		t.Fatalf("TryAcquire(node 1 held, node 2 cut) = %v, %v; want false and a *QuorumError", ok, err)
	}
	// TryAcquire returned after node 0 answered its undo.
	if n := keysLeft(t, nodes[:1], key); n != 0 {
		t.Fatalf("node 0 keeps the failed attempt's key, want it undone")
	}
	waitTombstone(t, nodes[2], key, ttl)
	cut.land(t) // node 2's acquire lands now, after the round and its undo
	wantLateAcquireRefused(t, nodes[2], key, ttl)
}

// TestLock_Release_acquireLandingAfterReleaseIsRefused: a hold won on nodes
// 0 and 1 while its acquire call to node 2 was cut at the node timeout
// with the command still on its way; Release deletes it everywhere, and
// the acquire then lands on node 2: the release's tombstone refuses it.
func TestLock_Release_acquireLandingAfterReleaseIsRefused(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	ctx := context.Background()
	key := keyFor(t)
	cut := &cutAtDeadline{sha: luascripts.Acquire.Hash()}
	nodes[2].(*redis.Client).AddHook(cut)
	const ttl = 2 * time.Second
	c := newClient(t, nodes, redlock.WithTTL(ttl), loadTolerant)
	l := c.NewLock(key)
	must(t, "Acquire(node 2 cut)", l.Acquire(ctx))
	must(t, "Release()", l.Release(ctx))
	waitTombstone(t, nodes[2], key, ttl)
	cut.land(t)
	wantLateAcquireRefused(t, nodes[2], key, ttl)
}

// waitTombstone waits, at most 5s, for the tombstone of an undo or
// release on rdb, whose delete goes once the cut acquire call returned.
func waitTombstone(t *testing.T, rdb redis.UniversalClient, key string, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		tombs, err := rdb.Keys(ctx, lockKey(key)+":undone:*").Result()
		must(t, "KEYS undone", err)
		if len(tombs) == 1 {
			if d := rdb.PTTL(ctx, tombs[0]).Val(); d <= 0 || d > ttl {
				t.Fatalf("tombstone PTTL = %v, want in (0, %v]", d, ttl)
			}
			return
		}
		if len(tombs) > 1 || time.Now().After(deadline) {
			t.Fatalf("tombstones on the cut node = %q, want one", tombs)
		}
	}
}

// wantLateAcquireRefused checks that the acquire that landed late left rdb
// without the lock, and that its tombstone still expires.
func wantLateAcquireRefused(t *testing.T, rdb redis.UniversalClient, key string, ttl time.Duration) {
	t.Helper()
	if n := keysLeft(t, []redis.UniversalClient{rdb}, key); n != 0 {
		t.Fatalf("the cut node is held after the late acquire (PTTL %v), want it refused by the tombstone",
			rdb.PTTL(context.Background(), lockKey(key)).Val())
	}
	tombs, err := rdb.Keys(context.Background(), lockKey(key)+":undone:*").Result()
	must(t, "KEYS undone", err)
	for _, k := range tombs {
		if d := rdb.PTTL(context.Background(), k).Val(); d <= 0 || d > ttl {
			t.Fatalf("tombstone %s PTTL = %v, want in (0, %v]", k, d, ttl)
		}
	}
}

// TestLock_Acquire_ctxDone: an Acquire on a held key ends with its ctx,
// returning ErrNotAcquired wrapping ctx.Err(), and leaves the holder its
// quorum.
func TestLock_Acquire_ctxDone(t *testing.T) {
	t.Parallel()
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
