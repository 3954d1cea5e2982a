package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// newRing returns a *redis.Ring over the given servers, closed at cleanup.
func newRing(t *testing.T, servers ...*redistest.Server) *redis.Ring {
	t.Helper()
	addrs := map[string]string{}
	for i, s := range servers {
		addrs[fmt.Sprintf("shard%d", i)] = s.Addr()
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	t.Cleanup(func() { ring.Close() })
	return ring
}

// closeWithin fails the test unless c.Close returns within 10s.
func closeWithin(t *testing.T, c *lock.Client) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	must(t, "Close()", recv(t, done, "Close"))
}

// TestNotify_ringWakesWaiters: on a *redis.Ring of two real servers, for a
// key on each shard, a waiter in another Client is woken by the release's
// publish (its backoff is a minute), a waiter of the same Client is handed
// the hold, and Close returns: no panic, no hang.
func TestNotify_ringWakesWaiters(t *testing.T) {
	s1, s2 := redistest.Start(t, redistest.Config{}), redistest.Start(t, redistest.Config{})
	ring := newRing(t, s1, s2)
	ctx := context.Background()
	// One key on each shard.
	byShard := map[string]string{}
	for i := 0; len(byShard) < 2; i++ {
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		shard, err := ring.GetShardClientForKey(lockKey(key))
		must(t, "GetShardClientForKey()", err)
		if _, ok := byShard[shard.Options().Addr]; !ok {
			byShard[shard.Options().Addr] = key
		}
	}
	holders := newClient(t, ring)
	others := newClient(t, newRing(t, s1, s2)) // another process's Client
	for addr, key := range byShard {
		holder := holders.NewLock(key)
		must(t, "Acquire()", holder.Acquire(ctx))

		// Woken by the publish, on the shard the key lives on.
		waiter := others.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		done := startAcquire(t, others, waiter, 1)
		must(t, "Release()", holder.Release(ctx))
		must(t, "other Client's waiter Acquire()", recv(t, done, "waiter woken by the publish"))
		direct := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { direct.Close() })
		wantHeldBy(t, direct, waiter, "the key's shard "+addr)

		// Handed over to a waiter of the same Client.
		next := others.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		done = startAcquire(t, others, next, 1)
		must(t, "Release()", waiter.Release(ctx))
		must(t, "same Client's waiter Acquire()", recv(t, done, "waiter handed the hold"))
		must(t, "Release()", next.Release(ctx))
	}
	closeWithin(t, holders)
	closeWithin(t, others)
}

// panicSubscribe is a redis.UniversalClient whose Subscribe panics, as a
// *redis.Ring's does when asked for no channel.
type panicSubscribe struct{ *redis.Client }

func (panicSubscribe) Subscribe(context.Context, ...string) *redis.PubSub {
	panic("subscribe: no channel")
}

// TestNotify_subscribePanicLeavesBackoff: a client whose Subscribe panics
// costs waiters their wake-ups, nothing more: Acquire does not panic, the
// waiter gets the lock by its backoff once another Client frees it, and
// Close does not hang on a lock the panic left held.
func TestNotify_subscribePanicLeavesBackoff(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holders := newClient(t, tg.rdb)
	c := newClient(t, panicSubscribe{tg.newRDB(t)}, lock.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	for i := range 2 { // the second join opens the subscription again
		holder := holders.NewLock(key)
		must(t, "holder Acquire()", holder.Acquire(ctx))
		waiter := c.NewLock(key)
		done := make(chan any, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("Acquire() panicked: %v", r)
				}
			}()
			done <- waiter.Acquire(ctx)
		}()
		waitIdle(t, c, key, 1) // it failed, tried to listen, and sleeps
		must(t, "holder Release()", holder.Release(ctx))
		if err, _ := recv(t, done, "waiter Acquire").(error); err != nil {
			t.Fatalf("round %d: waiter: %v", i, err)
		}
		must(t, "waiter Release()", waiter.Release(ctx))
	}
	closeWithin(t, c)
}
