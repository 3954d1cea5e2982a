package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// permitCheck runs permit holders of one semaphore from many goroutines and
// checks, as they go, that no more than n hold at once and that every
// permit's fence is greater than the fence of every permit released before
// its Acquire began.
type permitCheck struct {
	n            int32
	inside, peak atomic.Int32
	releasedMax  atomic.Int64
	mu           sync.Mutex
	fences       map[int64]bool
	errs         chan error
	wg           sync.WaitGroup
}

func newPermitCheck(n int) *permitCheck {
	return &permitCheck{n: int32(n), fences: map[int64]bool{}, errs: make(chan error, 1024)}
}

// worker acquires a permit of sem rounds times, holds it while section
// runs, and releases it.
func (pc *permitCheck) worker(ctx context.Context, sem *lock.Semaphore, rounds int, section func()) {
	pc.wg.Go(func() {
		for range rounds {
			p := sem.Permit()
			before := pc.releasedMax.Load()
			if err := p.Acquire(ctx); err != nil {
				pc.errs <- fmt.Errorf("Acquire() error = %v", err)
				return
			}
			in := pc.inside.Add(1)
			for {
				old := pc.peak.Load()
				if in <= old || pc.peak.CompareAndSwap(old, in) {
					break
				}
			}
			f := p.Fence()
			pc.mu.Lock()
			dup := pc.fences[f]
			pc.fences[f] = true
			pc.mu.Unlock()
			if dup || f <= before {
				pc.errs <- fmt.Errorf("fence %d: duplicate %v, or not above %d, released before its Acquire began", f, dup, before)
			}
			section()
			pc.inside.Add(-1)
			for {
				old := pc.releasedMax.Load()
				if f <= old || pc.releasedMax.CompareAndSwap(old, f) {
					break
				}
			}
			if err := p.Release(ctx); err != nil {
				pc.errs <- fmt.Errorf("Release() error = %v", err)
				return
			}
		}
	})
}

// check waits for the workers and fails the test on any error or on more
// than n holders at once.
func (pc *permitCheck) check(t *testing.T) {
	t.Helper()
	pc.wg.Wait()
	close(pc.errs)
	for err := range pc.errs {
		t.Error(err)
	}
	if p := pc.peak.Load(); p > pc.n {
		t.Fatalf("%d permits held at once, want at most %d", p, pc.n)
	} else {
		t.Logf("at most %d of %d permits held at once", p, pc.n)
	}
}

// TestSemaphore_maxConcurrency: 3 Clients (3 go-redis clients, as 3
// processes would have) with 6 goroutines each take permits of one
// semaphore of 3: never more than 3 inside, fences unique and increasing.
func TestSemaphore_maxConcurrency(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		semMaxConcurrency(t, func() redis.UniversalClient { return tg.newRDB(t) })
	})
}

// TestSemaphore_cluster: the same on a real 3-master Redis Cluster, on keys
// served by every master.
func TestSemaphore_cluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	semMaxConcurrency(t, func() redis.UniversalClient { return cl.Client(t) })
	ctx := context.Background()
	c := newClient(t, cl.Client(t))
	masters := map[string]bool{}
	for i := range 12 {
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		srv, err := cl.MasterForKey(ctx, lockKey(key))
		must(t, "MasterForKey()", err)
		masters[srv.Addr()] = true
		sem := c.NewSemaphore(key, 2)
		a, b := sem.Permit(), sem.Permit()
		must(t, "Acquire()", a.Acquire(ctx))
		must(t, "Acquire()", b.Acquire(ctx))
		must(t, "Extend()", a.Extend(ctx, time.Minute))
		if ok, err := sem.Permit().TryAcquire(ctx); ok || err != nil {
			t.Fatalf("third TryAcquire() = %v, %v, want false, nil", ok, err)
		}
		waiter := sem.Permit()
		done := make(chan error, 1)
		go func() { done <- waiter.Acquire(ctx) }()
		must(t, "Release()", a.Release(ctx))
		select {
		case err := <-done:
			must(t, "waiter Acquire()", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("key %q: waiter not given the released permit", key)
		}
		must(t, "Release()", b.Release(ctx))
		must(t, "Release()", waiter.Release(ctx))
	}
	if len(masters) != 3 {
		t.Fatalf("keys landed on %d masters, want all 3", len(masters))
	}
}

func semMaxConcurrency(t *testing.T, newRDB func() redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	const n, clients, workers, rounds = 3, 3, 6, 8
	key := keyFor(t)
	pc := newPermitCheck(n)
	for range clients {
		rdb := newRDB()
		c := newClient(t, rdb, lock.WithTTL(5*time.Second), lock.WithBackoff(time.Millisecond, 20*time.Millisecond))
		sem := c.NewSemaphore(key, n)
		for range workers {
			// A few round trips inside, so that holders overlap.
			pc.worker(ctx, sem, rounds, func() {
				for range 3 {
					rdb.Ping(ctx)
				}
			})
		}
	}
	pc.check(t)
	if p := pc.peak.Load(); p < 2 {
		t.Fatalf("at most %d holder at once with %d goroutines: the semaphore admitted no concurrency", p, clients*workers)
	}
}

