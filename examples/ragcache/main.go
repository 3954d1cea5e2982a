// Ragcache: 50 concurrent requests for one uncached query run the expensive
// pipeline once, the others waiting for its answer (a double-checked cache
// fill, or stampede protection).
//
// Run it with `go run ./examples/ragcache` (an in-process Redis is started),
// or against your own server with `REDIS_ADDR=localhost:6379 go run ./examples/ragcache`.
// It exits 1 unless the pipeline ran exactly once and every request got the
// same answer.
package main

import (
	"context"
	"crypto/sha256"
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

const requests = 50

// runs counts pipeline invocations.
var runs atomic.Int64

// pipeline is the expensive part: retrieval, reranking, a model call.
func pipeline(ctx context.Context, query string) (string, error) {
	runs.Add(1)
	select {
	case <-time.After(40 * time.Millisecond):
		return fmt.Sprintf("answer to %q, built at %s", query, time.Now().Format(time.RFC3339Nano)), nil
	case <-ctx.Done():
		return "", context.Cause(ctx) // the lock was lost: stop working
	}
}

// answer returns the cached answer to query, building it at most once at a
// time across every process that shares Redis. hit reports a cache hit.
func answer(ctx context.Context, rdb *redis.Client, locks *lock.Client, query string) (ans string, hit bool, err error) {
	key := cacheKey(query)
	ans, err = rdb.Get(ctx, key).Result()
	if err == nil || !errors.Is(err, redis.Nil) {
		return ans, err == nil, err // a hit, or a Redis failure
	}
	err = locks.WithLock(ctx, key, func(ctx context.Context) error {
		// Check again: whoever held the lock before us may have filled it.
		ans, err = rdb.Get(ctx, key).Result()
		if err == nil || !errors.Is(err, redis.Nil) {
			hit = err == nil
			return err
		}
		if ans, err = pipeline(ctx, query); err != nil {
			return err
		}
		return rdb.Set(ctx, key, ans, 10*time.Minute).Err()
	}, lock.WithWaitTimeout(10*time.Second))
	return ans, hit, err
}

func cacheKey(query string) string {
	return fmt.Sprintf("rag:answer:%x", sha256.Sum256([]byte(query)))
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ragcache:", err)
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
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	query := "how do I rotate my API key?"
	// Start uncached, so that reruns against your own Redis show the same.
	if err := rdb.Del(ctx, cacheKey(query)).Err(); err != nil {
		return err
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string]int{}
		hits    int
		errs    []error
	)
	start := time.Now()
	for range requests {
		wg.Go(func() {
			ans, hit, err := answer(ctx, rdb, locks, query)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			answers[ans]++
			if hit {
				hits++
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	same := 0
	for _, n := range answers {
		same = max(same, n)
	}
	fmt.Printf("%d concurrent requests for one uncached query: %d pipeline run(s), %d/%d identical answers, %d from the cache (%v)\n",
		requests, runs.Load(), same, requests, hits, time.Since(start).Round(time.Millisecond))
	if runs.Load() != 1 || len(answers) != 1 || hits != requests-1 {
		return errors.New("want one pipeline run and one answer for all")
	}
	return nil
}
