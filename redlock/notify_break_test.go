package redlock_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

// failScript, while on, fails every EVALSHA of one script without sending
// it, as a connection lost before the write would (a kindtest.FailWhen
// hook asks hit); or, with pass set, lets it through after calling pass.
type failScript struct {
	sha  string
	on   atomic.Bool
	pass func()
}

func failOn(t *testing.T, rdb *redis.Client, s *redis.Script) *failScript {
	t.Helper()
	f := &failScript{sha: s.Hash()}
	rdb.AddHook(&kindtest.FailWhen{Match: func(cmds []redis.Cmder) bool { return f.hit(cmds...) }, Err: io.EOF})
	return f
}

func (f *failScript) hit(cmds ...redis.Cmder) bool {
	if !f.on.Load() {
		return false
	}
	for _, c := range cmds {
		if a := c.Args(); len(a) >= 2 && c.Name() == "evalsha" && a[1] == f.sha {
			if f.pass != nil {
				f.pass()
				return false
			}
			return true
		}
	}
	return false
}

// waitIdle waits until n waiters of c on key sit between attempts.
func waitIdle(t *testing.T, c *redlock.Client, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for redlock.IdleWaiters(c, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle waiters on %q, want %d", redlock.IdleWaiters(c, key), key, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRelease_wakesWaiterMarkedOnOtherNodes: a waiter of one Client finds
// the key taken on node 0 only, its attempts on nodes 1 and 2 lost before
// they are sent (under a marking release, only node 0 carries its mark).
// The holder's release (another Client) then fails on node 0 and frees
// nodes 1 and 2, a quorum: the waiter must be woken. (The waiter's
// attempts on nodes 1 and 2 fail until the holder's release is about to
// be sent there.)
func TestRelease_wakesWaiterMarkedOnOtherNodes(t *testing.T) {
	_, nodes := hookableNodes(t, 3)
	ctx := context.Background()
	key := keyFor(t)
	hcs, hn := ownClients(t, nodes)
	wcs, wn := ownClients(t, nodes)
	holders := newClient(t, hn, redlock.WithTTL(time.Minute))
	waiters := newClient(t, wn, redlock.WithTTL(time.Minute), redlock.WithBackoff(time.Minute, time.Minute))
	h := holders.NewLock(key)
	must(t, "holder Acquire()", h.Acquire(ctx))

	lost := []*failScript{failOn(t, wcs[1], luascripts.Acquire), failOn(t, wcs[2], luascripts.Acquire)}
	for i, f := range lost {
		f.on.Store(true)
		// The holder's release on node i+1 lets the waiter's attempts
		// through before it is sent.
		reach := failOn(t, hcs[i+1], luascripts.Release)
		reach.pass = func() {
			for _, f := range lost {
				f.on.Store(false)
			}
		}
		reach.on.Store(true)
	}
	w := waiters.NewLock(key)
	done := make(chan error, 1)
	go func() { done <- w.Acquire(ctx) }()
	// Each node's confirmation of the waiters' subscription wakes the
	// waiter for one more attempt: wait for all three, then for the
	// attempts they caused (a confirmation read after this still makes one
	// attempt more, which, if it ran after the release, would take the key
	// without a wake-up: the test may then pass on a broken release).
	channel := lockKey(key) + ":notify"
	for i, rdb := range nodes {
		for deadline := time.Now().Add(10 * time.Second); rdb.PubSubNumSub(ctx, channel).Val()[channel] == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: waiters never subscribed", i)
			}
		}
	}
	waitIdle(t, waiters, key, 1)

	failOn(t, hcs[0], luascripts.Release).on.Store(true)
	_ = h.Release(ctx) // frees nodes 1 and 2; node 0's call is lost
	select {
	case err := <-done:
		must(t, "waiter Acquire()", err)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken within 5s of a release that freed a quorum")
	}
	must(t, "waiter Release()", w.Release(ctx))
}
