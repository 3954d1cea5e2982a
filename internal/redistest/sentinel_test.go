package redistest_test

import (
	"testing"
	"time"

	"github.com/agentlock/lock/internal/redistest"
)

func TestSentinel_failover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	sn := redistest.StartSentinel(t, 1, 3)
	t.Logf("sentinel setup ready in %v", time.Since(start))
	ctx := ctxT(t, 40*time.Second)

	if got := len(sn.SentinelAddrs()); got != 3 {
		t.Fatalf("len(SentinelAddrs()) = %d, want 3", got)
	}
	old, err := sn.CurrentMaster(ctx)
	if err != nil || old != sn.Master().Addr() {
		t.Fatalf("CurrentMaster() = %q, %v; want %q", old, err, sn.Master().Addr())
	}
	rdb := sn.Client(t)
	if err := rdb.Set(ctx, t.Name(), "before", 0).Err(); err != nil {
		t.Fatalf("Set() error = %v", err)
	}

	start = time.Now()
	addr, err := sn.KillMasterAndWaitFailover(ctx)
	if err != nil {
		t.Fatalf("KillMasterAndWaitFailover() error = %v", err)
	}
	t.Logf("sentinel failover took %v", time.Since(start))
	if addr == old || addr != sn.Replicas()[0].Addr() {
		t.Fatalf("KillMasterAndWaitFailover() = %q, want the replica %q", addr, sn.Replicas()[0].Addr())
	}
	err = eventually(ctx, func() error { return rdb.Set(ctx, t.Name(), "after", 0).Err() })
	if err != nil {
		t.Fatalf("Set() through the failover client after failover: %v", err)
	}
	t.Logf("failover client wrote again %v after the kill", time.Since(start))
	got, err := sn.Replicas()[0].Client(t).Get(ctx, t.Name()).Result()
	if err != nil || got != "after" {
		t.Fatalf("Get() on the new master = %q, %v; want %q", got, err, "after")
	}
}