// TestSemaphore_full: with n permits out, TryAcquire reports (false, nil)
// and Available 0; a release frees one place.
func TestSemaphore_full(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		sem := newClient(t, tg.rdb).NewSemaphore(keyFor(t), 2)
		wantAvailable(t, sem, 2)
		a, b := sem.Permit(), sem.Permit()
		must(t, "Acquire()", a.Acquire(ctx))
		wantAvailable(t, sem, 1)
		ok, err := b.TryAcquire(ctx)
		if !ok || err != nil {
			t.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
		}
		if a.Token() == b.Token() || a.Fence() >= b.Fence() {
			t.Fatalf("permits share token %q/%q or fences %d, %d do not increase", a.Token(), b.Token(), a.Fence(), b.Fence())
		}
		wantAvailable(t, sem, 0)
		if d := tg.rdb.PTTL(ctx, lockKey(keyFor(t))).Val(); d <= 0 {
			t.Fatalf("PTTL of the semaphore's key = %v, want a TTL", d)
		}
		if a.Key() != keyFor(t) {
			t.Fatalf("Key() = %q, want %q", a.Key(), keyFor(t))
		}
		third := sem.Permit()
		if ok, err := third.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() with n out = %v, %v, want false, nil", ok, err)
		}
		d, err := a.TTL(ctx)
		if err != nil || d <= 0 || d > lock.DefaultTTL {
			t.Fatalf("TTL() = %v, %v, want within (0, %v]", d, err, lock.DefaultTTL)
		}
		must(t, "Release()", a.Release(ctx))
		wantErr(t, "second Release()", a.Release(ctx), lock.ErrNotHeld)
		wantErr(t, "TTL() after Release", func() error { _, err := a.TTL(ctx); return err }(), lock.ErrNotHeld)
		wantAvailable(t, sem, 1)
		if ok, err := third.TryAcquire(ctx); !ok || err != nil {
			t.Fatalf("TryAcquire() after a release = %v, %v, want true, nil", ok, err)
		}
		must(t, "Release()", b.Release(ctx))
		must(t, "Release()", third.Release(ctx))
		if n := tg.rdb.Exists(ctx, lockKey(keyFor(t))).Val(); n != 0 {
			t.Fatalf("semaphore key left after every permit was released")
		}
	})
}

func wantAvailable(t *testing.T, sem *lock.Semaphore, want int) {
	t.Helper()
	if n, err := sem.Available(context.Background()); n != want || err != nil {
		t.Fatalf("Available() = %d, %v, want %d, nil", n, err, want)
	}
}

// TestSemaphore_changeN: n belongs to each Semaphore. Lowering it revokes
// no permit (they stay renewable) and lets nobody in until the live
// permits drop below the new n; raising it lets more in at once.
func TestSemaphore_changeN(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		three := c.NewSemaphore(key, 3)
		var held []*lock.Lock
		for range 3 {
			p := three.Permit()
			must(t, "Acquire()", p.Acquire(ctx))
			held = append(held, p)
		}
		one := c.NewSemaphore(key, 1)
		wantAvailable(t, one, 0)
		p := one.Permit()
		for i, h := range held {
			if ok, err := p.TryAcquire(ctx); ok || err != nil {
				t.Fatalf("n=1 TryAcquire() with %d permits out = %v, %v, want false, nil", 3-i, ok, err)
			}
			must(t, "Extend() of a permit taken under a larger n", h.Extend(ctx, time.Minute))
			must(t, "Release()", h.Release(ctx))
		}
		if ok, err := p.TryAcquire(ctx); !ok || err != nil {
			t.Fatalf("n=1 TryAcquire() with none out = %v, %v, want true, nil", ok, err)
		}
		five := c.NewSemaphore(key, 5)
		wantAvailable(t, five, 4)
		for range 4 {
			if ok, err := five.Permit().TryAcquire(ctx); !ok || err != nil {
				t.Fatalf("n=5 TryAcquire() = %v, %v, want true, nil", ok, err)
			}
		}
		if ok, err := five.Permit().TryAcquire(ctx); ok || err != nil {
			t.Fatalf("n=5 sixth TryAcquire() = %v, %v, want false, nil", ok, err)
		}
		wantAvailable(t, three, 0)
	})
}

