package lock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// TestFence_restartAgreesAcrossReleaseModes: a counter restarts at the
// same point past the server's clock in both release modes, so clients of
// both on one key keep its fences increasing when the counter is lost
// between them, in either order.
func TestFence_restartAgreesAcrossReleaseModes(t *testing.T) {
	t.Parallel()
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

// TestFence_counterOutlivesLongHold: a fencing hold with a TTL longer than
// a counter's own life (FenceTTL) gives the counter its TTL at the acquire,
// in either release mode, and a first acquire (the counter restarted) as
// much as a later one: the counter holds the hold's fence as long as the
// hold lasts, renewed or not.
func TestFence_counterOutlivesLongHold(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	ttl := 2 * luascripts.FenceTTL
	for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
		key := keyFor(t) + ":" + mode.String()
		c := newClient(t, tg.rdb, lock.WithReleaseMode(mode), lock.WithTTL(ttl))
		for _, when := range []string{"first", "later"} {
			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			// One MULTI: both TTLs read at one instant.
			var held, left *redis.DurationCmd
			_, err := tg.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				held, left = p.PTTL(ctx, lockKey(key)), p.PTTL(ctx, fenceKey(key))
				return nil
			})
			must(t, "PTTL", err)
			if left.Val() < held.Val() {
				t.Errorf("%v, %s acquire: counter's TTL %v, hold's %v: the counter expires first", mode, when, left.Val(), held.Val())
			}
			must(t, "Release()", l.Release(ctx))
		}
	}
}
