package faulttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestProcess_multiHolderKilled SIGKILLs a worker process holding a
// multi-lock over three keys: every member comes free by its TTL, and a
// multi-lock over the same keys waiting here gets all of them, each with a
// fence above the killed hold's.
func TestProcess_multiHolderKilled(t *testing.T) {
	holderKilled(t, "multi_holder_killed", multiKind("mk-a", "mk-b", "mk-c"))
}

// TestProcess_multiHolderPaused SIGSTOPs a worker process holding a
// multi-lock over three keys for twice the TTL; a multi-lock here takes
// them and writes to each; the resumed worker's late write to every member
// carries its old fences and each is rejected.
func TestProcess_multiHolderPaused(t *testing.T) {
	holderPaused(t, "multi_holder_paused", multiKind("mp-a", "mp-b", "mp-c"))
}

// Sizes of the multi-process multi-lock run.
const (
	multiProcs      = 3
	multiGoroutines = 4
	multiIters      = 50 // per goroutine: 3*4*50 = 600 multi-lock holds
)

// multiSets are the overlapping key sets the multi-lock workers take, as
// FT_SETS: sets separated by ',', keys by '+'. Every pair of sets shares a
// key, and the last takes all three.
var multiSets = []string{"ma+mb", "mb+mc", "ma+mc", "ma+mb+mc"}

// multiResult is what a multi-lock worker reports.
type multiResult struct {
	Acquired   int    `json:"acquired"`
	Rejected   int    `json:"rejected"` // fenced writes the store refused
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
}

// TestMulti_multiProcess runs multi-lock workers in multiProcs processes
// against one redis-server, each goroutine taking overlapping key sets
// (multiSets) in random order: every acquisition must complete (no
// deadlock), no member's section may overlap another's, the fenced store
// must accept every write, and each key's history — a multi-lock hold is
// an acquire of every member with its fence there — must be linearizable.
func TestMulti_multiProcess(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	multiProcess(t, "multi", "FT_REDIS="+s.Addr())
}

// TestCluster_multiProcess is TestMulti_multiProcess on a 3-master Redis
// Cluster, the keys in different slots, so every hold spans slot groups.
func TestCluster_multiProcess(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, err := slotOwner(ctx, cl.Client(t))
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	slots, masters := map[int]bool{}, map[string]bool{}
	for _, set := range multiSets {
		for k := range strings.SplitSeq(set, "+") {
			slots[slotOf(k)] = true
			masters[owner[slotOf(k)]] = true
		}
	}
	if len(slots) < 3 {
		t.Fatalf("the keys of %v lie in %d slots, want 3", multiSets, len(slots))
	}
	t.Logf("the keys lie in %d slots on %d masters", len(slots), len(masters))
	multiProcess(t, "cluster_multi", "FT_CLUSTER="+strings.Join(cl.Addrs(), ","))
}

