package redlock_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// locker is the interface both the core and redlock locks satisfy.
type locker interface {
	Acquire(context.Context) error
	TryAcquire(context.Context) (bool, error)
	Release(context.Context) error
	Extend(context.Context, time.Duration) error
	Lost() <-chan struct{}
	Key() string
	Token() string
	Fence() int64
}

var (
	_ locker = (*lock.Lock)(nil)
	_ locker = (*redlock.Lock)(nil)
)

func TestLock_AcquireRelease(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 5)
	c := newClient(t, nodes)
	ctx := context.Background()
	key := keyFor(t)
	l := c.NewLock(key, redlock.WithTTL(10*time.Second))
	if l.Token() != "" || l.Fence() != 0 || l.Lost() != nil || l.Validity() != 0 {
		t.Fatalf("before Acquire: Token %q Fence %d Lost %v Validity %v, want zero values", l.Token(), l.Fence(), l.Lost(), l.Validity())
	}
	wantIs(t, "Release(never acquired)", l.Release(ctx), lock.ErrNotHeld)
	must(t, "Acquire()", l.Acquire(ctx))
	if !uuidV4.MatchString(l.Token()) {
		t.Fatalf("Token() = %q, want a UUID v4", l.Token())
	}
	if l.Key() != key {
		t.Fatalf("Key() = %q, want %q", l.Key(), key)
	}
	if l.Fence() < luascripts.Clocked {
		t.Fatalf("Fence() = %d, want a counter started from the clock", l.Fence())
	}
	first := l.Fence()
	if v := l.Validity(); v <= 0 || v > 10*time.Second {
		t.Fatalf("Validity() = %v, want in (0, 10s]", v)
	}
	waitHolders(t, nodes, key, l.Token(), 5)
	must(t, "Release()", l.Release(ctx))
	if n := keysLeft(t, nodes, key); n != 0 {
		t.Fatalf("nodes with the key after Release = %d, want 0", n)
	}
	if isClosed(l.Lost()) {
		t.Fatalf("Lost() closed by a normal Release")
	}
	if l.Validity() != 0 {
		t.Fatalf("Validity() after Release = %v, want 0", l.Validity())
	}
	wantIs(t, "second Release()", l.Release(ctx), lock.ErrNotHeld)

	must(t, "Acquire() again", l.Acquire(ctx))
	// Each node's counter started from its own clock: a node the first
	// quorum did not raise may be ahead, so the second fence is larger,
	// not necessarily by one.
	if l.Fence() <= first {
		t.Fatalf("Fence() of the second hold = %d, want more than %d", l.Fence(), first)
	}
	must(t, "Release()", l.Release(ctx))
}

func TestLock_TryAcquire_heldByOther(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 5)
	c := newClient(t, nodes)
	ctx := context.Background()
	a, b := c.NewLock(keyFor(t)), c.NewLock(keyFor(t))
	ok, err := a.TryAcquire(ctx)
	if !ok || err != nil {
		t.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
	}
	ok, err = b.TryAcquire(ctx)
	if ok || err != nil {
		t.Fatalf("TryAcquire(held) = %v, %v, want false, nil", ok, err)
	}
	if b.Token() != "" {
		t.Fatalf("Token() after a failed TryAcquire = %q, want \"\"", b.Token())
	}
	must(t, "Release()", a.Release(ctx))
	ok, err = b.TryAcquire(ctx)
	if !ok || err != nil {
		t.Fatalf("TryAcquire(after release) = %v, %v, want true, nil", ok, err)
	}
	must(t, "Release()", b.Release(ctx))
}

func TestLock_Acquire_minorityDown(t *testing.T) {
	t.Parallel()
	ms, nodes := miniNodes(t, 5)
	c := newClient(t, nodes)
	ctx := context.Background()
	ms[0].Close()
	ms[3].Close()
	l := c.NewLock(keyFor(t))
	must(t, "Acquire(2 of 5 down)", l.Acquire(ctx))
	if v := l.Validity(); v <= 0 {
		t.Fatalf("Validity() = %v, want > 0", v)
	}
	must(t, "Extend()", l.Extend(ctx, time.Minute))
	must(t, "Release()", l.Release(ctx))
}

