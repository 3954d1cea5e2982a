package redlock_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

// Close returns promptly while a waiter's subscription is connecting to a
// stopped node (go-redis holds the subscription's mutex across the dial and
// handshake, and with ReadTimeout -1 would hold it until the node resumes).
func TestClient_Close_subscribingToStoppedNode(t *testing.T) {
	ss, nodes := realNodes(t, 3)
	stuck := redis.NewClient(&redis.Options{Addr: ss[2].Addr(), MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { stuck.Close() })
	nodes[2] = stuck
	key := keyFor(t)
	setOther(t, nodes[0], key)
	setOther(t, nodes[1], key)
	must(t, "Pause()", ss[2].Pause())
	resume := func() { ss[2].Resume() }
	t.Cleanup(resume)

	c := redlock.New(nodes, redlock.WithBackoff(time.Second, time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acquired := make(chan error, 1)
	go func() { acquired <- c.NewLock(key).Acquire(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for stuck.PoolStats().PubSubStats.Created == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not start subscribing to the stopped node")
		}
		time.Sleep(5 * time.Millisecond)
	}

	closed := make(chan struct{})
	start := time.Now()
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Second):
		resume()
		<-closed
		<-acquired
		t.Fatalf("Close() blocked %v while subscribing to a stopped node", time.Since(start))
	}
	t.Logf("Close() took %v with a subscription connecting to a stopped node", time.Since(start))
	wantIs(t, "Acquire() ended by Close", <-acquired, lock.ErrClosed)
}

// TestRelease_wakesWaiterWhileFirstNodeStopped: node 0, first in the list,
// is SIGSTOPped, and the waiters' client for it waits for ever for a reply
// (ReadTimeout -1), so their subscription there never completes. Releases
// published on the two healthy nodes must still wake the waiters of each
// key, a key waited on after the first one included. The waiters' backoff
// and the holder's TTL are a minute, so that nothing but a message can
// start their next attempt; each release causes one attempt per healthy
// node's message at most.
func TestRelease_wakesWaiterWhileFirstNodeStopped(t *testing.T) {
	ss, nodes := hookableNodes(t, 3)
	ctx := context.Background()
	wcs, wn := ownClients(t, nodes)
	stuck := redis.NewClient(&redis.Options{Addr: ss[0].Addr(), MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { stuck.Close() })
	wn[0] = stuck
	must(t, "Pause()", ss[0].Pause())
	t.Cleanup(func() { ss[0].Resume() })

	_, hn := ownClients(t, nodes)
	holders := newClient(t, hn, redlock.WithTTL(time.Minute))
	attempts := hookScript(t, wcs[1], luascripts.Acquire, false, func(int) bool { return false })
	waiters := newClient(t, wn, redlock.WithTTL(time.Minute), redlock.WithBackoff(time.Minute, time.Minute))

	keys := []string{keyFor(t) + ":a", keyFor(t) + ":b"}
	held := make([]*redlock.Lock, len(keys))
	done := make([]chan error, len(keys))
	for i, key := range keys {
		held[i] = holders.NewLock(key)
		must(t, "holder Acquire()", held[i].Acquire(ctx))
		done[i] = make(chan error, 1)
		w := waiters.NewLock(key)
		go func() {
			err := w.Acquire(ctx)
			if err == nil {
				err = w.Release(ctx)
			}
			done[i] <- err
		}()
		// Both healthy nodes' confirmations read (each wakes the waiter for
		// one more attempt), and those attempts made.
		for deadline := time.Now().Add(10 * time.Second); redlock.Confirmations(waiters, key) < 2; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("key %d: %d confirmations of the waiter's subscription while node 0 is stopped, want 2 (nodes 1 and 2)",
					i, redlock.Confirmations(waiters, key))
			}
		}
		waitIdle(t, waiters, key, 1)
	}

	for i := range keys {
		before := attempts.calls.Load()
		must(t, "holder Release()", held[i].Release(ctx))
		select {
		case err := <-done[i]:
			must(t, "waiter Acquire() and Release()", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("key %d: waiter not woken within 10s of a release published on the healthy nodes (backoff 1m)", i)
		}
		// Woken by the messages alone: one attempt per healthy node's
		// message at most (an attempt woken by node 1's may find node 2
		// still held, and node 2's message then starts the second); its
		// Release is not an acquire call.
		if n := attempts.calls.Load() - before; n < 1 || n > 2 {
			t.Fatalf("key %d: attempts after the release = %d, want 1 or 2 (one per healthy node's message)", i, n)
		}
	}

	// Node 0 answers again: the subscriptions it held up complete there.
	must(t, "Resume()", ss[0].Resume())
	for i, key := range keys {
		channel := lockKey(key) + ":notify"
		for deadline := time.Now().Add(10 * time.Second); nodes[0].PubSubNumSub(ctx, channel).Val()[channel] == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("key %d: not subscribed on node 0 10s after it resumed", i)
			}
		}
	}
}

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
