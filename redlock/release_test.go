package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

// A Release whose ctx is already done still deletes the hold on every node
// (its calls do not end with ctx) and reports that.
func TestLock_Release_ctxDoneReportsDeletes(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// heldWithLateExtends acquires key with c, on every node, and holds the
// next Extend call to nodes 0 and 1 on the wire (the hooks' open lets it
// go); the hold is released at cleanup.
func heldWithLateExtends(t *testing.T, c *redlock.Client, nodes []redis.UniversalClient, key string) (*redlock.Lock, []*scriptHook) {
	t.Helper()
	l := c.NewLock(key)
	ctx := context.Background()
	must(t, "Acquire()", l.Acquire(ctx))
	t.Cleanup(func() { l.Release(ctx) })
	waitHolders(t, nodes, key, l.Token(), 3)
	return l, []*scriptHook{
		hookScript(t, nodes[0], luascripts.Extend, false, first(1)),
		hookScript(t, nodes[1], luascripts.Extend, false, first(1)),
	}
}

// A failed Extend to a shorter TTL may still land on the nodes that did not
// answer (its calls are on the wire, as the calls of a late undo were in
// issue 9, bug 8). A later Extend to a longer TTL that a quorum confirms
// must not raise the validity past what those late calls leave: once they
// land on a quorum, the hold must be reported lost (or its validity be
// over) before another client can take the quorum. No renewal runs during
// the test (watchdog off): with it, renewals at the short TTL's third would
// keep the key (see TestLock_Extend_longerAfterFailedShorterRenewsThroughLateCalls).
func TestLock_Extend_longerDoesNotOutlastLateShorterCalls(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	c := newClient(t, nodes, loadTolerant, redlock.WithWatchdog(false))
	key := keyFor(t)
	ctx := context.Background()
	// The short Extend's calls to nodes 0 and 1 are held on the wire.
	l, late := heldWithLateExtends(t, c, nodes, key)
	const short = 500 * time.Millisecond
	err := l.Extend(ctx, short)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Extend(%v) with nodes 0 and 1 late = %v, want a *QuorumError", short, err)
	}
	must(t, "Extend(30s)", l.Extend(ctx, 30*time.Second))
	for i, h := range late {
		h.open()
		h.await(t, h.passed, "the short Extend's late call")
		if n := nodes[i].PTTL(ctx, lockKey(key)).Val(); n > short {
			t.Fatalf("node %d PTTL after the late call = %v, want at most %v", i, n, short)
		}
	}
	// The late PEXPIRE drops the key on nodes 0 and 1 within the short TTL,
	// unless the engine's renewal with the hold's TTL (sent once every
	// write of the hold was answered, the watchdog off too) lands after it.
	// Either way no other client may hold the key while the first hold
	// still counts as valid.
	settled := func() bool {
		for _, n := range nodes[:2] {
			if p := n.PTTL(ctx, lockKey(key)).Val(); p > 0 && p <= short {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(5 * time.Second); !settled(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nodes 0 and 1 still within the late PEXPIRE's %v after 5s", short)
		}
	}
	_, own := ownClients(t, nodes)
	other := newClient(t, own, loadTolerant).NewLock(key)
	ok, err := other.TryAcquire(ctx)
	if ok && !isClosed(l.Lost()) && l.Validity() > 0 {
		t.Fatalf("another client holds the lock (fence %d) while the first hold has Validity() = %v and Lost() open: two holders",
			other.Fence(), l.Validity())
	}
	if ok {
		other.Release(ctx)
	}
	t.Logf("TryAcquire() by another client = %v, %v; first hold Validity() = %v, lost: %v", ok, err, l.Validity(), isClosed(l.Lost()))
}

// With the watchdog on, a hold whose validity is capped by a failed shorter
// Extend (see TestLock_Extend_longerDoesNotOutlastLateShorterCalls) is
// renewed by that shorter TTL's third: the later Extend to a longer TTL
// reports a validity no longer than the short TTL, and once the short
// Extend's late calls land on a quorum, renewals give the nodes the long
// TTL back before the short one runs out, so the hold stays ours and
// nobody else gets in.
func TestLock_Extend_longerAfterFailedShorterRenewsThroughLateCalls(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	c := newClient(t, nodes, loadTolerant) // TTL 30s
	key := keyFor(t)
	ctx := context.Background()
	l, late := heldWithLateExtends(t, c, nodes, key)
	const short, long = 2 * time.Second, 30 * time.Second
	var qe *redlock.QuorumError
	if err := l.Extend(ctx, short); !errors.As(err, &qe) {
		t.Fatalf("Extend(%v) with nodes 0 and 1 late = %v, want a *QuorumError", short, err)
	}
	must(t, "Extend(30s)", l.Extend(ctx, long))
	if v := l.Validity(); v > short {
		t.Fatalf("Validity() after Extend(%v), with calls of a failed Extend(%v) unanswered = %v, want at most %v", long, short, v, short)
	}
	for _, h := range late {
		h.open()
		h.await(t, h.passed, "the short Extend's late call")
	}
	// Renewals send the long TTL: wait until one has landed on nodes 0 and
	// 1 after the late calls.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("node %d PTTL = %v 5s after the late calls, want over %v (renewed)", i, nodes[i].PTTL(ctx, lockKey(key)).Val(), short)
		}
		if nodes[i].PTTL(ctx, lockKey(key)).Val() > short {
			i++
			continue
		}
		time.Sleep(5 * time.Millisecond)
	}
	if isClosed(l.Lost()) || l.Validity() <= 0 {
		t.Fatalf("hold after renewals: Lost() closed = %v (%v), Validity() = %v; want open and valid", isClosed(l.Lost()), l.LostErr(), l.Validity())
	}
	_, own := ownClients(t, nodes)
	if ok, err := newClient(t, own, loadTolerant).NewLock(key).TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() by another client = %v, %v; want false, nil", ok, err)
	}
}

