package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/redistest"
)

// TestMutualExclusion: 4 separate go-redis clients (4 lock Clients, as 4
// processes would have), 8 goroutines each, one key. Inside the critical
// section an overlap detector and a non-atomic read-modify-write of a Redis
// key: any overlap or lost update fails the test. Fences must come out
// strictly increasing in the order holders entered.
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		const clients, workers, rounds = 4, 8, 12
		key := keyFor(t)
		counter := key + ":counter"
		var x kindtest.Exclusion
		for range clients {
			rdb := tg.newRDB(t)
			c := newClient(t, rdb, lock.WithTTL(5*time.Second))
			for range workers {
				x.Worker(ctx, rounds, func() kindtest.Locker { return c.NewLock(key) }, func() error {
					n, _ := rdb.Get(ctx, counter).Int()
					return rdb.Set(ctx, counter, n+1, 0).Err()
				})
			}
		}
		total := clients * workers * rounds
		x.Check(t, total)
		if n, _ := tg.rdb.Get(ctx, counter).Int(); n != total {
			t.Fatalf("counter = %d after %d locked increments: %d updates lost", n, total, total-n)
		}
	})
}

// TestLost_keyDeleted: a hold deleted behind its holder's back is reported
// lost within one renewal interval (TTL/3).
func TestLost_keyDeleted(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	ttl := 900 * time.Millisecond
	l := c.NewLock(key, lock.WithTTL(ttl))
	must(t, "Acquire()", l.Acquire(ctx))
	tg.expire(t, key)
	deleted := time.Now()
	waitClosed(t, l.Lost(), 5*time.Second, "Lost()")
	after := time.Since(deleted)
	var le *lock.LostError
	if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossVanished {
		t.Fatalf("LostErr() = %v, want vanished", l.LostErr())
	}
	t.Logf("lost %v after the key was deleted (renewal interval %v)", after.Round(time.Millisecond), ttl/3)
	if after > ttl {
		t.Fatalf("lost %v after deletion, want within about one renewal interval (%v) and surely before the TTL %v", after, ttl/3, ttl)
	}
}

// TestLost_serverKilled: with redis-server SIGKILLed, every hold is
// reported lost before its TTL would have run out.
func TestLost_serverKilled(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	ttl := 1500 * time.Millisecond
	var locks []*lock.Lock
	var acquired []time.Time
	for i := range 5 {
		l := c.NewLock(fmt.Sprintf("%s:%d", keyFor(t), i), lock.WithTTL(ttl))
		acquired = append(acquired, time.Now())
		must(t, "Acquire()", l.Acquire(ctx))
		locks = append(locks, l)
	}
	time.Sleep(200 * time.Millisecond)
	tg.srv.Kill()
	for i, l := range locks {
		waitClosed(t, l.Lost(), 10*time.Second, "Lost()")
		at := time.Since(acquired[i])
		if at >= ttl {
			t.Fatalf("lock %d lost %v after its acquire was sent, not before its TTL %v", i, at, ttl)
		}
		// Unanswered when go-redis was still retrying the dead connection
		// at the deadline (its retries hide the connection errors until
		// they end); TestRenewal_refusedLossReason sees them.
		var le *lock.LostError
		if !errors.As(l.LostErr(), &le) || (le.Reason != lock.LossUnreachable && le.Reason != lock.LossUnanswered) {
			t.Fatalf("LostErr() = %v, want unreachable or unanswered", l.LostErr())
		}
	}
}

