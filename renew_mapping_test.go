package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// renewCounter is an Observer counting each hold's renewals by token.
type renewCounter struct {
	mu      sync.Mutex
	renewed map[string]int
	changed chan struct{} // signalled on every renewal
}

func newRenewCounter() *renewCounter {
	return &renewCounter{renewed: map[string]int{}, changed: make(chan struct{}, 1)}
}

func (r *renewCounter) Observe(e lock.Event) {
	if e.Kind != lock.EventRenewed {
		return
	}
	r.mu.Lock()
	r.renewed[e.Token]++
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *renewCounter) count(token string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renewed[token]
}

// mappedHold is one hold of TestRenewal_repliesMapToTheirHolds and what the
// test did to its key before the first renewal.
type mappedHold struct {
	l     *lock.Lock
	fate  string // "kept", "deleted", "stolen", "wrongtype"
	round int    // when the fate strikes: 1 before the first renewal, 2 after it
	token string
	thief *lock.Lock // the other client's hold of a stolen key
}

// TestRenewal_repliesMapToTheirHolds: up to 1300 holds of one Client (mutexes,
// read and write locks of RWLocks in the same pipelines, permits of two
// semaphores with different n) are renewed in chunks of up to 500 calls
// with mixed scripts, the first renewal after SCRIPT FLUSH (NOSCRIPT, then
// EVAL). Before it, some keys are deleted, some taken by another client,
// some replaced by a string (WRONGTYPE). Each hold must get its own
// answer: the deleted and stolen ones are lost for those reasons, the
// WRONGTYPE ones lost after failing, every other hold renewed at least
// twice and never lost, and the thief's keys stay the thief's. It runs
// with read-write locks among the mutexes (EvalAll's pipelines of mixed
// scripts) and without (ExtendAll's).
func TestRenewal_repliesMapToTheirHolds(t *testing.T) {
	t.Parallel()
	for _, rws := range []int{100, 0} { // mixed pipelines (EvalAll), then ExtendAll's
		t.Run(fmt.Sprintf("rw=%d", rws), func(t *testing.T) {
			tg := realTarget(t)
			repliesMapToTheirHolds(t, tg.rdb, tg.newRDB(t), rws)
		})
	}
}

// TestRenewal_clusterRepliesMapToTheirHolds is
// TestRenewal_repliesMapToTheirHolds on a three-master Redis Cluster: each
// master's chunk spans many slots of that master.
func TestRenewal_clusterRepliesMapToTheirHolds(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0) // of its own: the test flushes the script cache
	rdb := redis.NewClusterClient(cl.ClusterOptions())
	t.Cleanup(func() { rdb.Close() })
	other := redis.NewClusterClient(cl.ClusterOptions())
	t.Cleanup(func() { other.Close() })
	repliesMapToTheirHolds(t, rdb, other, 100)
}

