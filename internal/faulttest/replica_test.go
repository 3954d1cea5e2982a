package faulttest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// startReplicated starts a master and one replica of it, linked through a
// toxiproxy proxy (so the link can be cut), and waits until the replica's
// link is up.
func startReplicated(t *testing.T) (master, replica *redistest.Server, link *toxiproxy.Proxy) {
	t.Helper()
	master = redistest.Start(t, redistest.Config{})
	link = startProxy(t, master.Addr())
	_, port, _ := net.SplitHostPort(link.Listen)
	replica = redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	rc := replica.Client(t)
	ok := waitFor(t, 10*time.Second, func() bool {
		info, err := rc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	if !ok {
		t.Fatalf("replica %s never linked to %s", replica.Addr(), master.Addr())
	}
	return master, replica, link
}

func lockKey(key string) string { return lock.DefaultPrefix + "{" + key + "}" }

// TestReplicaAck_WAIT checks WithReplicaAck against a real replica: an
// acknowledged acquire is on the replica; with the replication link cut,
// or with more acks asked than replicas exist, the acquisition fails with
// ErrNotAcquired and leaves no lock behind. Without acks, the same cut link
// shows the loss: the master acknowledges a lock, dies, the replica
// is promoted without it, and a second client is granted the same lock.
func TestReplicaAck_WAIT(t *testing.T) {
	master, replica, link := startReplicated(t)
	mc, rc := master.Client(t), replica.Client(t)
	locks := lock.NewClient(mc, lock.WithTTL(10*time.Second))
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// 1. Acknowledged: the replica has the hold when Acquire returns.
	l := locks.NewLock("ack-ok", lock.WithReplicaAck(1, time.Second))
	start := time.Now()
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() with a live replica: %v", err)
	}
	ackOK := time.Since(start)
	if v, err := rc.Get(ctx, lockKey("ack-ok")).Result(); err != nil || v != l.Token() {
		t.Errorf("replica has %q, %v; want the token at once", v, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release() error = %v", err)
	}

	// 2. More acks than replicas: fails, nothing left behind.
	l2 := locks.NewLock("ack-two", lock.WithReplicaAck(2, 200*time.Millisecond))
	if ok, err := l2.TryAcquire(ctx); ok || !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryAcquire() with 2 acks and 1 replica = %v, %v; want false, ErrNotAcquired", ok, err)
	}
	if n, _ := mc.Exists(ctx, lockKey("ack-two")).Result(); n != 0 {
		t.Errorf("failed acked acquire left the lock key behind")
	}

	// 3. Replication link cut: acked acquisitions fail within the ack
	// timeout.
	addToxic(t, link, "cut-up", "timeout", "upstream", `{"timeout":0}`)
	addToxic(t, link, "cut-down", "timeout", "downstream", `{"timeout":0}`)
	l3 := locks.NewLock("ack-paused", lock.WithReplicaAck(1, 300*time.Millisecond))
	start = time.Now()
	err := l3.Acquire(ctx)
	ackFail := time.Since(start)
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("Acquire() with the replica paused: %v, want ErrNotAcquired", err)
	}
	if n, _ := mc.Exists(ctx, lockKey("ack-paused")).Result(); n != 0 {
		t.Errorf("failed acked acquire left the lock key behind")
	}

	// 4. Without acks the master grants it; kill the master before the
	// replica sees the write, promote the replica: the grant is gone.
	l4 := locks.NewLock("no-ack")
	if err := l4.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() without acks: %v", err)
	}
	master.Kill()
	if err := rc.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatalf("REPLICAOF NO ONE: %v", err)
	}
	promoted := lock.NewClient(rc, lock.WithTTL(10*time.Second))
	defer promoted.Close()
	second := promoted.NewLock("no-ack")
	ok, err := second.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire() on the promoted replica: %v", err)
	}
	select {
	case <-l4.Lost():
	default:
	}
	figure(t, "replica_ack", "acked_acquire_ms", ackOK.Milliseconds(), "cut_link_fail_after_ms", ackFail.Milliseconds(),
		"ack_timeout_ms", 300, "unacked_granted_twice_after_promotion", ok,
		"lost_hold_fence", l4.Fence(), "second_holder_fence", second.Fence())
	if !ok {
		t.Errorf("second TryAcquire on the promoted replica = false: the unreplicated grant survived?")
	}
	if ok {
		_ = second.Release(ctx)
	}
	_ = l4.Release(ctx)
}
