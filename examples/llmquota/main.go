// Llmquota: three replicas of an agent service share each tenant's LLM
// quota, whichever replicas its requests land on: a rate of requests and a
// rate of tokens (two limiters, taken together), and a cap on concurrent
// calls (a semaphore). Each call reserves its estimated tokens; the fake
// model reports what it really used, and the reservation is settled with
// that count, giving the rest back to the tenant's budget.
//
// Run it with `go run ./examples/llmquota` (an in-process Redis is started),
// or against your own server with `REDIS_ADDR=localhost:6379 go run ./examples/llmquota`.
// It exits 1 unless every request was served, no tenant ever had more calls
// in flight than its quota, and no tenant used more tokens than its rate
// allowed over the run.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentlock/lock"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const (
	replicas          = 3
	requestsPerTenant = 12  // per replica
	estimate          = 400 // tokens reserved per call, before knowing
)

// quotas is each tenant's plan: concurrent model calls, fleet-wide.
var quotas = map[string]int{"acme": 3, "globex": 1}

// Each tenant's rates, per second so that the demo is short: requests, and
// tokens (a call may take up to one burst at once).
var (
	rps = lock.Rate{N: 30, Per: time.Second, Burst: 10}
	tps = lock.Rate{N: 6_000, Per: time.Second, Burst: 2_000}
)

// tokens counts, for the check at the end, the tokens each tenant used.
var tokens = map[string]*atomic.Int64{"acme": {}, "globex": {}}

// inFlight tracks, for the check at the end, each tenant's calls in flight
// across every replica and the most seen at once.
type inFlight struct{ now, peak atomic.Int32 }

var flights = map[string]*inFlight{"acme": {}, "globex": {}}

// callModel is the rate-limited part: a completion request to a provider,
// which reports the tokens it used: often fewer than estimated, sometimes
// more.
func callModel(ctx context.Context, tenant, prompt string) (string, int64, error) {
	f := flights[tenant]
	n := f.now.Add(1)
	defer f.now.Add(-1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	used := estimate/4 + rand.Int64N(estimate)
	select {
	case <-time.After(15 * time.Millisecond):
		tokens[tenant].Add(used)
		return "completion of " + prompt, used, nil
	case <-ctx.Done():
		return "", 0, context.Cause(ctx) // the permit was lost: stop
	}
}

// replica is one process of the service: its own Redis connection pool and
// lock Client, one semaphore per tenant.
type replica struct {
	locks *lock.Client
	rdb   *redis.Client
}

// complete serves one request: it waits until the tenant's request and
// token rates have room for it (one reservation against both), then for a
// free place in its concurrency quota, calls the model and settles the
// token reservation with the real count.
func (r *replica) complete(ctx context.Context, tenant, prompt string) (out string, err error) {
	// Keys sharing the hash tag (the tenant) can be taken together on a
	// Redis Cluster too.
	req := r.locks.NewLimiter(tenant+"}:rps", rps)
	tok := r.locks.NewLimiter(tenant+"}:tps", tps)
	rs, err := lock.WaitAll(ctx, lock.Take{L: req, N: 1}, lock.Take{L: tok, N: estimate})
	if err != nil {
		return "", err
	}
	var used int64
	sem := r.locks.NewSemaphore("llm-quota:"+tenant, quotas[tenant], lock.WithWaitTimeout(30*time.Second))
	err = sem.WithPermit(ctx, func(ctx context.Context) error {
		out, used, err = callModel(ctx, tenant, prompt)
		return err
	})
	// The call failed: its tokens (used is 0) go back as well.
	return out, errors.Join(err, rs[1].Settle(ctx, used))
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "llmquota:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		m, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer m.Close()
		addr = m.Addr()
	}
	ctx := context.Background()
	var fleet []*replica
	for range replicas {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		locks := lock.NewClient(rdb)
		defer locks.Close()
		fleet = append(fleet, &replica{locks: locks, rdb: rdb})
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		served = map[string]int{}
		errs   []error
	)
	start := time.Now()
	for i, r := range fleet {
		for tenant := range quotas {
			for j := range requestsPerTenant {
				wg.Go(func() {
					_, err := r.complete(ctx, tenant, fmt.Sprintf("prompt %d.%d", i, j))
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, err)
						return
					}
					served[tenant]++
				})
			}
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	elapsed := time.Since(start).Round(time.Millisecond)
	var bad []string
	// The run's token budget: the rate over the time it took, plus the
	// burst saved up before, plus one more for settles (docs/guide.md).
	budget := int64(elapsed.Seconds()*float64(tps.N)) + 2*tps.Burst
	for tenant, quota := range quotas {
		peak, used := flights[tenant].peak.Load(), tokens[tenant].Load()
		fmt.Printf("tenant %-6s quota %d: %d requests on %d replicas, at most %d model calls at once, %d tokens (budget %d)\n",
			tenant, quota, served[tenant], replicas, peak, used, budget)
		if peak > int32(quota) || served[tenant] != replicas*requestsPerTenant || used > budget {
			bad = append(bad, tenant)
		}
	}
	fmt.Printf("done in %v\n", elapsed)
	if len(bad) > 0 {
		return fmt.Errorf("quota broken or requests lost for %v", bad)
	}
	return nil
}
