package lease

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/redistest"
)

// TestNotifier_subscribe_retriedWithoutJoin: a subscribe that no source
// took (none at hand, as while a cluster Client has not yet decided on
// sharded pub/sub) is tried again in the background while its waiter
// waits: the subscription is confirmed, and the confirmation wakes the
// waiter, without another join.
func TestNotifier_subscribe_retriedWithoutJoin(t *testing.T) {
	e, rdb, asked := engineFirstSubscribeFails(t)
	n := &e.Notifier
	const channel = "lock:{k}:notify"

	w, ready := n.join(channel, &Handle{pol: &Policy{}}, nil, "a", false)
	if w == nil || ready {
		t.Fatalf("join() = %v, %v; want a waiter, not ready", w, ready)
	}
	defer w.leave()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case <-w.wake():
	case <-timeout.C:
		t.Fatalf("waiter not woken 10s after its join: sources asked %d times, listening %v; want the subscribe tried again and confirmed",
			asked.Load(), n.Listening(channel))
	}
	if !n.Listening(channel) {
		t.Fatal("waiter woken, but the channel's subscription is not confirmed")
	}
	// The subscription is live: a message published now wakes the waiter
	// (MsgAll: this one is still owed the confirmation's wake-up).
	if err := rdb.Publish(context.Background(), channel, MsgAll).Err(); err != nil {
		t.Fatalf("PUBLISH: %v", err)
	}
	timeout.Reset(10 * time.Second)
	select {
	case <-w.wake():
	case <-timeout.C:
		t.Fatal("waiter not woken by a message on its confirmed subscription")
	}
}

// TestNotifier_subscribe_retryEnds: a subscribe that no source takes is
// tried again, after growing pauses, while its channel has waiters; a join
// meanwhile makes it try at once. It stops, leaving the channel
// unsubscribed for the next join, when the last waiter leaves, and at
// Close, which it does not outlive.
func TestNotifier_subscribe_retryEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked atomic.Int32
		var e Engine
		e.Init(func(string) []Source {
			asked.Add(1)
			return nil
		}, nil)
		n := &e.Notifier
		const channel = "lock:{k}:notify"
		hd := &Handle{pol: &Policy{}}
		subscribed := func() bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.chans[channel].subscribed
		}

		a, _ := n.join(channel, hd, nil, "a", false)
		time.Sleep(retryMax)
		synctest.Wait()
		if got := asked.Load(); got < 3 {
			t.Fatalf("subscribe tried %d times in %v with a waiter, want at least 3", got, retryMax)
		}
		before := asked.Load()
		b, _ := n.join(channel, hd, nil, "b", false)
		synctest.Wait()
		if got := asked.Load(); got != before+1 {
			t.Fatalf("a join made the waiting subscribe try %d times at once, want 1", got-before)
		}

		a.leave()
		b.leave()
		time.Sleep(retryMax)
		synctest.Wait()
		before = asked.Load()
		time.Sleep(10 * retryMax)
		synctest.Wait()
		if got := asked.Load(); got != before || subscribed() {
			t.Fatalf("with no waiter left: subscribe tried %d times more, subscribed %v; want it stopped, unsubscribed", got-before, subscribed())
		}

		c, _ := n.join(channel, hd, nil, "c", false)
		synctest.Wait()
		if got := asked.Load(); got != before+1 || !subscribed() {
			t.Fatalf("the next join: subscribe tried %d times, subscribed %v; want once, waiting to try again", got-before, subscribed())
		}
		done := make(chan struct{})
		go func() {
			n.wg.Wait()
			close(done)
		}()
		e.Close(nil)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the subscribe waiting to try again outlived Close")
		}
		c.leave()
	})
}

