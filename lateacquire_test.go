package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// The tests here replay an acquire's script call as it was sent
// (kindtest.FirstScript), after its Acquire returned and the holder extended
// the hold: as the bytes of a first send that go-redis gave up on (and
// resent on another connection) may reach Redis late. Such a late duplicate
// finds the hold ours; it must not shorten it below what the holder's Extend
// set, or the key expires while the holder still believes it holds.

// Hold lengths of the tests: the acquire asks for acquireTTL, the holder
// then extends to extendedTTL; a hold with less than lateFloor left after
// the replay was shortened by it.
const (
	acquireTTL  = time.Second
	extendedTTL = time.Minute
	lateFloor   = extendedTTL / 2
)

// wantLeft fails the test unless Redis key key expires no sooner than
// lateFloor from now.
func wantLeft(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	left, err := rdb.PTTL(context.Background(), key).Result()
	wantAtLeastFloor(t, "PTTL "+key, left, err)
}

// wantAtLeastFloor fails the test unless what, read after the late
// duplicate, is at least lateFloor.
func wantAtLeastFloor(t *testing.T, what string, left time.Duration, err error) {
	t.Helper()
	if err != nil || left < lateFloor {
		t.Fatalf("%s after a late duplicate of the acquire = %v, %v; want at least %v (extended to %v, acquired for %v)",
			what, left, err, lateFloor, extendedTTL, acquireTTL)
	}
}

// lateDuplicateAfterExtend makes a hold on key with newHold, over a Client
// of the target with opts (TTL acquireTTL, no renewal), acquires it,
// extends it to extendedTTL, replays its acquire's script call as sent, and
// checks that neither the lock's key nor the hold's own TTL (its field or
// score on a shared key) nor the holder-info hash, if any, was cut back. It
// returns the hold.
func lateDuplicateAfterExtend(t *testing.T, tg *target, key string, newHold func(*lock.Client) *lock.Lock, opts ...lock.Option) *lock.Lock {
	t.Helper()
	ctx := context.Background()
	rdb := tg.newRDB(t)
	h := kindtest.CaptureFirstScript(rdb, lockKey(key))
	rec := &kindtest.Recorder{Renewals: true}
	c := newClient(t, rdb, append([]lock.Option{lock.WithTTL(acquireTTL), lock.WithWatchdog(false), lock.WithObserver(rec)}, opts...)...)
	// The first hold's check (a renewal with the acquire's TTL) goes
	// before: it would land after the Extend, until the hold is renewed
	// over it.
	warmUp(t, c, rec)
	hold := newHold(c)
	must(t, "Acquire()", hold.Acquire(ctx))
	must(t, "Extend()", hold.Extend(ctx, extendedTTL))

	h.Replay(t, tg.rdb)
	wantLeft(t, tg.rdb, lockKey(key))
	left, err := hold.TTL(ctx)
	wantAtLeastFloor(t, "TTL()", left, err)
	if n, _ := tg.rdb.Exists(ctx, lockKey(key)+":holders").Result(); n == 1 {
		wantLeft(t, tg.rdb, lockKey(key)+":holders")
	}
	return hold
}

// wantNotTaken fails the test if a lock of another Client gets key.
func wantNotTaken(t *testing.T, other *lock.Lock) {
	t.Helper()
	if ok, err := other.TryAcquire(context.Background()); ok || err != nil {
		t.Fatalf("another Client's TryAcquire() = %v, %v; want false", ok, err)
	}
}

func TestLock_lateDuplicateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	for _, tc := range []struct {
		name string
		opt  lock.Option
	}{
		{"plain", lock.WithFencing(false)},
		{"fenced", lock.WithFencing(true)},
		{"holderinfo", lock.WithHolderInfo(true)},
		{"audited", lock.WithAudit("audit", 100)},
		{"reentrant", lock.WithOwner("o")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := keyFor(t)
			lateDuplicateAfterExtend(t, tg, key, func(c *lock.Client) *lock.Lock { return c.NewLock(key) }, tc.opt)
			wantNotTaken(t, newClient(t, tg.newRDB(t)).NewLock(key))
		})
	}
}