// A Release that races a renewal round must not close Lost: the hold ends
// by Release, not involuntarily (WithLock would report ErrLockLost for a
// run that lost nothing). The renewal's calls to nodes 0 and 1 are held on
// the wire until Release has deleted the key there; Release's own delete
// at node 2 is held until the renewal round has been counted.
func TestLock_Release_racingRenewalKeepsLostOpen(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	const ttl, nodeTimeout = 10 * time.Second, time.Second
	c := newClient(t, nodes, redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout))
	key := keyFor(t)
	l := c.NewLock(key)
	ctx := context.Background()
	renew := []*scriptHook{
		hookScript(t, nodes[0], luascripts.Extend, false, first(1)),
		hookScript(t, nodes[1], luascripts.Extend, false, first(1)),
	}
	del := hookScript(t, nodes[2], luascripts.Release, false, first(1))
	must(t, "Acquire()", l.Acquire(ctx))
	waitHolders(t, nodes, key, l.Token(), 3)
	for _, h := range renew {
		h.await(t, h.arrived, "the first renewal's call") // at TTL/3
	}
	roundEnd := time.Now().Add(nodeTimeout)
	released := make(chan error, 1)
	go func() { released <- l.Release(ctx) }()
	del.await(t, del.arrived, "Release's delete at node 2")
	waitKeysGone(t, nodes[:2], key, "Release deleting the key on nodes 0 and 1")
	for _, h := range renew {
		h.open() // the renewal finds the key gone on nodes 0 and 1
		h.await(t, h.passed, "the renewal's late call")
	}
	// The renewal round has been counted by its deadline; a second more
	// lets a loss it reports be signalled.
	select {
	case <-l.Lost():
	case <-time.After(time.Until(roundEnd) + time.Second):
	}
	lostDuringRelease := isClosed(l.Lost())
	del.open()
	select {
	case err := <-released:
		must(t, "Release()", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("Release() did not return")
	}
	if lostDuringRelease {
		t.Fatalf("Lost() closed while Release deleted the hold: LostErr() = %v", l.LostErr())
	}
}