// repliesMapToTheirHolds runs TestRenewal_repliesMapToTheirHolds on rdb,
// with rws read-write locks, the thief's calls going through other.
func repliesMapToTheirHolds(t *testing.T, rdb, other redis.UniversalClient, rws int) {
	ctx := context.Background()
	obs := newRenewCounter()
	ttl := 3 * time.Second
	c := newClient(t, rdb, lock.WithTTL(ttl), lock.WithObserver(obs), lock.WithNotify(false))
	thief := newClient(t, other, lock.WithTTL(time.Minute), lock.WithWatchdog(false), lock.WithNotify(false))

	const mutexes, permits = 1000, 100
	holds := make([]mappedHold, 0, mutexes+2*rws+permits)
	for i := range mutexes {
		fate, round := "kept", 0
		switch {
		case i%7 == 3:
			fate, round = "deleted", 1
		case i%11 == 5:
			fate, round = "stolen", 1
		case i%97 == 50:
			fate, round = "wrongtype", 1
		case i%13 == 6:
			fate, round = "deleted", 2
		case i%17 == 8:
			fate, round = "stolen", 2
		}
		holds = append(holds, mappedHold{l: c.NewLock(fmt.Sprintf("%s:m%d", keyFor(t), i)), fate: fate, round: round})
	}
	for i := range rws {
		rw := c.NewRWLock(fmt.Sprintf("%s:rw%d", keyFor(t), i))
		if i%2 == 0 {
			holds = append(holds, mappedHold{l: rw.ReadLock(), fate: "kept"})
		} else {
			holds = append(holds, mappedHold{l: rw.WriteLock(), fate: "kept"})
		}
	}
	for i := range permits {
		s := c.NewSemaphore(fmt.Sprintf("%s:s%d", keyFor(t), i), 2+i%2)
		holds = append(holds, mappedHold{l: s.Permit(), fate: "kept"})
	}
	// Acquire in parallel so that their renewals fall due together.
	var wg sync.WaitGroup
	errs := make(chan error, len(holds))
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(holds); i += 8 {
				if err := holds[i].l.Acquire(ctx); err != nil {
					errs <- fmt.Errorf("hold %d: %w", i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range holds {
		holds[i].token = holds[i].l.Token()
	}
	// Round 1 spoils keys before the first renewal (due a third of the TTL
	// after the acquire), which meets NOSCRIPT and replays by EVAL; round 2
	// after it, for renewals by SHA.
	must(t, "SCRIPT FLUSH", rdb.ScriptFlush(ctx).Err())
	for round := 1; round <= 2; round++ {
		base := map[string]int{}
		for i := range holds {
			h := &holds[i]
			base[h.token] = obs.count(h.token)
			if h.round != round {
				continue
			}
			k := lockKey(h.l.Key())
			switch h.fate {
			case "deleted", "stolen":
				must(t, "DEL", rdb.Del(ctx, k).Err())
				if h.fate == "stolen" {
					h.thief = thief.NewLock(h.l.Key())
					must(t, "thief Acquire", h.thief.Acquire(ctx))
				}
			case "wrongtype":
				must(t, "DEL", rdb.Del(ctx, k).Err())
				must(t, "SET", rdb.Set(ctx, k, "x", 0).Err())
			}
		}
		if round == 1 && obs.count(holds[0].token) > 0 {
			t.Skip("a renewal came before the keys were spoiled: machine too slow")
		}
		deadline := time.After(20 * time.Second)
		for {
			pending := 0
			for _, h := range holds {
				switch {
				case h.round > round || h.fate == "kept":
					if obs.count(h.token) < base[h.token]+2 {
						pending++
					}
				case !isClosed(h.l.Lost()):
					pending++
				}
			}
			if pending == 0 {
				break
			}
			select {
			case <-obs.changed:
			case <-deadline:
				t.Fatalf("round %d: %d holds neither renewed twice nor lost as expected", round, pending)
			case <-time.After(100 * time.Millisecond): // losses signal no renewal
			}
		}
	}
	for i, h := range holds {
		var le *lock.LostError
		lost := errors.As(h.l.LostErr(), &le)
		switch h.fate {
		case "kept":
			if lost {
				t.Errorf("hold %d (%s) kept its key, yet lost: %v", i, h.l.Key(), h.l.LostErr())
			}
		case "stolen":
			if !lost || le.Reason != lock.LossStolen {
				t.Errorf("hold %d stolen: loss %v, want LossStolen", i, h.l.LostErr())
			}
			if got := rdb.Get(ctx, lockKey(h.l.Key())).Val(); got != h.thief.Token() {
				t.Errorf("hold %d: the key holds %q, not the thief's token", i, got)
			}
		case "deleted":
			if !lost || le.Reason == lock.LossStolen {
				t.Errorf("hold %d deleted: loss %v, want one of a key gone", i, h.l.LostErr())
			}
		case "wrongtype":
			if !lost {
				t.Errorf("hold %d WRONGTYPE: not lost", i)
			}
		}
	}
}

// TestRenewal_mixedChunkKeepsMutexHolderInfo: with holder info on, a
// mutex renewed in one pipeline with a read lock's renewal (same backend,
// same tick) keeps its holder-info hash alive: its renewals extend the
// hash as they do in a pipeline of mutexes alone.
func TestRenewal_mixedChunkKeepsMutexHolderInfo(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	obs := newRenewCounter()
	ttl := time.Second
	rdb := tg.newRDB(t)
	shared := &sharedPipeline{}
	rdb.AddHook(shared)
	c := newClient(t, rdb, lock.WithTTL(ttl), lock.WithHolderInfo(true), lock.WithObserver(obs), lock.WithNotify(false))
	m := c.NewLock(keyFor(t) + ":m")
	r := c.NewRWLock(keyFor(t) + ":rw").ReadLock()
	shared.keys = [2]string{lockKey(m.Key()), lockKey(r.Key())}
	must(t, "mutex Acquire", m.Acquire(ctx))
	must(t, "read Acquire", r.Acquire(ctx))
	for obs.count(m.Token()) < 3 || obs.count(r.Token()) < 3 {
		select {
		case <-obs.changed:
		case <-m.Lost():
			t.Fatalf("mutex lost: %v", m.LostErr())
		case <-time.After(10 * time.Second):
			t.Fatalf("no third renewal in 10s")
		}
	}
	if shared.n.Load() == 0 {
		t.Fatalf("the two holds were never renewed in one pipeline: the window this test is about did not open")
	}
	if d := pttl(t, tg.rdb, lockKey(m.Key())+":holders"); d <= 0 {
		t.Errorf("after 3 renewals (%v) the mutex's holder info has PTTL %v, want > 0 (it expired with the acquire's TTL)", 3*ttl/3, d)
	}
	info, err := c.Inspect(ctx, m.Key())
	must(t, "Inspect()", err)
	for _, h := range info.Holders {
		if h.Since.IsZero() {
			t.Errorf("Inspect() holder %+v has no holder info", h)
		}
	}
}

// sharedPipeline counts the pipelines that carry a command naming each of
// two keys: renewals of both holds sent in one round trip.
type sharedPipeline struct {
	keys [2]string // set before the first renewal
	n    atomic.Int32
}

func (h *sharedPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *sharedPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *sharedPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var seen [2]bool
		for _, cmd := range cmds {
			for _, a := range cmd.Args() {
				for i, k := range h.keys {
					if a == k {
						seen[i] = true
					}
				}
			}
		}
		if seen[0] && seen[1] {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}
