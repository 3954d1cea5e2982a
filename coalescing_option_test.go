package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestOptions_coalescingOffPerLock: a lock given WithCoalescing(false) on
// a Client that coalesces sends on its own: with every send slot of the
// Client's coalescer held (slotFiller), each kind still acquires and
// releases, and nothing of it queues behind the slots.
func TestOptions_coalescingOffPerLock(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	rdb := tg.newRDB(t)
	f := &slotFiller{open: make(chan struct{})}
	rdb.AddHook(f)
	c := newClient(t, rdb, lock.WithLogger(nil))
	var fillers sync.WaitGroup
	defer fillers.Wait()
	openFiller := sync.OnceFunc(func() { close(f.open) })
	defer openFiller()
	t.Cleanup(openFiller)
	for i := range lock.CoalescerLimit() {
		l := c.NewLock(fmt.Sprintf("filler:%s:%d", keyFor(t), i))
		fillers.Go(func() { _, _ = l.TryAcquire(context.Background()) })
	}
	if !waitFor(5*time.Second, func() bool { out, _, _ := lock.CoalescerLoad(c); return out == lock.CoalescerLimit() }) {
		t.Fatal("send slots not filled")
	}
	for _, k := range matrixKinds {
		t.Run(k.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			opts := []lock.Option{lock.WithCoalescing(false)}
			if k.name == "limiter" {
				opts = nil // refused there: a limiter's calls never coalesce
			}
			h := k.hold(t, c, keyFor(t), opts...)
			if err := h.Acquire(ctx); err != nil {
				_, q, _ := lock.CoalescerLoad(c)
				t.Fatalf("Acquire() with WithCoalescing(false) while the coalescer's slots are held = %v (%d queued)", err, q)
			}
			must(t, "Release()", h.Release(ctx))
		})
	}
}
