package lock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// renewalsSeen returns an Observer option and a channel that receives one
// value per renewal the Client confirms.
func renewalsSeen() (lock.Option, <-chan struct{}) {
	ch := make(chan struct{}, 100)
	return lock.WithObserver(lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventRenewed {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})), ch
}

// forceEntryFence force-releases key through op and returns the fence of
// the audit entry "force-released" the script wrote on stream.
func forceEntryFence(t *testing.T, tg *target, op *lock.Client, stream, key string) string {
	t.Helper()
	ctx := context.Background()
	must(t, "ForceRelease()", op.ForceRelease(ctx, key))
	xs, err := tg.rdb.XRange(ctx, stream, "-", "+").Result()
	must(t, "XRANGE", err)
	for _, x := range xs {
		if x.Values["event"] == "force-released" {
			return x.Values["fence"].(string)
		}
	}
	t.Fatalf("no force-released entry on %s: %v", stream, xs)
	return ""
}

// TestAudit_forceRelease_fenceOfLongHold: a mutex held past its fence
// counter's own lifetime (FenceTTL from the counter's creation; here cut
// short to half the TTL, as an older counter would have) keeps its counter
// alive with every renewal, so the force-released entry carries the hold's
// own fence, not 0; in either release mode (a ReleaseWatch renewal is a
// WATCH/MULTI, no script).
func TestAudit_forceRelease_fenceOfLongHold(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
		t.Run(mode.String(), func(t *testing.T) { longHoldFence(t, tg, mode) })
	}
}

// longHoldFence is TestAudit_forceRelease_fenceOfLongHold in one mode.
func longHoldFence(t *testing.T, tg *target, mode lock.ReleaseMode) {
	ctx := context.Background()
	stream := keyFor(t) + ":audit"
	key := keyFor(t)
	ttl := 900 * time.Millisecond
	obs, renewed := renewalsSeen()
	c := newClient(t, tg.newRDB(t), lock.WithTTL(ttl), obs, lock.WithReleaseMode(mode))
	op := newClient(t, tg.newRDB(t), lock.WithAudit(stream, 100))
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "PEXPIRE counter", tg.rdb.PExpire(ctx, lockKey(key)+":fence", ttl/2).Err())
	// Two renewals: the second comes at 2/3 of the TTL (less the early
	// send of TTL/12), past the counter's cut-short life.
	for range 2 {
		select {
		case <-renewed:
		case <-time.After(10 * time.Second):
			t.Fatal("no renewal within 10s")
		}
	}
	if got, want := forceEntryFence(t, tg, op, stream, key), strconv.FormatInt(l.Fence(), 10); got != want {
		t.Fatalf("force-released entry fence = %s, want the hold's %s", got, want)
	}
}
