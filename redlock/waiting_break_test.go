package redlock_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

// failScript is a go-redis hook that, while on, fails every EVALSHA of one
// script without sending it, as a connection lost before the write would.
type failScript struct {
	sha string
	on  atomic.Bool
}

func failOn(t *testing.T, rdb *redis.Client, s *redis.Script) *failScript {
	t.Helper()
	f := &failScript{sha: s.Hash()}
	rdb.AddHook(f)
	return f
}

func (f *failScript) hit(cmds ...redis.Cmder) bool {
	if !f.on.Load() {
		return false
	}
	for _, c := range cmds {
		if a := c.Args(); len(a) >= 2 && c.Name() == "evalsha" && a[1] == f.sha {
			return true
		}
	}
	return false
}

func (f *failScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.hit(cmd) {
			cmd.SetErr(io.EOF)
			return io.EOF
		}
		return next(ctx, cmd)
	}
}

func (f *failScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if f.hit(cmds...) {
			for _, c := range cmds {
				c.SetErr(io.EOF)
			}
			return io.EOF
		}
		return next(ctx, cmds)
	}
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

// TestRelease_wakesWaiterMarkedOnOtherNodes: a waiter of one Client found
// the key taken on node 0 only, its attempts on nodes 1 and 2 lost before
// they were sent, so only node 0 carries its mark. The holder's release
// (another Client) then fails on node 0 and frees nodes 1 and 2, a quorum:
// the waiter must be woken, though neither freed node had its mark.
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
	for _, f := range lost {
		f.on.Store(true)
	}
	w := waiters.NewLock(key)
	done := make(chan error, 1)
	go func() { done <- w.Acquire(ctx) }()
	waitIdle(t, waiters, key, 1)
	for _, f := range lost {
		f.on.Store(false)
	}
	for i, rdb := range nodes {
		want := int64(0)
		if i == 0 {
			want = 1
		}
		if n := rdb.Exists(ctx, lockKey(key)+":notify").Val(); n != want {
			// Another design (no marks, marks kept) has no such window:
			// only the outcome is checked then.
			t.Logf("node %d: %d marks, want %d: no window to open", i, n, want)
		}
	}

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
