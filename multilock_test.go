package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// multiKeys returns n keys derived from t's name that land, on a cluster,
// in several slots.
func multiKeys(t *testing.T, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", keyFor(t), i)
	}
	return keys
}

// TestMultiLock_overlapNoDeadlock: MultiLocks over overlapping key sets,
// listed in opposite orders, on 3 Clients, many rounds: none deadlocks
// (each round finishes within its ctx), and no key ever has two holders
// (a per-key overlap detector and a non-atomic counter per key).
func TestMultiLock_overlapNoDeadlock(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		keys := multiKeys(t, 4)
		sets := [][]string{
			{keys[0], keys[1], keys[2]},
			{keys[3], keys[2], keys[1]},
			{keys[2], keys[0], keys[3]},
		}
		inside := make([]atomic.Int32, len(keys))
		var overlaps atomic.Int32
		const workers, rounds = 2, 8
		var wg sync.WaitGroup
		errs := make(chan error, len(sets)*workers)
		for ci, set := range sets {
			rdb := d.newRDB(t)
			c := newClient(t, rdb, lock.WithTTL(5*time.Second), lock.WithBackoff(time.Millisecond, 20*time.Millisecond))
			for range workers {
				wg.Go(func() {
					for range rounds {
						err := c.WithMultiLock(ctx, set, func(ctx context.Context) error {
							for _, k := range set {
								i := slices.Index(keys, k)
								if inside[i].Add(1) != 1 {
									overlaps.Add(1)
								}
							}
							defer func() {
								for _, k := range set {
									inside[slices.Index(keys, k)].Add(-1)
								}
							}()
							for _, k := range set {
								counter := "multi-counter:{" + k + "}"
								n, _ := rdb.Get(ctx, counter).Int()
								if err := rdb.Set(ctx, counter, n+1, time.Minute).Err(); err != nil {
									return err
								}
							}
							return nil
						})
						if err != nil {
							errs <- fmt.Errorf("client %d: %w", ci, err)
							return
						}
					}
				})
			}
		}
		waitWorkers(t, &wg, errs)
		if n := overlaps.Load(); n != 0 {
			t.Fatalf("%d overlaps on member keys", n)
		}
		for _, k := range keys {
			want := 0
			for _, set := range sets {
				if slices.Contains(set, k) {
					want += workers * rounds
				}
			}
			if n, _ := d.admin.Get(context.Background(), "multi-counter:{"+k+"}").Int(); n != want {
				t.Fatalf("counter of %s = %d, want %d", k, n, want)
			}
		}
	})
}

// TestMultiLock_allOrNone: with one member held by a plain Lock, TryAcquire
// takes none of the keys (the slot groups already taken are undone), and a
// waiting Acquire gets all of them once that Lock is released; members are
// plain mutex holds a Lock on the key is excluded by.
func TestMultiLock_allOrNone(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		c := newClient(t, d.newRDB(t), lock.WithBackoff(time.Millisecond, 20*time.Millisecond))
		keys := multiKeys(t, 6)
		m := c.NewMultiLock(keys)
		// Block the last key taken, so every earlier group is taken first.
		last := m.Keys()[len(keys)-1]
		blocker := c.NewLock(last)
		must(t, "Acquire()", blocker.Acquire(ctx))
		if ok, err := m.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() = %v, %v with a member held, want false, nil", ok, err)
		}
		for _, k := range keys {
			if k != last && d.admin.Exists(ctx, lockKey(k)).Val() != 0 {
				t.Fatalf("member %s left held after a failed TryAcquire", k)
			}
		}
		done := make(chan error, 1)
		go func() { done <- m.Acquire(ctx) }()
		must(t, "Release()", blocker.Release(ctx))
		must(t, "MultiLock Acquire()", <-done)
		for _, k := range keys {
			if got := d.admin.Get(ctx, lockKey(k)).Val(); got != m.Token() {
				t.Fatalf("GET %s = %q, want the multi-lock's token", k, got)
			}
			if m.Fence(k) <= 0 {
				t.Fatalf("Fence(%q) = %d, want > 0", k, m.Fence(k))
			}
			if ok, err := c.NewLock(k).TryAcquire(ctx); ok || err != nil {
				t.Fatalf("Lock TryAcquire() of member %s = %v, %v, want false, nil", k, ok, err)
			}
		}
		if m.Fence(last) <= blocker.Fence() {
			t.Fatalf("Fence(%q) = %d after the Lock's %d, want larger", last, m.Fence(last), blocker.Fence())
		}
		if m.Fence("not a member") != 0 {
			t.Fatal("Fence() of a non-member is not 0")
		}
		must(t, "Extend()", m.Extend(ctx, 10*time.Second))
		if ttl := d.admin.PTTL(ctx, lockKey(keys[0])).Val(); ttl <= 5*time.Second {
			t.Fatalf("PTTL after Extend(10s) = %v", ttl)
		}
		must(t, "Release()", m.Release(ctx))
		for _, k := range keys {
			if d.admin.Exists(ctx, lockKey(k)).Val() != 0 {
				t.Fatalf("member %s left after Release()", k)
			}
		}
		wantErr(t, "second Release()", m.Release(ctx), lock.ErrNotHeld)
	})
}