// TestNotifier_subscribe_shardedReaderWaits: a sharded subscription's
// reader (run) does not connect its PubSub before the first SSUBSCRIBE,
// which then goes to the slot's master. go-redis connects a PubSub that
// has no channel yet to a random node: a replica of the slot's master
// takes the SSUBSCRIBE there (the master counts no subscriber), another
// master refuses it with MOVED. Here the cluster client knows only that
// replica, so such a connection would go there.
func TestNotifier_subscribe_shardedReaderWaits(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	channel := "lock:{" + t.Name() + "}:notify"
	master, err := cl.MasterForKey(ctx, channel)
	if err != nil {
		t.Fatalf("MasterForKey(): %v", err)
	}
	replicas, err := cl.ReplicaOf(master)
	if err != nil || len(replicas) == 0 {
		t.Fatalf("ReplicaOf(%s) = %v, %v; want a replica", master.Addr(), replicas, err)
	}
	readerDialed := make(chan struct{}, 1)
	opt := cl.ClusterOptions()
	opt.Addrs = []string{replicas[0].Addr()}
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		buf := make([]byte, 16<<10)
		if strings.Contains(string(buf[:runtime.Stack(buf, false)]), "lease.(*Notifier).run(") {
			select {
			case readerDialed <- struct{}{}:
			default:
			}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	cc := redis.NewClusterClient(opt)
	defer cc.Close()
	src := SlotSource{Client: cc, Slot: int(cc.ClusterKeySlot(ctx, channel).Val())}
	var e Engine
	e.Init(func(string) []Source { return []Source{src} }, nil)
	defer e.Close(nil)
	n := &e.Notifier
	waits := make(chan struct{})
	n.readerWaits = func() { close(waits) }

	n.subscription(src) // its reader starts; no subscribe yet
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case <-waits:
	case <-readerDialed:
		t.Fatal("the reader connected the sharded PubSub before its first SSUBSCRIBE")
	case <-timeout.C:
		t.Fatal("the reader neither waits for the first subscribe nor connects, 10s after it started")
	}
	w, _ := n.join(channel, &Handle{pol: &Policy{}}, nil, "a", false)
	defer w.leave()
	select {
	case <-w.wake():
	case <-timeout.C:
		t.Fatal("subscription not confirmed within 10s")
	}
	for node, want := range map[*redistest.Server]int64{master: 1, replicas[0]: 0} {
		rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
		subs, err := rdb.PubSubShardNumSub(ctx, channel).Result()
		_ = rdb.Close()
		if err != nil || subs[channel] != want {
			t.Fatalf("PUBSUB SHARDNUMSUB on %s = %v, %v; want %d (master %s)", node.Addr(), subs, err, want, master.Addr())
		}
	}
}

// TestNotifier_releasedPassesOverClaimedWaiters: a "released" message wakes
// the longest-waiting waiter that is neither owed a wake-up nor being
// handed a hold by a release of this process (claimed, or its gift
// waiting): such a waiter takes that hold or is told to try by Settle, and
// the message, given to it, would wake nobody.
func TestNotifier_releasedPassesOverClaimedWaiters(t *testing.T) {
	for _, state := range []int{waiterClaimed, waiterGifted} {
		n := &Notifier{chans: map[string]*channelState{}}
		cs := &channelState{name: "c"}
		n.chans["c"] = cs
		handed := &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1), state: state}
		next := &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1)}
		cs.waiters = []*Waiter{handed, next}
		n.deliver("c", MsgReleased)
		if handed.owed || len(handed.ch) != 0 {
			t.Fatalf("state %d: the waiter being handed a hold took the wake-up", state)
		}
		if !next.owed || len(next.ch) != 1 {
			t.Fatalf("state %d: the next idle waiter was not woken", state)
		}
	}
}

// engineFirstSubscribeFails returns an Engine over a miniredis server whose
// first subscribe finds no source (as while a cluster Client has not yet
// decided on sharded pub/sub), the client of that server, and the count of
// times the Engine asked for sources. The Engine closes with the test.
func engineFirstSubscribeFails(t *testing.T) (*Engine, *redis.Client, *atomic.Int32) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	asked := new(atomic.Int32)
	e := new(Engine)
	e.Init(func(string) []Source {
		if asked.Add(1) == 1 {
			return nil // the first subscribe finds no source
		}
		return []Source{rdb}
	}, nil)
	t.Cleanup(func() { e.Close(nil) })
	return e, rdb, asked
}