// multiProcess runs the multi-lock workers against the Redis that env
// names (FT_REDIS or FT_CLUSTER) and checks their run.
func multiProcess(t *testing.T, scenario, env string) {
	ref := startReferee(t)
	hist := newHistory(t)
	start := time.Now()
	var ws []*worker
	for i := range multiProcs {
		ws = append(ws, startWorker(t, "multi", env, "FT_REFEREE="+ref.addr(), hist.workerEnv(),
			"FT_SETS="+strings.Join(multiSets, ","), "FT_GOROUTINES="+strconv.Itoa(multiGoroutines),
			"FT_ITERS="+strconv.Itoa(multiIters), "FT_SEED="+strconv.Itoa(i)))
	}
	var total multiResult
	for _, r := range collect[multiResult](t, ws, "multi", 3*time.Minute) {
		total.Acquired += r.Acquired
		total.Rejected += r.Rejected
		total.Errors += r.Errors
		if total.FirstError == "" {
			total.FirstError = r.FirstError
		}
	}
	elapsed := time.Since(start)
	st := ref.stats()
	nops, took := checkLinearizable(t, hist.all(t), 1)
	figure(t, scenario, "procs", multiProcs, "goroutines", multiGoroutines, "sets", strings.Join(multiSets, ","),
		"acquisitions", total.Acquired, "elapsed_ms", elapsed.Milliseconds(), "overlaps", st.Overlaps,
		"stale_accepted", st.StaleAccepted, "fenced_rejected", st.Rejected, "errors", total.Errors,
		"history_ops", nops, "porcupine_ms", took.Milliseconds())
	if want := multiProcs * multiGoroutines * multiIters; total.Acquired != want {
		t.Errorf("acquisitions = %d, want %d (errors %d, first: %s)", total.Acquired, want, total.Errors, total.FirstError)
	}
	if st.Overlaps != 0 || st.StaleAccepted != 0 || st.Rejected != 0 || total.Rejected != 0 {
		t.Errorf("referee: %d overlaps, %d stale accepted, %d rejected; want 0, 0, 0", st.Overlaps, st.StaleAccepted, st.Rejected)
	}
}

// multiWorker is the worker side of multiProcess.
func multiWorker() error {
	var rdb redis.UniversalClient
	if addrs := os.Getenv("FT_CLUSTER"); addrs != "" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: os.Getenv("FT_REDIS")})
	}
	defer rdb.Close()
	c := lock.NewClient(rdb, lock.WithTTL(5*time.Second))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sets [][]string
	for set := range strings.SplitSeq(os.Getenv("FT_SETS"), ",") {
		sets = append(sets, strings.Split(set, "+"))
	}
	var (
		mu  sync.Mutex
		res multiResult
		wg  sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Errors++
		if res.FirstError == "" {
			res.FirstError = err.Error()
		}
	}
	seed := uint64(envInt("FT_SEED", 0))
	for g := range envInt("FT_GOROUTINES", 3) {
		wg.Go(func() {
			historyGoroutine(g, fail, func(ref *refClient, me string, ops *[]histOp) {
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				for range envInt("FT_ITERS", 20) {
					rejected, err := multiSection(ctx, c, ref, sets[rng.IntN(len(sets))], me, ops)
					if err != nil {
						fail(err)
						continue
					}
					mu.Lock()
					res.Acquired++
					res.Rejected += rejected
					mu.Unlock()
				}
			})
		})
	}
	wg.Wait()
	report("multi", res)
	return nil
}

// multiSection takes a multi-lock over keys, makes the fenced write to
// each member inside the referee's sections, and releases, appending the
// hold, its writes and its release to ops as client's.
func multiSection(ctx context.Context, c *lock.Client, ref *refClient, keys []string, client string, ops *[]histOp) (rejected int, err error) {
	m := c.NewMultiLock(slices.Clone(keys))
	call := now()
	if err := m.Acquire(ctx); err != nil {
		return 0, fmt.Errorf("acquire %v: %w", keys, err)
	}
	*ops = append(*ops, acquireOps(m, client, holdExclusive, call, now())...)
	defer func() {
		call := now()
		rerr := m.Release(context.WithoutCancel(ctx))
		*ops = append(*ops, endOps(m, client, call, now())...)
		if rerr != nil && err == nil {
			err = fmt.Errorf("release %v: %w", keys, rerr)
		}
	}()
	if err := enterAll(ref, m); err != nil {
		return 0, err
	}
	for _, mb := range members(m) {
		call := now()
		ok, err := ref.write(mb.key, mb.fence)
		if err != nil {
			return rejected, err
		}
		*ops = append(*ops, histOp{Op: 'W', Key: mb.key, Client: client, Fence: mb.fence, OK: ok, Call: call, Ret: now()})
		if !ok {
			rejected++
		}
	}
	for _, mb := range members(m) {
		if err := ref.exit(mb.key); err != nil {
			return rejected, err
		}
	}
	return rejected, nil
}
