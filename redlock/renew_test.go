package redlock_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

// TestClient_renewsHoldsInOneLoop: many held locks are renewed by the
// Client's one renewal loop, one pipeline per node for the holds due
// together, not by a goroutine per hold.
func TestClient_renewsHoldsInOneLoop(t *testing.T) {
	_, nodes := realNodes(t, 3)
	const n, ttl = 300, 1200 * time.Millisecond
	c := newClient(t, nodes, redlock.WithTTL(ttl), loadTolerant)
	ctx := context.Background()
	before := runtime.NumGoroutine()
	locks := make([]*redlock.Lock, n)
	for i := range locks {
		locks[i] = c.NewLock(fmt.Sprintf("%s:%d", keyFor(t), i))
		must(t, "Acquire()", locks[i].Acquire(ctx))
	}
	// Past the first renewal (TTL/3) of every hold.
	time.Sleep(ttl/3 + 300*time.Millisecond)
	if g := runtime.NumGoroutine() - before; g > 50 {
		t.Fatalf("%d more goroutines with %d locks held and renewed, want a few (no goroutine per hold)", g, n)
	}
	for i, l := range locks {
		if isClosed(l.Lost()) {
			t.Fatalf("lock %d lost: %v", i, l.LostErr())
		}
		// Renewed: more validity left than the acquisition alone gives now.
		if v := l.Validity(); v < ttl/2 {
			t.Fatalf("lock %d: Validity() = %v, want a renewed hold (> %v)", i, v, ttl/2)
		}
	}
	for _, l := range locks {
		must(t, "Release()", l.Release(ctx))
	}
}

// A hold whose renewals are run by every node but whose replies are held
// back past its validity is reported lost as unanswered: no connection
// failed.
func TestLock_Lost_renewalUnanswered(t *testing.T) {
	t.Parallel()
	_, nodes := hookableNodes(t, 3)
	c := newClient(t, nodes)
	l := c.NewLock(keyFor(t), redlock.WithTTL(600*time.Millisecond))
	must(t, "Acquire()", l.Acquire(context.Background()))
	for _, rdb := range nodes {
		hookScript(t, rdb, luascripts.Extend, true, every)
	}
	wantLoss(t, l, lock.LossUnanswered, "the renewals' replies were held (TTL 600ms)")
}
