package lock_test

import (
	"context"
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
	if err != nil || left < lateFloor {
		t.Fatalf("PTTL %s after a late duplicate of the acquire = %v, %v; want at least %v (extended to %v, acquired for %v)",
			key, left, err, lateFloor, extendedTTL, acquireTTL)
	}
}

// wantHoldLeft fails the test unless hold's own TTL (its field or score on
// a shared key) is at least lateFloor.
func wantHoldLeft(t *testing.T, hold interface {
	TTL(context.Context) (time.Duration, error)
}) {
	t.Helper()
	left, err := hold.TTL(context.Background())
	if err != nil || left < lateFloor {
		t.Fatalf("TTL() after a late duplicate of the acquire = %v, %v; want at least %v (extended to %v, acquired for %v)",
			left, err, lateFloor, extendedTTL, acquireTTL)
	}
}

// wantNotTaken fails the test if a lock of another Client gets key.
func wantNotTaken(t *testing.T, other *lock.Lock) {
	t.Helper()
	if ok, err := other.TryAcquire(context.Background()); ok || err != nil {
		t.Fatalf("another Client's TryAcquire() = %v, %v; want false", ok, err)
	}
}

func TestLock_lateDuplicateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
	tg := realTarget(t)
	for _, tc := range []struct {
		name string
		opts []lock.Option
	}{
		{"plain", nil},
		{"fenced", []lock.Option{lock.WithFencing(true)}},
		{"holderinfo", []lock.Option{lock.WithHolderInfo(true)}},
		{"audited", []lock.Option{lock.WithAudit("audit", 100)}},
		{"reentrant", []lock.Option{lock.WithOwner("o")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			key := keyFor(t)
			rdb := tg.newRDB(t)
			h := kindtest.CaptureFirstScript(rdb, lockKey(key))
			opts := append([]lock.Option{lock.WithTTL(acquireTTL), lock.WithWatchdog(false)}, tc.opts...)
			holder := newClient(t, rdb, opts...).NewLock(key)
			must(t, "Acquire()", holder.Acquire(ctx))
			must(t, "Extend()", holder.Extend(ctx, extendedTTL))

			h.Replay(t, tg.rdb)
			wantLeft(t, tg.rdb, lockKey(key))
			wantHoldLeft(t, holder)
			if n, _ := tg.rdb.Exists(ctx, lockKey(key)+":holders").Result(); n == 1 {
				wantLeft(t, tg.rdb, lockKey(key)+":holders")
			}
			wantNotTaken(t, newClient(t, tg.newRDB(t)).NewLock(key))
		})
	}
}

func TestSemaphore_lateDuplicateAcquireDoesNotShortenExtendedPermit(t *testing.T) {
	tg := realTarget(t)
	for _, tc := range []struct {
		name string
		opts []lock.Option
	}{
		{"plain", nil},
		{"holderinfo", []lock.Option{lock.WithHolderInfo(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			key := keyFor(t)
			rdb := tg.newRDB(t)
			h := kindtest.CaptureFirstScript(rdb, lockKey(key))
			opts := append([]lock.Option{lock.WithTTL(acquireTTL), lock.WithWatchdog(false)}, tc.opts...)
			p := newClient(t, rdb, opts...).NewSemaphore(key, 1).Permit()
			must(t, "Acquire()", p.Acquire(ctx))
			must(t, "Extend()", p.Extend(ctx, extendedTTL))

			h.Replay(t, tg.rdb)
			wantHoldLeft(t, p)
			wantLeft(t, tg.rdb, lockKey(key))
			if n, _ := tg.rdb.Exists(ctx, lockKey(key)+":holders").Result(); n == 1 {
				wantLeft(t, tg.rdb, lockKey(key)+":holders")
			}
			wantNotTaken(t, newClient(t, tg.newRDB(t)).NewSemaphore(key, 1).Permit())
		})
	}
}

func TestRWLock_lateDuplicateAcquireDoesNotShortenExtendedHold(t *testing.T) {
	tg := realTarget(t)
	for _, side := range []string{"read", "write"} {
		t.Run(side, func(t *testing.T) {
			ctx := context.Background()
			key := keyFor(t)
			rdb := tg.newRDB(t)
			h := kindtest.CaptureFirstScript(rdb, lockKey(key))
			rw := newClient(t, rdb, lock.WithTTL(acquireTTL), lock.WithWatchdog(false), lock.WithHolderInfo(true)).NewRWLock(key)
			hold := rw.WriteLock()
			if side == "read" {
				hold = rw.ReadLock()
			}
			must(t, "Acquire()", hold.Acquire(ctx))
			must(t, "Extend()", hold.Extend(ctx, extendedTTL))

			h.Replay(t, tg.rdb)
			wantHoldLeft(t, hold)
			wantLeft(t, tg.rdb, lockKey(key))
			wantLeft(t, tg.rdb, lockKey(key)+":holders")
			wantNotTaken(t, newClient(t, tg.newRDB(t)).NewRWLock(key).WriteLock())
		})
	}
}

func TestMultiLock_lateDuplicateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	keys := []string{keyFor(t) + ":a", keyFor(t) + ":b"}
	rdb := tg.newRDB(t)
	h := kindtest.CaptureFirstScript(rdb, lockKey(keys[0]))
	m := newClient(t, rdb, lock.WithTTL(acquireTTL), lock.WithWatchdog(false)).NewMultiLock(keys)
	must(t, "Acquire()", m.Acquire(ctx))
	must(t, "Extend()", m.Extend(ctx, extendedTTL))

	h.Replay(t, tg.rdb)
	for _, k := range keys {
		wantLeft(t, tg.rdb, lockKey(k))
	}
	wantNotTaken(t, newClient(t, tg.newRDB(t)).NewLock(keys[0]))
}

func TestFair_lateDuplicateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	rdb := tg.newRDB(t)
	h := kindtest.CaptureFirstScript(rdb, lockKey(key))
	holder := newClient(t, rdb, lock.WithTTL(acquireTTL), lock.WithWatchdog(false), lock.WithFair(true)).NewLock(key)
	must(t, "Acquire()", holder.Acquire(ctx))
	must(t, "Extend()", holder.Extend(ctx, extendedTTL))

	h.Replay(t, tg.rdb)
	wantLeft(t, tg.rdb, lockKey(key))
	wantHoldLeft(t, holder)
	wantNotTaken(t, newClient(t, tg.newRDB(t), lock.WithFair(true)).NewLock(key))
}

// TestLock_ReleaseWatch_lateAcquireDoesNotShortenExtendedTTL: the
// script-free acquire finds the key ours (its MULTI's SET NX failed, its
// GET read our token) and then sets the TTL in a transaction of its own.
// Run after the holder's Extend, that step must not cut the hold back.
func TestLock_ReleaseWatch_lateAcquireDoesNotShortenExtendedTTL(t *testing.T) {
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
	wantHoldLeft(t, holder)
	wantNotTaken(t, newClient(t, tg.newRDB(t), lock.WithReleaseMode(lock.ReleaseWatch)).NewLock(key))
}
