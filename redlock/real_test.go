package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/redlock"
)

// These tests run against real redis-server processes (internal/redistest):
// they skip without the binary unless LOCK_REQUIRE_REDIS=1.

func TestReal_killAndRestart(t *testing.T) {
	t.Parallel()
	ss, nodes := realNodes(t, 5)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 5 * time.Second
	c := newClient(t, nodes, redlock.WithTTL(ttl), redlock.WithWaitTimeout(500*time.Millisecond), loadTolerant)

	acquireRelease := func(what string) {
		t.Helper()
		l := c.NewLock(key)
		must(t, what+": Acquire()", l.Acquire(ctx))
		if v := l.Validity(); v <= 0 || v > ttl {
			t.Fatalf("%s: Validity() = %v, want in (0, %v]", what, v, ttl)
		}
		must(t, what+": Release()", l.Release(ctx))
	}
	acquireRelease("all up")

	ss[1].Kill()
	ss[3].Kill()
	acquireRelease("2 of 5 killed")

	ss[4].Kill()
	l := c.NewLock(key)
	start := time.Now()
	err := l.Acquire(ctx)
	took := time.Since(start)
	wantIs(t, "Acquire(3 of 5 killed)", err, lock.ErrNotAcquired)
	t.Logf("Acquire with 3 of 5 killed, wait timeout 500ms: failed after %v", took)
	if took > 3*time.Second {
		t.Fatalf("Acquire(3 of 5 killed) took %v, want about the 500ms wait timeout", took)
	}
	if n := keysLeft(t, nodes, key); n != 0 {
		t.Fatalf("surviving nodes with the key = %d, want 0", n)
	}

	for _, i := range []int{1, 3, 4} {
		if err := ss[i].Restart(); err != nil {
			t.Fatalf("Restart() error = %v", err)
		}
	}
	acquireRelease("restarted")
}

func TestReal_pausedNode(t *testing.T) {
	ss, nodes := realNodes(t, 5)
	ctx := context.Background()
	nodeTimeout := 200 * time.Millisecond
	c := newClient(t, nodes, redlock.WithNodeTimeout(nodeTimeout))
	key := keyFor(t)
	if err := ss[2].Pause(); err != nil {
		t.Fatalf("Pause() error = %v", err)
	}
	defer ss[2].Resume()
	l := c.NewLock(key)
	start := time.Now()
	must(t, "Acquire(one node stopped)", l.Acquire(ctx))
	acq := time.Since(start)
	start = time.Now()
	must(t, "Release(one node stopped)", l.Release(ctx))
	rel := time.Since(start)
	t.Logf("one node SIGSTOPped, node timeout %v: Acquire %v, Release %v", nodeTimeout, acq, rel)
	if acq > nodeTimeout+2*time.Second || rel > nodeTimeout+2*time.Second {
		t.Fatalf("Acquire %v / Release %v, want about the node timeout %v at most", acq, rel, nodeTimeout)
	}
}

func TestReal_mutualExclusion(t *testing.T) {
	t.Parallel()
	_, nodes := realNodes(t, 5)
	ctx := context.Background()
	key := keyFor(t)
	const clients, workers, rounds = 3, 2, 25
	var x kindtest.Exclusion
	var cs []*redlock.Client
	for range clients {
		// Each redlock client gets its own connections, as separate processes would.
		_, own := ownClients(t, nodes)
		c := newClient(t, own, redlock.WithTTL(5*time.Second), loadTolerant)
		cs = append(cs, c)
		for range workers {
			x.Worker(ctx, rounds, func() kindtest.Locker { return c.NewLock(key) }, func() error {
				time.Sleep(time.Millisecond)
				return nil
			})
		}
	}
	fences := x.Check(t, clients*workers*rounds)
	var raises int64
	for _, c := range cs {
		raises += redlock.FenceRaises(c)
	}
	t.Logf("%d contended holds (%d clients x %d workers): last fence %d, fence-raise rounds %d",
		len(fences), clients, workers, fences[len(fences)-1], raises)
}

// loadTolerant raises the node timeout from its 100ms default for tests that
// are not about slow nodes: under -race on a loaded 2-core CI machine, five
// servers and the test share the CPU and a healthy node can stall past 100ms.
var loadTolerant = redlock.WithNodeTimeout(400 * time.Millisecond)

func TestReal_fences500(t *testing.T) {
	t.Parallel()
	ss, nodes := realNodes(t, 5)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 5 * time.Second
	cs := make([]*redlock.Client, 3)
	for i := range cs {
		_, own := ownClients(t, nodes)
		cs[i] = newClient(t, own, redlock.WithTTL(ttl), loadTolerant)
	}
	var last int64
	const holds = 500
	for i := range holds {
		if i == holds/2 {
			ss[3].Kill() // a minority node dies mid-way
		}
		l := cs[i%len(cs)].NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		if v := l.Validity(); v <= 0 || v > ttl {
			t.Fatalf("hold %d: Validity() = %v, want in (0, %v]", i, v, ttl)
		}
		if l.Fence() <= last {
			t.Fatalf("hold %d: Fence() = %d, want > %d", i, l.Fence(), last)
		}
		last = l.Fence()
		must(t, "Release()", l.Release(ctx))
	}
	var raises int64
	for _, c := range cs {
		raises += redlock.FenceRaises(c)
	}
	t.Logf("%d successive holds over 3 clients, node 3 killed at hold %d: last fence %d, fence-raise rounds %d", holds, holds/2, last, raises)
}

// TestReal_lateDuplicateAcquireDoesNotShortenExtendedTTL: a node's copy of
// an acquire (kindtest.FirstScript captures it as sent) reaches the node
// again after Acquire returned and Extend lengthened the hold, as the bytes
// of a first send that go-redis gave up on may arrive late. The node's
// acquire.lua finds the key ours; it must not cut the hold back to the
// acquire's TTL, which would let the key go while Validity() still counts
// the extended TTL.
func TestReal_lateDuplicateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
	t.Parallel()
	_, nodes := realNodes(t, 3)
	ctx := context.Background()
	key := keyFor(t)
	h := kindtest.CaptureFirstScript(nodes[0].(*redis.Client), lockKey(key))
	l := newClient(t, nodes, redlock.WithTTL(time.Second), redlock.WithWatchdog(false)).NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	// Acquire returns at quorum: let the third node's acquire land first,
	// or the Extend could reach that node before it.
	waitHolders(t, nodes, key, l.Token(), 3)
	must(t, "Extend()", l.Extend(ctx, time.Minute))

	h.Replay(t, nodes[0])
	for i, rdb := range nodes {
		if left, err := rdb.PTTL(ctx, lockKey(key)).Result(); err != nil || left < 30*time.Second {
			t.Fatalf("node %d: PTTL after a late duplicate of the acquire = %v, %v; want at least 30s (extended to 1m, acquired for 1s)", i, left, err)
		}
	}
	if v := l.Validity(); v < 30*time.Second {
		t.Fatalf("Validity() = %v, want at least 30s", v)
	}
}
