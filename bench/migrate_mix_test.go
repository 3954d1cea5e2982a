package main

// The first claim of docs/migrating.md, checked on a real redis-server: the
// old library and agentlock, given one lock name, lock two different Redis
// keys, so both hold at once; and the guide's safe ways over (drain first,
// or hold both locks during the rollout) exclude.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestMigratingMixedLibrariesBothHold: bsm/redislock and agentlock both
// obtain "job:x" at once, as do go-redsync and agentlock on "job:y", and
// the Redis keys they hold are the name itself and lock:{name}.
func TestMigratingMixedLibrariesBothHold(t *testing.T) {
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	ctx := context.Background()
	locks := lock.NewClient(rdb)
	defer locks.Close()

	old, err := redislock.Obtain(ctx, rdb, "job:x", time.Minute, nil)
	if err != nil {
		t.Fatalf("redislock.Obtain(job:x) error = %v", err)
	}
	defer old.Release(ctx)
	x := mustHoldToo(ctx, t, locks, "job:x")
	defer x.Release(ctx)

	m := redsync.New(goredis.NewPool(rdb)).NewMutex("job:y", redsync.WithExpiry(time.Minute))
	if err := m.TryLockContext(ctx); err != nil {
		t.Fatalf("redsync TryLock(job:y) error = %v", err)
	}
	defer m.UnlockContext(ctx)
	y := mustHoldToo(ctx, t, locks, "job:y")
	defer y.Release(ctx)

	for _, key := range []string{"job:x", "lock:{job:x}", "job:y", "lock:{job:y}"} {
		if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Errorf("EXISTS %s = %d, %v; want 1", key, n, err)
		}
	}
}

// mustHoldToo checks that an agentlock lock on name is acquired while the
// other library holds the same name: the two-holder state. It returns the
// held lock.
func mustHoldToo(ctx context.Context, t *testing.T, locks *lock.Client, name string) *lock.Lock {
	t.Helper()
	l := locks.NewLock(name)
	ok, err := l.TryAcquire(ctx)
	if err != nil || !ok {
		t.Fatalf("agentlock TryAcquire(%s) = %v, %v beside the other library's hold; want true, nil (two holders)", name, ok, err)
	}
	return l
}

// TestMigratingSafePathsExclude: the guide's two ways over. Holding both
// locks during the rollout, a process of either version finds the name
// taken; after a drain (no old-library hold left), agentlock's locks
// exclude each other.
func TestMigratingSafePathsExclude(t *testing.T) {
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	ctx := context.Background()
	locks := lock.NewClient(rdb)
	defer locks.Close()

	// Hold both: the migrated process takes the old library's lock, then agentlock's.
	bridge, err := redislock.Obtain(ctx, rdb, "job:x", time.Minute, nil)
	if err != nil {
		t.Fatalf("redislock.Obtain(job:x) error = %v", err)
	}
	l := locks.NewLock("job:x")
	if ok, err := l.TryAcquire(ctx); err != nil || !ok {
		t.Fatalf("TryAcquire(job:x) = %v, %v; want true, nil", ok, err)
	}
	if _, err := redislock.Obtain(ctx, rdb, "job:x", time.Minute, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Errorf("an old process's Obtain(job:x) error = %v, want ErrNotObtained", err)
	}
	if ok, err := locks.NewLock("job:x").TryAcquire(ctx); err != nil || ok {
		t.Errorf("a migrated process's TryAcquire(job:x) = %v, %v; want false, nil", ok, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bridge.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Drained: no old-library hold is left, every process uses agentlock.
	if n, err := rdb.Exists(ctx, "job:x").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS job:x after the drain = %d, %v; want 0", n, err)
	}
	first := locks.NewLock("job:x")
	if ok, err := first.TryAcquire(ctx); err != nil || !ok {
		t.Fatalf("TryAcquire(job:x) = %v, %v; want true, nil", ok, err)
	}
	defer first.Release(ctx)
	other := lock.NewClient(rdb)
	defer other.Close()
	if ok, err := other.NewLock("job:x").TryAcquire(ctx); err != nil || ok {
		t.Errorf("another process's TryAcquire(job:x) = %v, %v; want false, nil", ok, err)
	}
}

// TestMigratingBsmSharedToken: bsm/redislock's Options{Token} is not a
// hold count. A second Obtain with the same token and metadata succeeds
// over the first; the first Release deletes the key for both handles, and
// the second then says not held. WithOwner counts holds instead: the key
// stays taken until each hold is released.
func TestMigratingBsmSharedToken(t *testing.T) {
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	ctx := context.Background()
	opt := &redislock.Options{Token: "agent-7"}
	a, err := redislock.Obtain(ctx, rdb, "job:t", time.Minute, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := redislock.Obtain(ctx, rdb, "job:t", time.Minute, opt)
	if err != nil {
		t.Fatalf("second Obtain with the same token error = %v, want nil", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("first Release error = %v", err)
	}
	if n, _ := rdb.Exists(ctx, "job:t").Result(); n != 0 {
		t.Errorf("after the first Release the key exists; want it gone for both handles")
	}
	if err := b.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Errorf("second Release error = %v, want ErrLockNotHeld", err)
	}

	// Different metadata: the second Obtain replaces the value, and the
	// first handle's Release says not held.
	c, err := redislock.Obtain(ctx, rdb, "job:u", time.Minute, &redislock.Options{Token: "agent-7", Metadata: "a"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := redislock.Obtain(ctx, rdb, "job:u", time.Minute, &redislock.Options{Token: "agent-7", Metadata: "b"})
	if err != nil {
		t.Fatalf("second Obtain error = %v", err)
	}
	defer d.Release(ctx)
	if err := c.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Errorf("first handle's Release after a replacing Obtain = %v, want ErrLockNotHeld", err)
	}

	locks := lock.NewClient(rdb)
	defer locks.Close()
	h1, h2 := locks.NewLock("job:v", lock.WithOwner("agent-7")), locks.NewLock("job:v", lock.WithOwner("agent-7"))
	for _, h := range []*lock.Lock{h1, h2} {
		if ok, err := h.TryAcquire(ctx); err != nil || !ok {
			t.Fatalf("WithOwner TryAcquire = %v, %v", ok, err)
		}
	}
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := locks.NewLock("job:v").TryAcquire(ctx); err != nil || ok {
		t.Errorf("with one of two owner holds left, TryAcquire = %v, %v; want false, nil", ok, err)
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