func TestLock_Acquire_majorityDown(t *testing.T) {
	t.Parallel()
	ms, nodes := miniNodes(t, 5)
	c := newClient(t, nodes, redlock.WithWaitTimeout(300*time.Millisecond))
	ctx := context.Background()
	for _, i := range []int{0, 2, 4} {
		ms[i].Close()
	}
	key := keyFor(t)
	l := c.NewLock(key)
	start := time.Now()
	err := l.Acquire(ctx)
	took := time.Since(start)
	wantIs(t, "Acquire(3 of 5 down)", err, lock.ErrNotAcquired)
	t.Logf("Acquire with 3 of 5 nodes down, wait timeout 300ms: failed after %v", took)
	if took > 3*time.Second {
		t.Fatalf("Acquire(3 of 5 down) took %v, want about the 300ms wait timeout", took)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Acquire() error = %v, want a *QuorumError in it", err)
	}
	if qe.Needed != 3 || qe.Reached > 2 || len(qe.Errs) != 5 || qe.Errs[0] == nil {
		t.Fatalf("QuorumError = %+v, want Needed 3, Reached <= 2, 5 errors with node 0's set", qe)
	}
	if n := keysLeft(t, nodes, key); n != 0 {
		t.Fatalf("surviving nodes with the key = %d, want 0", n)
	}
	ok, err := l.TryAcquire(ctx)
	if ok || !errors.As(err, &qe) {
		t.Fatalf("TryAcquire(3 of 5 down) = %v, %v, want false and a *QuorumError", ok, err)
	}
}

func TestLock_Fence_raisesLaggingCounters(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 5)
	c := newClient(t, nodes, redlock.WithQuorum(5))
	ctx := context.Background()
	key := keyFor(t)
	// Counters that diverged, as after minority grants of failed attempts
	// (values from a clock: far ahead of this one, so that none restarts).
	const base = 2 * luascripts.Clocked
	for i, v := range []int64{7, 3, 0, 9, 1} {
		must(t, "SET fence", nodes[i].Set(ctx, lockKey(key)+":fence", base+v, time.Minute).Err())
	}
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	if l.Fence() != base+10 {
		t.Fatalf("Fence() = %d, want base+10 (max counter + 1)", l.Fence())
	}
	if n := redlock.FenceRaises(c); n != 1 {
		t.Fatalf("FenceRaises = %d, want 1", n)
	}
	for i, rdb := range nodes {
		v, err := rdb.Get(ctx, lockKey(key)+":fence").Int64()
		if err != nil || v < base+10 {
			t.Fatalf("node %d fence counter = %d, %v; want >= base+10", i, v, err)
		}
	}
	must(t, "Release()", l.Release(ctx))
	must(t, "Acquire()", l.Acquire(ctx))
	if l.Fence() != base+11 || redlock.FenceRaises(c) != 1 {
		t.Fatalf("Fence() = %d, FenceRaises = %d; want base+11 and no new raise", l.Fence(), redlock.FenceRaises(c))
	}
	must(t, "Release()", l.Release(ctx))
}

func TestLock_Fence_increasesAcrossHolders(t *testing.T) {
	t.Parallel()
	ms, nodes := miniNodes(t, 5)
	// Node 1 dies mid-way. Its client gives a call up at its first failed
	// dial (go-redis tries 5 by default), so that no round waits its node
	// timeout for it, and the timeout can be generous: these in-process
	// servers, starved under -race while other packages' tests ran, twice
	// answered no Release within the default 100ms (0 of 5 nodes).
	dead := redis.NewClient(&redis.Options{Addr: ms[1].Addr(), MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1})
	t.Cleanup(func() { dead.Close() })
	nodes[1] = dead
	slowOK := redlock.WithNodeTimeout(time.Second)
	clients := []*redlock.Client{newClient(t, nodes, slowOK), newClient(t, nodes, slowOK), newClient(t, nodes, slowOK)}
	ctx := context.Background()
	key := keyFor(t)
	var last int64
	for i := range 60 {
		if i == 30 {
			ms[1].Close() // a minority node dies mid-way
		}
		l := clients[i%3].NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		if l.Fence() <= last {
			t.Fatalf("hold %d: Fence() = %d, want > %d", i, l.Fence(), last)
		}
		last = l.Fence()
		must(t, "Release()", l.Release(ctx))
	}
}

