package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// Sizes of the multi-process mutual exclusion run.
const (
	mutexProcs      = 4
	mutexGoroutines = 16
	mutexKeys       = 8
	mutexIters      = 1600 // per goroutine: 4*16*1600 = 102 400 acquisitions
)

// mutexResult is what a mutex worker reports.
type mutexResult struct {
	Acquired   int            `json:"acquired"`
	PerKey     map[string]int `json:"per_key"` // increments of each shared record
	Overlaps   int            `json:"overlaps"`
	Rejected   int            `json:"rejected"` // fenced writes the store refused
	Errors     int            `json:"errors"`
	FirstError string         `json:"first_error,omitempty"`
	ElapsedMS  int64          `json:"elapsed_ms"`
}

func recordKey(key string) string { return "ft:record:" + key }

// TestMutex_multiProcess runs mutexProcs worker processes, each with
// mutexGoroutines goroutines taking mutexKeys locks in turn against one
// redis-server. Inside each critical section a goroutine reports to the
// referee (overlap detector and fenced store) and increments a shared record
// in Redis with a plain GET then SET, which loses updates as soon as two
// sections of a key overlap.
func TestMutex_multiProcess(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	ref := startReferee(t)
	hist := newHistory(t)
	rdb := s.Client(t)
	ctx := context.Background()

	start := time.Now()
	workers := make([]*worker, mutexProcs)
	for i := range workers {
		workers[i] = startWorker(t, "mutex",
			"FT_REDIS="+s.Addr(), "FT_REFEREE="+ref.addr(), hist.workerEnv(),
			"FT_GOROUTINES="+strconv.Itoa(mutexGoroutines),
			"FT_KEYS="+strconv.Itoa(mutexKeys), "FT_ITERS="+strconv.Itoa(mutexIters),
			"FT_SEED="+strconv.Itoa(i))
	}
	var total mutexResult
	total.PerKey = map[string]int{}
	for _, r := range collect[mutexResult](t, workers, "mutex", 4*time.Minute) {
		total.Acquired += r.Acquired
		total.Overlaps += r.Overlaps
		total.Rejected += r.Rejected
		total.Errors += r.Errors
		if total.FirstError == "" {
			total.FirstError = r.FirstError
		}
		for k, n := range r.PerKey {
			total.PerKey[k] += n
		}
	}
	elapsed := time.Since(start)

	lost := 0
	for i := range mutexKeys {
		key := mutexKey(i)
		got, err := rdb.Get(ctx, recordKey(key)).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET %s: %v", recordKey(key), err)
		}
		lost += total.PerKey[key] - got
	}
	st := ref.stats()
	nops, took := checkLinearizable(t, hist.all(t), 1)
	figure(t, "mutex", "procs", mutexProcs, "goroutines", mutexGoroutines, "keys", mutexKeys,
		"acquisitions", total.Acquired, "elapsed_ms", elapsed.Milliseconds(),
		"acq_per_s", int(float64(total.Acquired)/elapsed.Seconds()),
		"overlaps", st.Overlaps, "lost_updates", lost, "stale_presented", st.StalePresented,
		"stale_accepted", st.StaleAccepted, "fenced_rejected", st.Rejected, "errors", total.Errors,
		"history_ops", nops, "porcupine_ms", took.Milliseconds())

	if want := mutexProcs * mutexGoroutines * mutexIters; total.Acquired != want {
		t.Errorf("acquisitions = %d, want %d (errors %d, first: %s)", total.Acquired, want, total.Errors, total.FirstError)
	}
	if st.Enters != total.Acquired {
		t.Errorf("referee saw %d sections, workers report %d", st.Enters, total.Acquired)
	}
	if st.Overlaps != 0 || total.Overlaps != 0 {
		t.Errorf("overlaps = %d (workers saw %d), want 0", st.Overlaps, total.Overlaps)
	}
	if lost != 0 {
		t.Errorf("lost updates = %d, want 0", lost)
	}
	if st.StaleAccepted != 0 || st.Rejected != 0 {
		t.Errorf("fenced store: %d stale accepted, %d rejected, want 0 and 0", st.StaleAccepted, st.Rejected)
	}
}

func mutexKey(i int) string { return "mutex-" + strconv.Itoa(i) }

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// mutexWorker is the worker side of TestMutex_multiProcess.
func mutexWorker() error {
	goroutines, keys, iters := envInt("FT_GOROUTINES", 16), envInt("FT_KEYS", 8), envInt("FT_ITERS", 100)
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FT_REDIS"), PoolSize: 2 * goroutines})
	defer rdb.Close()
	c := lock.NewClient(rdb, lock.WithTTL(10*time.Second))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	var (
		mu      sync.Mutex
		res     = mutexResult{PerKey: map[string]int{}}
		failed  atomic.Int64
		started = time.Now()
		wg      sync.WaitGroup
	)
	seed := uint64(envInt("FT_SEED", 0))
	for g := range goroutines {
		wg.Go(func() {
			historyGoroutine(g, func(err error) {
				mu.Lock()
				defer mu.Unlock()
				res.Errors++
				res.FirstError = err.Error()
			}, func(ref *refClient, me string, ops *[]histOp) {
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				perKey := map[string]int{}
				var n, overlaps, rejected, errs int
				var first error
				for range iters {
					key := mutexKey(rng.IntN(keys))
					ok, ov, rej, err := mutexSection(ctx, c, rdb, ref, key, me, ops)
					if ok {
						n++
						perKey[key]++
					}
					if err != nil {
						errs++
						if first == nil {
							first = err
						}
						failed.Add(1)
					}
					overlaps += ov
					rejected += rej
					if failed.Load() > 100 {
						break // something is badly wrong; report what we have
					}
				}
				mu.Lock()
				defer mu.Unlock()
				res.Acquired += n
				res.Overlaps += overlaps
				res.Rejected += rejected
				res.Errors += errs
				if first != nil && res.FirstError == "" {
					res.FirstError = first.Error()
				}
				for k, v := range perKey {
					res.PerKey[k] += v
				}
			})
		})
	}
	wg.Wait()
	res.ElapsedMS = time.Since(started).Milliseconds()
	report("mutex", res)
	return nil
}

