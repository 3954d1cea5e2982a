package lock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/luascripts"
)

// rwExclusion runs, on each Client of cs (each over its own connection
// pool), readers and two writers (one through WithWriteLock) on one key: writers increment a counter
// in Redis with a non-atomic GET then SET, readers read it. It fails the
// test on a reader beside a writer, two writers at once, a lost update,
// writer fences not strictly increasing, or a reader fence below the last
// writer's.
func rwExclusion(t *testing.T, key string, rdb redis.UniversalClient, cs []*lock.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const readers, rounds = 4, 10
	counter := "{" + key + "}:counter" // the lock's slot, on a cluster too
	var d kindtest.RWHistory
	var wg sync.WaitGroup
	errs := make(chan error, 64)

	// First, readers of every Client hold the lock together.
	var inside atomic.Int32
	all := make(chan struct{})
	for i, c := range cs {
		wg.Go(func() {
			err := c.NewRWLock(key).WithReadLock(ctx, func(context.Context) error {
				if inside.Add(1) == int32(len(cs)) {
					close(all)
				}
				select {
				case <-all:
					return nil
				case <-ctx.Done():
					return fmt.Errorf("reader %d: not every reader got in beside it", i)
				}
			})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()

	for _, c := range cs {
		rw := c.NewRWLock(key)
		wg.Go(func() {
			for range rounds {
				err := rw.WithWriteLock(ctx, func(ctx context.Context) error {
					defer d.Leave(d.Enter(true, 0)) // WithWriteLock shows no fence
					n, _ := rdb.Get(ctx, counter).Int()
					return rdb.Set(ctx, counter, n+1, 0).Err()
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range rounds {
				w := rw.WriteLock()
				if err := w.Acquire(ctx); err != nil {
					errs <- err
					return
				}
				i := d.Enter(true, w.Fence())
				n, _ := rdb.Get(ctx, counter).Int()
				err := rdb.Set(ctx, counter, n+1, 0).Err()
				d.Leave(i)
				if err == nil {
					err = w.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
		for range readers {
			wg.Go(func() {
				for range 2 * rounds {
					r := rw.ReadLock()
					if err := r.Acquire(ctx); err != nil {
						errs <- err
						return
					}
					i := d.Enter(false, r.Fence())
					_, err := rdb.Get(ctx, counter).Result()
					d.Leave(i)
					if err == redis.Nil {
						err = nil
					}
					if err == nil {
						err = r.Release(ctx)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("holder error = %v", err)
	}
	d.Check(t)
	if n, _ := rdb.Get(ctx, counter).Int(); n != 2*len(cs)*rounds {
		t.Fatalf("counter = %d after %d locked increments", n, 2*len(cs)*rounds)
	}
	t.Logf("at most %d readers at once, %d sections", d.MaxReaders(), len(d.Ops()))
}

// TestRWLock_exclusion: 3 Clients, each with its own connection pool (as
// 3 processes), on a real redis-server.
func TestRWLock_exclusion(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	var cs []*lock.Client
	for range 3 {
		cs = append(cs, newClient(t, tg.newRDB(t), lock.WithTTL(5*time.Second)))
	}
	rwExclusion(t, keyFor(t), tg.rdb, cs)
}

// TestRWLock_cluster: the same on a 3-master Redis Cluster, with keys on
// every master; holds of both kinds renew through it.
func TestRWLock_cluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	rdb := cl.Client(t)
	var cs []*lock.Client
	for range 3 {
		cs = append(cs, newClient(t, cl.Client(t), lock.WithTTL(5*time.Second)))
	}
	rwExclusion(t, keyFor(t), rdb, cs)

	ctx := context.Background()
	c := newClient(t, rdb, lock.WithTTL(300*time.Millisecond))
	masters := map[string]bool{}
	var held []*lock.Lock
	for i := range 12 {
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		srv, err := cl.MasterForKey(ctx, lockKey(key))
		must(t, "MasterForKey()", err)
		masters[srv.Addr()] = true
		rw := c.NewRWLock(key)
		l := rw.ReadLock()
		if i%2 == 1 {
			l = rw.WriteLock()
		}
		must(t, "Acquire()", l.Acquire(ctx))
		held = append(held, l)
	}
	if len(masters) != 3 {
		t.Fatalf("keys landed on %d masters, want 3", len(masters))
	}
	// Renewals keep every hold past several TTLs.
	time.Sleep(time.Second)
	for _, l := range held {
		if isClosed(l.Lost()) {
			t.Fatalf("hold on %q lost: %v", l.Key(), l.LostErr())
		}
		must(t, "Release()", l.Release(ctx))
	}
}

// scriptsInPipelines is a go-redis hook recording, for every pipeline,
// the set of script SHAs it carried.
type scriptsInPipelines struct {
	mu   sync.Mutex
	seen []map[string]bool
}

func (h *scriptsInPipelines) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptsInPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (h *scriptsInPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		shas := map[string]bool{}
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 && strings.EqualFold(fmt.Sprint(a[0]), "evalsha") {
				shas[fmt.Sprint(a[1])] = true
			}
		}
		h.mu.Lock()
		h.seen = append(h.seen, shas)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *scriptsInPipelines) both(a, b string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.seen {
		if s[a] && s[b] {
			return true
		}
	}
	return false
}

// TestRWLock_renewedWithMutexes: read-write holds and mutex holds of one
// Client, acquired together, are renewed in the same pipeline, each by its
// own script, and outlive their TTL.
func TestRWLock_renewedWithMutexes(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	rdb := tg.newRDB(t)
	hook := &scriptsInPipelines{}
	rdb.AddHook(hook)
	ttl := 300 * time.Millisecond
	c := newClient(t, rdb, lock.WithTTL(ttl))
	r := c.NewRWLock(keyFor(t) + ":r").ReadLock()
	w := c.NewRWLock(keyFor(t) + ":w").WriteLock()
	m := c.NewLock(keyFor(t) + ":m")
	for _, l := range []*lock.Lock{r, w, m} {
		must(t, "Acquire()", l.Acquire(ctx))
	}
	deadline := time.Now().Add(5 * time.Second)
	for !hook.both(luascripts.Extend.Hash(), luascripts.RWExtend.Hash()) {
		if time.Now().After(deadline) {
			t.Fatalf("no renewal pipeline carried both extend scripts within 5s")
		}
		time.Sleep(10 * time.Millisecond) // polls a state, not a timing
	}
	time.Sleep(3 * ttl)
	for _, l := range []*lock.Lock{r, w, m} {
		if isClosed(l.Lost()) {
			t.Fatalf("%q lost: %v", l.Key(), l.LostErr())
		}
		if d, err := l.TTL(ctx); err != nil || d <= 0 {
			t.Fatalf("%q TTL() = %v, %v", l.Key(), d, err)
		}
		must(t, "Release()", l.Release(ctx))
	}
}