// TestWaiter_holderNeverReleases: a holder that stops renewing and never
// releases (its Client closed, as a crashed process) is replaced once its
// TTL runs out: the waiter sleeps by the holder's PTTL, not past it.
func TestWaiter_holderNeverReleases(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	ttl := time.Second
	crashed := lock.NewClient(tg.newRDB(t), lock.WithTTL(ttl))
	l := crashed.NewLock(key)
	sent := time.Now()
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "Close()", crashed.Close())

	backoffMax := 200 * time.Millisecond
	c := newClient(t, tg.rdb, lock.WithBackoff(100*time.Millisecond, backoffMax))
	w := c.NewLock(key)
	must(t, "waiter Acquire()", w.Acquire(ctx))
	after := time.Since(sent)
	t.Logf("waiter held the lock %v after the crashed holder's acquire (TTL %v)", after.Round(time.Millisecond), ttl)
	if after < ttl-50*time.Millisecond {
		t.Fatalf("waiter held the lock after %v, before the holder's TTL %v ran out", after, ttl)
	}
	if after > ttl+backoffMax+time.Second {
		t.Fatalf("waiter held the lock after %v, want within TTL %v + backoff max %v (plus slack)", after, ttl, backoffMax)
	}
	must(t, "Release()", w.Release(ctx))
}

// TestACL_noScripting: a Redis user denied @scripting can lock in
// ReleaseWatch mode, and gets a clear NOPERM error (not a hang) in the
// default mode.
func TestACL_noScripting(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	ctx := context.Background()
	must(t, "ACL SETUSER", srv.ACLSetUser(ctx, "locker", "pw", "~*", "&*", "+@all", "-@scripting"))
	opt := srv.Options()
	opt.Username, opt.Password = "locker", "pw"
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })

	c := newClient(t, rdb, lock.WithReleaseMode(lock.ReleaseWatch))
	key := keyFor(t)
	a, b := c.NewLock(key), c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
	must(t, "Acquire()", a.Acquire(ctx))
	must(t, "Extend()", a.Extend(ctx, time.Minute))
	if _, err := a.TTL(ctx); err != nil {
		t.Fatalf("TTL() error = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Acquire(ctx) }()
	time.Sleep(50 * time.Millisecond)
	must(t, "Release()", a.Release(ctx))
	select {
	case err := <-done:
		must(t, "waiter Acquire()", err)
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken in ReleaseWatch mode")
	}
	must(t, "Release()", b.Release(ctx))

	scripted := newClient(t, rdb).NewLock(key + ":script")
	err := scripted.Acquire(ctx)
	if err == nil || !redis.HasErrorPrefix(errors.Unwrap(err), "NOPERM") {
		t.Fatalf("Acquire() with scripting denied error = %v, want NOPERM", err)
	}
}

// TestCluster: a real 3-master Redis Cluster through redis.ClusterClient:
// locks on keys across every slot range, contention with wake-up, extend,
// and release.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	rdb := cl.Client(t)
	ctx := context.Background()
	c := newClient(t, rdb)
	masters := map[string]bool{}
	for i := range 24 {
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		srv, err := cl.MasterForKey(ctx, lockKey(key))
		must(t, "MasterForKey()", err)
		masters[srv.Addr()] = true

		a := c.NewLock(key)
		must(t, "Acquire()", a.Acquire(ctx))
		must(t, "Extend()", a.Extend(ctx, time.Minute))
		b := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		done := make(chan error, 1)
		go func() { done <- b.Acquire(ctx) }()
		time.Sleep(20 * time.Millisecond)
		must(t, "Release()", a.Release(ctx))
		select {
		case err := <-done:
			must(t, "waiter Acquire()", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("key %q: waiter not woken through the cluster", key)
		}
		if b.Fence() <= a.Fence() {
			t.Fatalf("fence %d after %d", b.Fence(), a.Fence())
		}
		must(t, "Release()", b.Release(ctx))
	}
	if len(masters) != 3 {
		t.Fatalf("keys landed on %d masters, want all 3", len(masters))
	}
	for _, mode := range []lock.ReleaseMode{lock.ReleaseWatch} {
		l := c.NewLock(keyFor(t)+":watch", lock.WithReleaseMode(mode))
		must(t, "Acquire() ReleaseWatch", l.Acquire(ctx))
		must(t, "Release() ReleaseWatch", l.Release(ctx))
	}
	wantErr(t, "Acquire() of a key starting with }", c.NewLock("}x").Acquire(ctx), lock.ErrInvalid)
}