// TestLock_Fence_countersExpire: on real servers, every node's fencing
// counter has a TTL after an acquisition. The counters of a new key start
// from each node's own clock, so its first fence may need a raise round;
// the next holder's does not.
func TestLock_Fence_countersExpire(t *testing.T) {
	t.Parallel()
	_, nodes := realNodes(t, 3)
	c := newClient(t, nodes, redlock.WithQuorum(3))
	ctx := context.Background()
	for i := range 3 {
		key := keyFor(t) + ":" + strconv.Itoa(i)
		for range 2 {
			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			for n, rdb := range nodes {
				ttl, err := rdb.PTTL(ctx, lockKey(key)+":fence").Result()
				must(t, "PTTL fence", err)
				if ttl <= 0 || ttl > luascripts.FenceTTL {
					t.Fatalf("node %d: PTTL of the fence counter = %v, want in (0, %v]", n, ttl, luascripts.FenceTTL)
				}
			}
			must(t, "Release()", l.Release(ctx))
		}
	}
	if n := redlock.FenceRaises(c); n > 3 {
		t.Fatalf("FenceRaises = %d after 3 new keys held twice each, want at most 3: one per new key", n)
	}
}

// TestLock_Fence_increasesAcrossCounterExpiry: on real servers, once the
// counters are gone from every node, from one node of the next quorum, or
// were left small and without a TTL by an older version, the next fence is
// still larger than every earlier one.
func TestLock_Fence_increasesAcrossCounterExpiry(t *testing.T) {
	t.Parallel()
	_, nodes := realNodes(t, 3)
	c := newClient(t, nodes)
	ctx := context.Background()
	key := keyFor(t)
	fence := lockKey(key) + ":fence"
	drops := []struct {
		name string
		drop func(t *testing.T)
	}{
		{"deleted everywhere", func(t *testing.T) {
			for _, rdb := range nodes {
				must(t, "DEL fence", rdb.Del(ctx, fence).Err())
			}
		}},
		{"expired on one node", func(t *testing.T) {
			must(t, "PEXPIRE fence", nodes[1].PExpire(ctx, fence, time.Millisecond).Err())
			deadline := time.Now().Add(5 * time.Second)
			for nodes[1].Exists(ctx, fence).Val() != 0 {
				if time.Now().After(deadline) {
					t.Fatal("fence counter still there 5s after a 1ms TTL")
				}
				time.Sleep(time.Millisecond)
			}
		}},
		{"legacy", func(t *testing.T) {
			for _, rdb := range nodes {
				must(t, "SET fence", rdb.Set(ctx, fence, 3, 0).Err())
			}
		}},
	}
	var last int64
	for _, d := range drops {
		for i := range 2 {
			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			if l.Fence() <= last {
				t.Fatalf("counter %s: fence %d after %d, want larger", d.name, l.Fence(), last)
			}
			last = l.Fence()
			must(t, "Release()", l.Release(ctx))
			if i == 0 {
				d.drop(t)
			}
		}
	}
}