// TestMultiLock_lostWhenAnyMemberLost: deleting one member closes Lost()
// before the TTL, and Release then reports ErrNotHeld while still freeing
// the other members.
func TestMultiLock_lostWhenAnyMemberLost(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		c := newClient(t, d.newRDB(t))
		keys := multiKeys(t, 4)
		ttl := 900 * time.Millisecond
		m := c.NewMultiLock(keys, lock.WithTTL(ttl))
		must(t, "Acquire()", m.Acquire(ctx))
		d.admin.Del(ctx, lockKey(keys[2]))
		waitClosed(t, m.Lost(), ttl, "Lost()")
		wantErr(t, "LostErr()", m.LostErr(), lock.ErrLockLost)
		wantErr(t, "Release()", m.Release(ctx), lock.ErrNotHeld)
		for _, k := range keys {
			if d.admin.Exists(ctx, lockKey(k)).Val() != 0 {
				t.Fatalf("member %s left after Release()", k)
			}
		}
	})
}

// TestMultiLock_slotGroups: on a cluster, Keys() comes sorted by slot and
// then key, and each slot group costs one script call: keys sharing a hash
// tag go in one.
func TestMultiLock_slotGroups(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	rdb := cl.Client(t)
	ctx := context.Background()
	var calls atomic.Int32
	rdb.AddHook(countEvals{&calls})
	c := newClient(t, rdb)
	keys := multiKeys(t, 5)
	for _, k := range keys {
		want, err := rdb.ClusterKeySlot(ctx, lockKey(k)).Result()
		must(t, "CLUSTER KEYSLOT", err)
		if got := lock.KeySlot(lockKey(k)); int64(got) != want {
			t.Fatalf("KeySlot(%q) = %d, want %d", lockKey(k), got, want)
		}
	}
	m := c.NewMultiLock(keys)
	got := m.Keys()
	if !slices.IsSortedFunc(got, func(a, b string) int {
		if d := lock.KeySlot(lockKey(a)) - lock.KeySlot(lockKey(b)); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	}) {
		t.Fatalf("Keys() = %v, not sorted by slot then key", got)
	}
	must(t, "Acquire()", m.Acquire(ctx))
	if n := calls.Load(); n != int32(len(keys)) {
		t.Fatalf("%d script calls to take %d keys in %d slots", n, len(keys), len(keys))
	}
	must(t, "Release()", m.Release(ctx))

	// Keys of one hash tag share a slot: one call takes them all.
	calls.Store(0)
	tagged := c.NewMultiLock([]string{"acct}:1", "acct}:2", "acct}:3"})
	must(t, "Acquire()", tagged.Acquire(ctx))
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d script calls to take 3 keys of one slot, want 1", n)
	}
	must(t, "Release()", tagged.Release(ctx))
}

// countEvals counts the script calls sent alone, but for those the
// server answered NOSCRIPT (resent whole at once).
type countEvals struct{ n *atomic.Int32 }

func (countEvals) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countEvals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			h.n.Add(1)
		}
		return err
	}
}
func (countEvals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestMultiLock_badInput: an empty key list, an empty key, a key listed
// twice, options a multi-lock cannot take, and a member key holding
// another kind all give errors wrapping ErrInvalid.
func TestMultiLock_badInput(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	for name, m := range map[string]*lock.MultiLock{
		"no keys":   c.NewMultiLock(nil),
		"empty key": c.NewMultiLock([]string{"a", ""}),
		"duplicate": c.NewMultiLock([]string{"a", "b", "a"}),
		"fair":      c.NewMultiLock([]string{"a"}, lock.WithFair(true)),
		"owner":     c.NewMultiLock([]string{"a"}, lock.WithOwner("me")),
		"watch":     c.NewMultiLock([]string{"a"}, lock.WithReleaseMode(lock.ReleaseWatch)),
		"zero":      (*lock.Client)(nil).NewMultiLock([]string{"a"}),
	} {
		wantErr(t, name+": Acquire()", m.Acquire(ctx), lock.ErrInvalid)
		_, err := m.TryAcquire(ctx)
		wantErr(t, name+": TryAcquire()", err, lock.ErrInvalid)
		wantErr(t, name+": Release()", m.Release(ctx), lock.ErrInvalid)
		wantErr(t, name+": Extend()", m.Extend(ctx, time.Second), lock.ErrInvalid)
	}
	var zero lock.MultiLock
	wantErr(t, "zero MultiLock Acquire()", zero.Acquire(ctx), lock.ErrInvalid)
	if zero.Keys() != nil || zero.Fence("a") != 0 || zero.Lost() != nil {
		t.Fatal("zero MultiLock accessors are not zero")
	}
	key := keyFor(t) + ":zset"
	tg.rdb.ZAdd(ctx, lockKey(key), redis.Z{Score: 1, Member: "x"})
	err := c.NewMultiLock([]string{keyFor(t), key}).Acquire(ctx)
	wantErr(t, "Acquire() with a zset member", err, lock.ErrInvalid)
	if !strings.Contains(err.Error(), "is a semaphore, not a mutex") {
		t.Fatalf("Acquire() error = %v, want it to name both kinds", err)
	}
	if tg.rdb.Exists(ctx, lockKey(keyFor(t))).Val() != 0 {
		t.Fatal("the other member was left held")
	}
	// A re-entrant mutex on a member is simply held.
	owned := c.NewLock(keyFor(t)+":owned", lock.WithOwner("me"))
	must(t, "Acquire()", owned.Acquire(ctx))
	if ok, err := c.NewMultiLock([]string{keyFor(t) + ":owned"}).TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() over a re-entrant hold = %v, %v, want false, nil", ok, err)
	}
}

