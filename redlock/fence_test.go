package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/redlock"
)

// TestLock_Fence_increasesAfterEmptyNodeWithFastAcquirer: an acquirer P
// whose clock runs ahead takes the key on every node, and its acquire
// names a restart value 2s past the servers' clocks (what a library that
// sent its own clock plus a second as a hint sent from a clock a second
// fast: the skew is injected as that value). P releases. H1 then holds on
// {A, B} (C is busy) and releases; B loses its data and A refuses (held
// by another), so H2 holds on {B, C}. H2's fence must be above H1's,
// whatever P's clock said: a restarted counter starts from its server's
// clock alone.
func TestLock_Fence_increasesAfterEmptyNodeWithFastAcquirer(t *testing.T) {
	_, nodes := realNodes(t, 3)
	ctx := context.Background()
	key := keyFor(t)
	keys := luascripts.NewKeys(redlock.DefaultPrefix, key)
	c := newClient(t, nodes, redlock.WithTTL(time.Minute))

	now, err := nodes[0].Time(ctx).Result()
	must(t, "TIME", err)
	ahead := now.Add(luascripts.FenceStartAhead).UnixMicro()
	for i, rdb := range nodes {
		v, err := luascripts.Acquire.Run(ctx, rdb, keys.AcquireKeys(), "fast-acquirer", 60000, "0", "1", ahead).Int64()
		if ours, _, _ := luascripts.AcquireReply(v); err != nil || !ours {
			t.Fatalf("node %d: P's acquire = %d, %v; want the key", i, v, err)
		}
		delKey(t, rdb, key)
	}

	setOther(t, nodes[2], key)
	h1 := c.NewLock(key)
	must(t, "H1 Acquire()", h1.Acquire(ctx))
	must(t, "H1 Release()", h1.Release(ctx))
	delKey(t, nodes[2], key)

	must(t, "FLUSHALL on B (restarted empty)", nodes[1].FlushAll(ctx).Err())
	setOther(t, nodes[0], key)
	h2 := c.NewLock(key)
	must(t, "H2 Acquire()", h2.Acquire(ctx))
	t.Logf("P's restart value %d, H1's fence %d, H2's fence %d", ahead, h1.Fence(), h2.Fence())
	if h2.Fence() <= h1.Fence() {
		t.Fatalf("H2's fence %d after H1's %d, want larger", h2.Fence(), h1.Fence())
	}
	must(t, "H2 Release()", h2.Release(ctx))
}