func TestLock_Watchdog_renews(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 5)
	c := newClient(t, nodes)
	l := c.NewLock(keyFor(t), redlock.WithTTL(600*time.Millisecond))
	ctx := context.Background()
	must(t, "Acquire()", l.Acquire(ctx))
	// Without renewal the validity would run out after 600ms.
	time.Sleep(1500 * time.Millisecond)
	if isClosed(l.Lost()) {
		t.Fatalf("Lost() closed: %v", l.LostErr())
	}
	if v := l.Validity(); v <= 0 || v > 600*time.Millisecond {
		t.Fatalf("Validity() = %v, want in (0, 600ms]", v)
	}
	must(t, "Release()", l.Release(ctx))
}

func TestLock_Lost_withoutWatchdog(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithWatchdog(false), redlock.WithTTL(300*time.Millisecond))
	l := c.NewLock(keyFor(t))
	must(t, "Acquire()", l.Acquire(context.Background()))
	wantLoss(t, l, lock.LossExpired, "the validity ran out")
}

func TestLock_Lost_keysGone(t *testing.T) {
	ms, nodes := miniNodes(t, 5)
	c := newClient(t, nodes)
	key := keyFor(t)
	l := c.NewLock(key, redlock.WithTTL(900*time.Millisecond))
	ctx := context.Background()
	must(t, "Acquire()", l.Acquire(ctx))
	waitHolders(t, nodes, key, l.Token(), 5)
	for _, i := range []int{0, 1, 2} {
		ms[i].Del(lockKey(key))
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatalf("Lost() not closed after 3 of 5 nodes dropped the key")
	}
	wantIs(t, "LostErr()", l.LostErr(), lock.ErrLockLost)
	var le *lock.LostError
	if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossVanished {
		t.Fatalf("LostErr() = %v, want LossVanished", l.LostErr())
	}
	wantIs(t, "Extend(lost)", l.Extend(ctx, time.Second), lock.ErrNotHeld)
	// Two nodes still hold our token: Release drops them and reports success.
	must(t, "Release(lost)", l.Release(ctx))
}

func TestLock_Lost_stolen(t *testing.T) {
	ms, nodes := miniNodes(t, 3)
	c := newClient(t, nodes)
	key := keyFor(t)
	l := c.NewLock(key, redlock.WithTTL(900*time.Millisecond))
	ctx := context.Background()
	must(t, "Acquire()", l.Acquire(ctx))
	waitHolders(t, nodes, key, l.Token(), 3)
	for _, m := range ms {
		m.Set(lockKey(key), "intruder")
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatalf("Lost() not closed after every node changed hands")
	}
	var le *lock.LostError
	if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossStolen {
		t.Fatalf("LostErr() = %v, want LossStolen", l.LostErr())
	}
	wantIs(t, "Release(stolen)", l.Release(ctx), lock.ErrNotHeld)
	for i, m := range ms {
		if v, _ := m.Get(lockKey(key)); v != "intruder" {
			t.Fatalf("node %d key = %q after Release, want the intruder's", i, v)
		}
	}
}

func TestLock_Extend(t *testing.T) {
	t.Parallel()
	ms, nodes := miniNodes(t, 5)
	c := newClient(t, nodes)
	key := keyFor(t)
	l := c.NewLock(key, redlock.WithTTL(2*time.Second))
	ctx := context.Background()
	wantIs(t, "Extend(never acquired)", l.Extend(ctx, time.Minute), lock.ErrNotHeld)
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "Extend()", l.Extend(ctx, time.Minute))
	if v := l.Validity(); v <= 2*time.Second || v > time.Minute {
		t.Fatalf("Validity() after Extend(1m) = %v, want in (2s, 1m]", v)
	}
	if d := ms[0].TTL(lockKey(key)); d != time.Minute {
		t.Fatalf("node TTL = %v, want 1m", d)
	}
	must(t, "Release()", l.Release(ctx))
	wantIs(t, "Extend(released)", l.Extend(ctx, time.Minute), lock.ErrNotHeld)
}

