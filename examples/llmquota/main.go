// Llmquota: three replicas of an agent service share each tenant's quota of
// concurrent model calls through a semaphore per tenant, so no tenant ever
// has more calls in flight than its plan allows, whichever replicas its
// requests land on.
//
// Run it with `go run ./examples/llmquota` (an in-process Redis is started),
// or against your own server with `REDIS_ADDR=localhost:6379 go run ./examples/llmquota`.
// It exits 1 unless every request was served and no tenant ever had more
// calls in flight than its quota.
package main

import (
	"context"
	"errors"
	"fmt"
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
	requestsPerTenant = 12 // per replica
)

// quotas is each tenant's plan: concurrent model calls, fleet-wide.
var quotas = map[string]int{"acme": 3, "globex": 1}

// inFlight tracks, for the check at the end, each tenant's calls in flight
// across every replica and the most seen at once.
type inFlight struct{ now, peak atomic.Int32 }

var flights = map[string]*inFlight{"acme": {}, "globex": {}}

// callModel is the rate-limited part: a completion request to a provider.
func callModel(ctx context.Context, tenant, prompt string) (string, error) {
	f := flights[tenant]
	n := f.now.Add(1)
	defer f.now.Add(-1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	select {
	case <-time.After(15 * time.Millisecond):
		return "completion of " + prompt, nil
	case <-ctx.Done():
		return "", context.Cause(ctx) // the permit was lost: stop
	}
}

// replica is one process of the service: its own Redis connection pool and
// lock Client, one semaphore per tenant.
type replica struct {
	locks *lock.Client
	rdb   *redis.Client
}

// complete serves one request, waiting for a free place in the tenant's
// quota.
func (r *replica) complete(ctx context.Context, tenant, prompt string) (out string, err error) {
	sem := r.locks.NewSemaphore("llm-quota:"+tenant, quotas[tenant], lock.WithWaitTimeout(30*time.Second))
	err = sem.WithPermit(ctx, func(ctx context.Context) error {
		out, err = callModel(ctx, tenant, prompt)
		return err
	})
	return out, err
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
	for tenant, quota := range quotas {
		peak := flights[tenant].peak.Load()
		fmt.Printf("tenant %-6s quota %d: %d requests on %d replicas, at most %d model calls at once\n",
			tenant, quota, served[tenant], replicas, peak)
		if peak > int32(quota) || served[tenant] != replicas*requestsPerTenant {
			bad = append(bad, tenant)
		}
	}
	fmt.Printf("done in %v\n", elapsed)
	if len(bad) > 0 {
		return fmt.Errorf("quota broken or requests lost for %v", bad)
	}
	return nil
}
