package lock_test

import (
	"context"
	"testing"

	lock "github.com/agentlock/lock"
)

// TestFence_restartAgreesAcrossReleaseModes: a counter restarts at the
// same point past the server's clock in both release modes, so clients of
// both on one key keep its fences increasing when the counter is lost
// between them, in either order.
func TestFence_restartAgreesAcrossReleaseModes(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		for _, modes := range [][2]lock.ReleaseMode{{lock.ReleaseScript, lock.ReleaseWatch}, {lock.ReleaseWatch, lock.ReleaseScript}} {
			first := modes[0]
			key := keyFor(t) + ":" + first.String()
			var last int64
			for i, mode := range modes {
				l := newClient(t, tg.rdb, lock.WithReleaseMode(mode)).NewLock(key)
				must(t, "Acquire()", l.Acquire(ctx))
				if l.Fence() <= last {
					t.Fatalf("%v after %v, counter lost between them: fence %d after %d, want larger", mode, first, l.Fence(), last)
				}
				last = l.Fence()
				must(t, "Release()", l.Release(ctx))
				if i == 0 {
					must(t, "DEL fence", tg.rdb.Del(ctx, fenceKey(key)).Err())
				}
			}
		}
	})
}