// mutexSection takes key, does the read-modify-write on its record and the
// fenced write, and releases. ok reports that the record was incremented
// under the lock. The hold, its fenced write and its release are appended
// to ops as client's.
func mutexSection(ctx context.Context, c *lock.Client, rdb *redis.Client, ref *refClient, key, client string,
	ops *[]histOp) (ok bool, overlaps, rejected int, err error) {
	l := c.NewLock(key)
	call := now()
	if err := l.Acquire(ctx); err != nil {
		return false, 0, 0, err
	}
	*ops = append(*ops, histOp{Op: 'A', Key: key, Client: client, Mode: holdExclusive, Fence: l.Fence(), Call: call, Ret: now()})
	defer func() {
		call := now()
		rerr := l.Release(context.WithoutCancel(ctx))
		*ops = append(*ops, histOp{Op: 'R', Key: key, Client: client, Call: call, Ret: now()})
		if rerr != nil && err == nil {
			err = fmt.Errorf("release: %w", rerr)
		}
	}()
	occ, err := ref.enter(key, l.Fence())
	if err != nil {
		return false, 0, 0, err
	}
	if occ != 1 {
		overlaps++
	}
	v, err := rdb.Get(ctx, recordKey(key)).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, overlaps, 0, err
	}
	if err := rdb.Set(ctx, recordKey(key), v+1, 0).Err(); err != nil {
		return false, overlaps, 0, err
	}
	call = now()
	accepted, err := ref.write(key, l.Fence())
	if err != nil {
		return false, overlaps, 0, err
	}
	*ops = append(*ops, histOp{Op: 'W', Key: key, Client: client, Fence: l.Fence(), OK: accepted, Call: call, Ret: now()})
	if !accepted {
		rejected++
	}
	if err := ref.exit(key); err != nil {
		return false, overlaps, rejected, err
	}
	return true, overlaps, rejected, nil
}

// TestMutex_detectorsCatchABrokenLock is the control of the mutex test: the
// same critical section under a lock whose lease (MinTTL, never renewed) is
// shorter than the section (MinTTL + 20ms plus round trips) must show
// overlaps and lost updates, so the zeros reported above are measurements,
// not blind spots.
func TestMutex_detectorsCatchABrokenLock(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	ref := startReferee(t)
	hist := newHistory(t)
	rdb := s.Client(t)
	locks := lock.NewClient(rdb, lock.WithTTL(lock.MinTTL), lock.WithWatchdog(false))
	defer locks.Close()
	ctx := context.Background()
	const goroutines, iters = 8, 5
	const section = lock.MinTTL + 20*time.Millisecond
	var wg sync.WaitGroup
	var done atomic.Int64
	for g := range goroutines {
		wg.Go(func() {
			me := "g" + strconv.Itoa(g)
			rc, err := dialReferee(ref.addr())
			if err != nil {
				return
			}
			defer rc.close()
			for range iters {
				l := locks.NewLock("broken")
				if hist.acquire(ctx, l, me, holdExclusive) != nil {
					continue
				}
				if _, err := rc.enter("broken", l.Fence()); err != nil {
					return
				}
				v, _ := rdb.Get(ctx, recordKey("broken")).Int()
				time.Sleep(section)
				rdb.Set(ctx, recordKey("broken"), v+1, 0)
				_, _ = hist.write(rc, "broken", me, l.Fence())
				_ = rc.exit("broken")
				_ = hist.release(ctx, l, me)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	got, _ := rdb.Get(ctx, recordKey("broken")).Int()
	st := ref.stats()
	lost := int(done.Load()) - got
	// Each holder's view runs to its Release, past its 5ms lease.
	verdict := linearizable(hist.all(t), 1)
	figure(t, "mutex_control_broken_lock", "sections", done.Load(), "overlaps", st.Overlaps,
		"lost_updates", lost, "stale_presented", st.StalePresented, "fenced_rejected", st.Rejected,
		"stale_accepted", st.StaleAccepted, "porcupine", verdict)
	if verdict != porcupine.Illegal {
		t.Errorf("porcupine on the broken lock's history = %s, want %s", verdict, porcupine.Illegal)
	}
	if st.Overlaps == 0 || lost == 0 || st.StalePresented == 0 {
		t.Errorf("a %v lease over %v sections: overlaps %d, lost updates %d, stale writes %d; want all above 0",
			lock.MinTTL, section, st.Overlaps, lost, st.StalePresented)
	}
}