// TestSemaphore_badInput: n <= 0, options a semaphore cannot honour, an
// empty key and zero values give errors wrapping ErrInvalid from every
// verb, never a panic.
func TestSemaphore_badInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, miniTarget(t).rdb)
	for name, sem := range map[string]*lock.Semaphore{
		"n=0":          c.NewSemaphore("k", 0),
		"n=-1":         c.NewSemaphore("k", -1),
		"empty key":    c.NewSemaphore("", 1),
		"watch":        c.NewSemaphore("k", 1, lock.WithReleaseMode(lock.ReleaseWatch)),
		"owner":        c.NewSemaphore("k", 1, lock.WithOwner("me")),
		"replica ack":  c.NewSemaphore("k", 1, lock.WithReplicaAck(1, time.Second)),
		"ttl":          c.NewSemaphore("k", 1, lock.WithTTL(0)),
		"zero":         &lock.Semaphore{},
		"nil":          nil,
		"zero client":  (&lock.Client{}).NewSemaphore("k", 1),
		"nil client":   (*lock.Client)(nil).NewSemaphore("k", 1),
		"prefix brace": c.NewSemaphore("k", 1, lock.WithPrefix("a{")),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sem.Available(ctx)
			wantErr(t, "Available()", err, lock.ErrInvalid)
			p := sem.Permit()
			wantErr(t, "Acquire()", p.Acquire(ctx), lock.ErrInvalid)
			_, err = p.TryAcquire(ctx)
			wantErr(t, "TryAcquire()", err, lock.ErrInvalid)
			wantErr(t, "Release()", p.Release(ctx), lock.ErrInvalid)
			wantErr(t, "Extend()", p.Extend(ctx, time.Second), lock.ErrInvalid)
			wantErr(t, "WithPermit()", sem.WithPermit(ctx, func(context.Context) error { return nil }), lock.ErrInvalid)
		})
	}
	if n := c.NewSemaphore("k", 0).N(); n != 0 {
		t.Fatalf("N() = %d, want 0", n)
	}
	if err := c.NewSemaphore("k", 0).WithPermit(ctx, func(context.Context) error { return nil }); !strings.Contains(fmt.Sprint(err), "n must be at least 1") {
		t.Fatalf("error %q does not say what n must be", err)
	}
}

// TestSemaphore_mixedKinds: a semaphore and a mutex on one key exclude each
// other with an error wrapping ErrInvalid that names both kinds, both ways,
// never WRONGTYPE noise; so does a read-write lock's hash.
func TestSemaphore_mixedKinds(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)

		sem := c.NewSemaphore(key, 2)
		p := sem.Permit()
		must(t, "Acquire()", p.Acquire(ctx))
		for name, l := range map[string]*lock.Lock{
			"mutex":     c.NewLock(key),
			"reentrant": c.NewLock(key, lock.WithOwner("me")),
			"watch":     c.NewLock(key, lock.WithReleaseMode(lock.ReleaseWatch)),
		} {
			ok, err := l.TryAcquire(ctx)
			wantKindErr(t, name+" TryAcquire() on a semaphore", ok, err, `is a semaphore, not a mutex`)
			err = l.Acquire(ctx)
			wantKindErr(t, name+" Acquire() on a semaphore", false, err, `is a semaphore, not a mutex`)
		}
		must(t, "Release()", p.Release(ctx))

		for name, hold := range map[string]*lock.Lock{
			"mutex":     c.NewLock(key),
			"reentrant": c.NewLock(key, lock.WithOwner("me")),
		} {
			must(t, name+" Acquire()", hold.Acquire(ctx))
			// The same kind, held: contention, not an error.
			if ok, err := c.NewLock(key, lock.WithReleaseMode(lock.ReleaseWatch)).TryAcquire(ctx); ok || err != nil {
				t.Fatalf("script-free TryAcquire() on a held %s = %v, %v, want false, nil", name, ok, err)
			}
			ok, err := sem.Permit().TryAcquire(ctx)
			wantKindErr(t, "semaphore TryAcquire() on a "+name, ok, err, `is a mutex, not a semaphore`)
			_, err = sem.Available(ctx)
			wantKindErr(t, "Available() on a "+name, false, err, `is a mutex, not a semaphore`)
			must(t, name+" Release()", hold.Release(ctx))
		}

		// A read-write lock's primary key: a hash with "mode" and no ''.
		must(t, "HSET", tg.rdb.HSet(ctx, lockKey(key), "mode", "read", "r1", 1).Err())
		ok, err := sem.Permit().TryAcquire(ctx)
		wantKindErr(t, "semaphore TryAcquire() on a read-write lock", ok, err, `is a read-write lock, not a semaphore`)
		ok, err = c.NewLock(key).TryAcquire(ctx)
		wantKindErr(t, "mutex TryAcquire() on a read-write lock", ok, err, `is a read-write lock, not a mutex`)
		ok, err = c.NewLock(key, lock.WithReleaseMode(lock.ReleaseWatch)).TryAcquire(ctx)
		wantKindErr(t, "script-free mutex TryAcquire() on a read-write lock", ok, err, `is a read-write lock, not a mutex`)
	})
}

func wantKindErr(t *testing.T, call string, ok bool, err error, text string) {
	t.Helper()
	if ok || !errors.Is(err, lock.ErrInvalid) || !strings.Contains(fmt.Sprint(err), text) || strings.Contains(fmt.Sprint(err), "WRONGTYPE") {
		t.Fatalf("%s = %v, %v; want false and an ErrInvalid saying %q", call, ok, err, text)
	}
}