// An Extend that races a Release must not close Lost either: its calls to
// nodes 0 and 1 are held on the wire until Release has deleted the key
// there, and Release's own delete at node 2 is held until Extend returned.
func TestLock_Extend_racingReleaseKeepsLostOpen(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	// Extend's round ends 3s after it starts: the held calls are let go
	// well before, so their replies (key gone) are counted.
	c := newClient(t, nodes, redlock.WithNodeTimeout(3*time.Second)) // TTL 30s: no renewal during the test
	key := keyFor(t)
	l := c.NewLock(key)
	ctx := context.Background()
	must(t, "Acquire()", l.Acquire(ctx))
	waitHolders(t, nodes, key, l.Token(), 3)
	ext := []*scriptHook{
		hookScript(t, nodes[0], luascripts.Extend, false, first(1)),
		hookScript(t, nodes[1], luascripts.Extend, false, first(1)),
	}
	del := hookScript(t, nodes[2], luascripts.Release, false, first(1))
	extended := make(chan error, 1)
	go func() { extended <- l.Extend(ctx, 20*time.Second) }()
	for _, h := range ext {
		h.await(t, h.arrived, "Extend's call")
	}
	released := make(chan error, 1)
	go func() { released <- l.Release(ctx) }()
	del.await(t, del.arrived, "Release's delete at node 2")
	waitKeysGone(t, nodes[:2], key, "Release deleting the key on nodes 0 and 1")
	for _, h := range ext {
		h.open() // Extend finds the key gone on nodes 0 and 1
	}
	var err error
	select {
	case err = <-extended:
	case <-time.After(10 * time.Second):
		t.Fatalf("Extend() did not return")
	}
	lostDuringRelease := isClosed(l.Lost())
	del.open()
	select {
	case rerr := <-released:
		must(t, "Release()", rerr)
	case <-time.After(10 * time.Second):
		t.Fatalf("Release() did not return")
	}
	if lostDuringRelease {
		t.Fatalf("Lost() closed by an Extend (error %v) racing Release: LostErr() = %v", err, l.LostErr())
	}
	wantIs(t, "Extend() racing Release", err, lock.ErrNotHeld)
}

// A Release that finds a node's acquire call still out leaves that node's
// delete to the call, which sends it once it has returned: the delete
// cannot overtake the acquire.
func TestLock_Release_deleteFollowsStragglingAcquire(t *testing.T) {
	t.Parallel()
	nodes, key, late, dels, undos, _ := releasedWithStraggler(t)
	late.open() // node 2's acquire lands now, after Release returned
	late.await(t, late.passed, "node 2's acquire")
	waitKeysGone(t, nodes, key, "node 2's late acquire released")
	// The acquire answered before the delete went: a plain one serves.
	if n, u := dels.calls.Load(), undos.calls.Load(); n != 1 || u != 0 {
		t.Fatalf("deletes sent to node 2 = %d plain, %d with a tombstone; want 1 and 0", n, u)
	}
}

// releasedWithStraggler acquires a lock on three nodes whose acquire call
// to node 2 is held (late), and releases it: node 2's delete, counted by
// dels (plain) and undos (with a tombstone), is left to that call. It returns the nodes, the key, the hooks and
// the Client, which t.Cleanup closes.
func releasedWithStraggler(t *testing.T) (nodes []redis.UniversalClient, key string, late, dels, undos *scriptHook, c *redlock.Client) {
	t.Helper()
	_, nodes = hookableNodes(t, 3)
	ctx := context.Background()
	key = keyFor(t)
	late = hookScript(t, nodes[2], luascripts.Acquire, false, first(1))
	dels = hookScript(t, nodes[2], luascripts.Release, false, first(0)) // counts only
	undos = hookScript(t, nodes[2], luascripts.Undo, false, first(0))
	c = newClient(t, nodes, loadTolerant)
	l := c.NewLock(key)
	ok, err := l.TryAcquire(ctx)
	if !ok || err != nil {
		t.Fatalf("TryAcquire(node 2 late) = %v, %v; want true, nil", ok, err)
	}
	late.await(t, late.arrived, "node 2's acquire")
	must(t, "Release()", l.Release(ctx))
	if n := dels.calls.Load() + undos.calls.Load(); n != 0 {
		t.Fatalf("deletes sent to node 2 while its acquire is still out = %d, want 0", n)
	}
	return nodes, key, late, dels, undos, c
}
