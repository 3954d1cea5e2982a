package redistest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentlock/lock/internal/redistest"
)

// eventually retries f every 100ms until it returns nil or ctx ends.
func eventually(ctx context.Context, f func() error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func TestCluster_setGetAndFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := redistest.StartCluster(t, 3, 1)
	t.Logf("6-node cluster ready in %v", time.Since(start))
	if got := len(c.Nodes()); got != 6 {
		t.Fatalf("len(Nodes()) = %d, want 6", got)
	}
	ctx := ctxT(t, 40*time.Second)
	rdb := c.Client(t)

	// Keys until every master serves one: they lie in different slots.
	owners := map[*redistest.Server]string{}
	for i := 0; len(owners) < 3 && i < 100; i++ {
		key := fmt.Sprintf("%s:%d", t.Name(), i)
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("MasterForKey(%q) error = %v", key, err)
		}
		owners[m] = key
	}
	if len(owners) != 3 {
		t.Fatalf("keys reached %d masters, want 3", len(owners))
	}
	for m, key := range owners {
		if err := rdb.Set(ctx, key, m.Addr(), 0).Err(); err != nil {
			t.Fatalf("Set(%q) error = %v", key, err)
		}
		direct := m.Client(t)
		if got, err := direct.Get(ctx, key).Result(); err != nil || got != m.Addr() {
			t.Fatalf("Get(%q) on its master = %q, %v; want %q", key, got, err, m.Addr())
		}
	}

	var master *redistest.Server
	for m := range owners {
		master = m
		break
	}
	key := owners[master]
	reps, err := c.ReplicaOf(master)
	if err != nil || len(reps) != 1 {
		t.Fatalf("ReplicaOf() = %v, %v; want one replica", reps, err)
	}
	start = time.Now()
	promoted, err := c.KillMasterAndWaitFailover(ctx, master)
	if err != nil {
		t.Fatalf("KillMasterAndWaitFailover() error = %v", err)
	}
	t.Logf("cluster failover took %v", time.Since(start))
	if !slices.Contains(reps, promoted) || promoted == master {
		t.Fatalf("KillMasterAndWaitFailover() = %s, want the replica %s", promoted.Addr(), reps[0].Addr())
	}
	if m, err := c.MasterForKey(ctx, key); err != nil || m != promoted {
		t.Fatalf("MasterForKey() after failover = %v, %v; want %s", m, err, promoted.Addr())
	}
	err = eventually(ctx, func() error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := rdb.Set(actx, key, "after", 0).Err(); err != nil {
			return err
		}
		got, err := rdb.Get(actx, key).Result()
		if err == nil && got != "after" {
			err = fmt.Errorf("Get() = %q, want %q", got, "after")
		}
		return err
	})
	if err != nil {
		t.Fatalf("Set/Get through the cluster client after failover: %v", err)
	}
	t.Logf("cluster client wrote again %v after the kill", time.Since(start))
}

func TestStartClusterNodes_tooFewMasters(t *testing.T) {
	t.Parallel()
	if _, err := redistest.StartClusterNodes(2, 0); err == nil {
		t.Fatal("StartClusterNodes(2, 0) error = nil, want an error")
	}
}
