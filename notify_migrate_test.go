package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// setMigrating puts slot in the middle of a move from from to to, as
// redis-cli --cluster reshard does before it moves the keys: IMPORTING on
// to, MIGRATING on from. It returns to's node id.
func setMigrating(t *testing.T, slot int, from, to *redistest.Server) (toID string) {
	t.Helper()
	ctx := context.Background()
	src := redis.NewClient(&redis.Options{Addr: from.Addr()})
	dst := redis.NewClient(&redis.Options{Addr: to.Addr()})
	t.Cleanup(func() { _ = src.Close(); _ = dst.Close() })
	srcID, err := src.Do(ctx, "cluster", "myid").Text()
	must(t, "CLUSTER MYID", err)
	dstID, err := dst.Do(ctx, "cluster", "myid").Text()
	must(t, "CLUSTER MYID", err)
	must(t, "SETSLOT IMPORTING", dst.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err())
	must(t, "SETSLOT MIGRATING", src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err())
	return dstID
}

// heldInMigratingSlot starts a cluster, has a Client with holderOpts hold
// the test's key and puts the key's slot in the middle of a move (see
// setMigrating). It returns another Client, with otherOpts, and the key.
func heldInMigratingSlot(t *testing.T, holderOpts, otherOpts []lock.Option) (*lock.Client, string) {
	t.Helper()
	cl := redistest.StartCluster(t, 3, 0)
	key := keyFor(t)
	holders := newClient(t, cl.Client(t), holderOpts...)
	others := newClient(t, cl.Client(t), otherOpts...)
	from, to, slot := slotMove(t, cl, key)
	must(t, "holder Acquire()", holders.NewLock(key).Acquire(context.Background()))
	setMigrating(t, slot, from, to)
	return others, key
}

// tryTaken wants TryAcquire of key by c to find it taken: false, nil.
func tryTaken(t *testing.T, c *lock.Client, key string) {
	t.Helper()
	ok, err := c.NewLock(key).TryAcquire(context.Background())
	if ok || err != nil {
		t.Fatalf("TryAcquire() of a held key in a migrating slot = %v, %v; want false, nil", ok, err)
	}
}

// TestTryAcquire_heldKeyInMigratingSlot: while the slot of a held key is
// being moved (MIGRATING on its master, its keys not moved yet), an attempt
// by another Client finds the key taken: TryAcquire returns false, nil. A
// script that writes a key it does not declare and that is missing there
// (the marking release's mark) fails instead: "Script attempted to access
// a non local key".
func TestTryAcquire_heldKeyInMigratingSlot(t *testing.T) {
	t.Parallel()
	others, key := heldInMigratingSlot(t, nil, nil)
	tryTaken(t, others, key)
}

// TestAcquire_waitsOnHeldKeyInMigratingSlot: as
// TestTryAcquire_heldKeyInMigratingSlot, for a waiting Acquire (holder info
// on, so the attempt carries the holder-info hash too): it must wait, not
// fail.
func TestAcquire_waitsOnHeldKeyInMigratingSlot(t *testing.T) {
	t.Parallel()
	info := []lock.Option{lock.WithHolderInfo(true)}
	others, key := heldInMigratingSlot(t, info, append(info, lock.WithBackoff(time.Minute, time.Minute)))
	actx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- others.NewLock(key).Acquire(actx) }()
	for deadline := time.Now().Add(10 * time.Second); lock.IdleWaiters(others, key) != 1; time.Sleep(time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("Acquire() of a held key in a migrating slot returned %v; want it waiting", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("Acquire() neither waits nor returns")
		}
	}
	cancel()
	if err := recv(t, done, "Acquire() after cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire() = %v, want context.Canceled", err)
	}
}

// TestTryAcquire_watchHeldKeyInMigratingSlot: as
// TestTryAcquire_heldKeyInMigratingSlot, for a ReleaseWatch attempt on a
// key a ReleaseScript holder took. Its MULTI must write only keys that
// exist where the lock does: one more (the marking release's mark) makes
// the slot's old master refuse it with TRYAGAIN.
func TestTryAcquire_watchHeldKeyInMigratingSlot(t *testing.T) {
	t.Parallel()
	others, key := heldInMigratingSlot(t, nil, []lock.Option{lock.WithReleaseMode(lock.ReleaseWatch)})
	tryTaken(t, others, key)
}
