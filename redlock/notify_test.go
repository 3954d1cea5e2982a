package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
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