// An Extend to a TTL shorter than the first one makes renewal due before
// the renewal goroutine was scheduled to start: it must start at once.
func TestLock_Extend_shorterTTL_renews(t *testing.T) {
	t.Parallel()
	ms, nodes := miniNodes(t, 3)
	c := newClient(t, nodes)
	key := keyFor(t)
	l := c.NewLock(key) // TTL 30s: the first renewal is due after 10s
	ctx := context.Background()
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "Extend()", l.Extend(ctx, 600*time.Millisecond))
	// Without renewal the validity would run out after 600ms.
	time.Sleep(1500 * time.Millisecond)
	if isClosed(l.Lost()) {
		t.Fatalf("Lost() closed: %v", l.LostErr())
	}
	if v := l.Validity(); v <= 0 || v > 600*time.Millisecond {
		t.Fatalf("Validity() = %v, want in (0, 600ms]", v)
	}
	if d := ms[0].TTL(lockKey(key)); d != 600*time.Millisecond {
		t.Fatalf("node TTL = %v, want 600ms", d)
	}
	must(t, "Release()", l.Release(ctx))
}

func TestLock_Acquire_wokenByRelease(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 5)
	// A long backoff: only a release message can wake the waiter early.
	c := newClient(t, nodes, redlock.WithBackoff(10*time.Second, 10*time.Second))
	ctx := context.Background()
	key := keyFor(t)
	a := c.NewLock(key)
	must(t, "Acquire()", a.Acquire(ctx))
	done := make(chan error, 1)
	b := c.NewLock(key)
	start := time.Now()
	go func() { done <- b.Acquire(ctx) }()
	time.Sleep(300 * time.Millisecond) // let b fail once and subscribe
	must(t, "Release()", a.Release(ctx))
	select {
	case err := <-done:
		must(t, "waiting Acquire()", err)
	case <-time.After(8 * time.Second):
		t.Fatalf("waiting Acquire() not woken by the release")
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("waiting Acquire() took %v", d)
	}
	must(t, "Release()", b.Release(ctx))
}

func TestClient_WithLock(t *testing.T) {
	t.Parallel()
	ms, nodes := miniNodes(t, 5)
	c := newClient(t, nodes, redlock.WithTTL(900*time.Millisecond))
	ctx := context.Background()
	key := keyFor(t)
	ran := false
	err := c.WithLock(ctx, key, func(ctx context.Context) error {
		ran = true
		if n := keysLeft(t, nodes, key); n < 3 {
			return errors.New("not held on a quorum: " + strconv.Itoa(n))
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("WithLock() = %v (ran %v), want nil", err, ran)
	}
	waitKeysGone(t, nodes, key, "after WithLock") // a straggling node's delete follows its acquire
	errFn := errors.New("fn failed")
	err = c.WithLock(ctx, key, func(ctx context.Context) error {
		time.Sleep(100 * time.Millisecond) // the grants after quorum land
		for _, m := range ms {
			m.Del(lockKey(key))
		}
		<-ctx.Done()
		wantIs(t, "context.Cause", context.Cause(ctx), lock.ErrLockLost)
		return errFn
	})
	wantIs(t, "WithLock(lost)", err, lock.ErrLockLost)
	wantIs(t, "WithLock(lost)", err, errFn)
}

func TestClient_Close(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 3)
	c := redlock.New(nodes)
	ctx := context.Background()
	key := keyFor(t)
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	// Acquire returns at quorum; the third node's acquire may still be out.
	// Once Close has begun, a Release sends its deletes at once rather than
	// after such a call (see Lock.drop), so wait for all three grants: what
	// is checked here is that Release still deletes on a closed Client.
	waitHolders(t, nodes, key, l.Token(), 3)
	must(t, "Close()", c.Close())
	must(t, "second Close()", c.Close())
	wantIs(t, "Acquire(closed)", c.NewLock(key+"2").Acquire(ctx), lock.ErrClosed)
	wantIs(t, "Extend(closed)", l.Extend(ctx, time.Second), lock.ErrClosed)
	must(t, "Release(closed)", l.Release(ctx))
	waitKeysGone(t, nodes, key, "after Release on a closed Client")
}