// TestMultiLock_holderGone: a MultiLock whose process can no longer reach
// Redis stops renewing; its members expire by the TTL and a waiting
// MultiLock over overlapping keys takes them.
func TestMultiLock_holderGone(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		keys := multiKeys(t, 4)
		ttl := 500 * time.Millisecond
		goneRDB := d.newRDB(t)
		holder := newClient(t, goneRDB, lock.WithTTL(ttl)).NewMultiLock(keys[:3])
		must(t, "Acquire()", holder.Acquire(ctx))
		w := newClient(t, d.newRDB(t)).NewMultiLock(keys[1:])
		if ok, err := w.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() over held keys = %v, %v, want false, nil", ok, err)
		}
		goneRDB.Close()
		must(t, "waiter's Acquire()", w.Acquire(ctx))
		waitClosed(t, holder.Lost(), ttl, "holder's Lost()")
		for _, k := range keys[1:3] {
			if w.Fence(k) <= holder.Fence(k) {
				t.Fatalf("Fence(%q) = %d after %d", k, w.Fence(k), holder.Fence(k))
			}
		}
		must(t, "Release()", w.Release(ctx))
	})
}

// TestMultiLock_lostReply: the reply of the script that took every key is
// lost (a go-redis hook); the attempt releases what it may have taken, and
// the retry, with a token of its own, takes every key, with a fence each.
func TestMultiLock_lostReply(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	rdb := tg.newRDB(t)
	h := &dropReplies{drop: 1}
	rdb.AddHook(h)
	keys := multiKeys(t, 3)
	m := newClient(t, rdb).NewMultiLock(keys)
	must(t, "Acquire()", m.Acquire(ctx))
	if h.dropped.Load() != 1 {
		t.Fatalf("%d replies dropped, want 1", h.dropped.Load())
	}
	for _, k := range keys {
		if got := tg.rdb.Get(ctx, lockKey(k)).Val(); got != m.Token() || m.Fence(k) <= 0 {
			t.Fatalf("GET %s = %q, fence %d; want our token %q and a fence", k, got, m.Fence(k), m.Token())
		}
	}
	must(t, "Release()", m.Release(ctx))
}

// TestMultiLock_forceReleaseOfMemberHeardAtOnce: a force-release of one
// member of a held multi-lock reaches its hold through the Client's force
// channel: Lost() closes, force-released, long before its TTL (a minute)
// with the watchdog off, when no renewal would find the member gone, and
// the other member is released.
func TestMultiLock_forceReleaseOfMemberHeardAtOnce(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	keys := []string{keyFor(t) + ":a", keyFor(t) + ":b"}
	c := newClient(t, tg.newRDB(t), lock.WithTTL(time.Minute), lock.WithWatchdog(false))
	m := c.NewMultiLock(keys)
	must(t, "Acquire()", m.Acquire(ctx))
	waitUntil(t, "the force channel's subscription", func() bool { return lock.InboxReady(c) })
	must(t, "ForceRelease()", newClient(t, tg.newRDB(t)).ForceRelease(ctx, keys[0]))
	waitClosed(t, m.Lost(), 5*time.Second, "Lost() of the multi-lock whose member was force-released")
	var le *lock.LostError
	if err := m.LostErr(); !errors.As(err, &le) || le.Reason != lock.LossForceReleased {
		t.Fatalf("LostErr() = %v, want a *LostError with reason force-released", err)
	}
	eventually(t, "the other member released", func() bool { return tg.rdb.Exists(ctx, lockKey(keys[1])).Val() == 0 })
}