func TestSemaphore_lateDuplicateAcquireDoesNotShortenExtendedPermit(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	for _, info := range []bool{false, true} {
		t.Run(fmt.Sprintf("holderinfo=%v", info), func(t *testing.T) {
			key := keyFor(t)
			lateDuplicateAfterExtend(t, tg, key, func(c *lock.Client) *lock.Lock { return c.NewSemaphore(key, 1).Permit() },
				lock.WithHolderInfo(info))
			wantNotTaken(t, newClient(t, tg.newRDB(t)).NewSemaphore(key, 1).Permit())
		})
	}
}

func TestRWLock_lateDuplicateAcquireDoesNotShortenExtendedHold(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	for _, side := range []string{"read", "write"} {
		t.Run(side, func(t *testing.T) {
			key := keyFor(t)
			lateDuplicateAfterExtend(t, tg, key, func(c *lock.Client) *lock.Lock {
				if side == "read" {
					return c.NewRWLock(key).ReadLock()
				}
				return c.NewRWLock(key).WriteLock()
			}, lock.WithHolderInfo(true))
			wantNotTaken(t, newClient(t, tg.newRDB(t)).NewRWLock(key).WriteLock())
		})
	}
}

func TestMultiLock_lateDuplicateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	keys := []string{keyFor(t) + ":a", keyFor(t) + ":b"}
	rdb := tg.newRDB(t)
	h := kindtest.CaptureFirstScript(rdb, lockKey(keys[0]))
	rec := &kindtest.Recorder{Renewals: true}
	c := newClient(t, rdb, lock.WithTTL(acquireTTL), lock.WithWatchdog(false), lock.WithObserver(rec))
	warmUp(t, c, rec) // the first hold's check goes before, as above
	m := c.NewMultiLock(keys)
	must(t, "Acquire()", m.Acquire(ctx))
	must(t, "Extend()", m.Extend(ctx, extendedTTL))

	h.Replay(t, tg.rdb)
	for _, k := range keys {
		wantLeft(t, tg.rdb, lockKey(k))
	}
	wantNotTaken(t, newClient(t, tg.newRDB(t)).NewLock(keys[0]))
}

func TestFair_lateDuplicateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	key := keyFor(t)
	lateDuplicateAfterExtend(t, tg, key, func(c *lock.Client) *lock.Lock { return c.NewLock(key) }, lock.WithFair(true))
	wantNotTaken(t, newClient(t, tg.newRDB(t), lock.WithFair(true)).NewLock(key))
}

// TestLock_ReleaseWatch_lateAcquireDoesNotShortenExtendedTTL: the
// script-free acquire finds the key ours (its MULTI's SET NX failed, its
// GET read our token) and then sets the TTL in a transaction of its own.
// Run after the holder's Extend, that step must not cut the hold back.
func TestLock_ReleaseWatch_lateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder := newClient(t, tg.newRDB(t), lock.WithReleaseMode(lock.ReleaseWatch), lock.WithTTL(acquireTTL),
		lock.WithWatchdog(false)).NewLock(key)
	must(t, "Acquire()", holder.Acquire(ctx))
	must(t, "Extend()", holder.Extend(ctx, extendedTTL))

	ok, err := lock.WatchAcquire(ctx, tg.rdb, key, holder.Token(), acquireTTL)
	if !ok || err != nil {
		t.Fatalf("acquire attempt with the holder's token = %v, %v; want true, nil", ok, err)
	}
	wantLeft(t, tg.rdb, lockKey(key))
	left, err := holder.TTL(ctx)
	wantAtLeastFloor(t, "TTL()", left, err)
	wantNotTaken(t, newClient(t, tg.newRDB(t), lock.WithReleaseMode(lock.ReleaseWatch)).NewLock(key))
}
