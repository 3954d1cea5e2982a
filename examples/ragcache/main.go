// Ragcache: 100 concurrent requests for one uncached query run the
// expensive pipeline once; the others get its answer (stampede protection,
// done by lock.Client.Once: the answer is stored with the lock's release,
// and waiters are woken by publish).
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

const requests = 100

// runs counts pipeline invocations.
var runs atomic.Int64

// pipeline is the expensive part: retrieval, reranking, a model call.
func pipeline(ctx context.Context, query string) ([]byte, error) {
	runs.Add(1)
	select {
	case <-time.After(40 * time.Millisecond):
		return fmt.Appendf(nil, "answer to %q, built at %s", query, time.Now().Format(time.RFC3339Nano)), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx) // the lock was lost: stop working
	}
}

// answer returns the cached answer to query, building it at most once
// across every process that shares Redis. shared reports that another
// call built it.
func answer(ctx context.Context, locks *lock.Client, query string) (ans []byte, shared bool, err error) {
	return locks.Once(ctx, cacheKey(query), func(ctx context.Context) ([]byte, error) {
		return pipeline(ctx, query)
	}, lock.WithResultTTL(10*time.Minute), lock.WithWaitTimeout(10*time.Second))
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
	ctx := context.Background()
	// Four replicas of the service, each with its own connection and Client.
	var clients []*lock.Client
	for range 4 {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		locks := lock.NewClient(rdb)
		defer locks.Close()
		clients = append(clients, locks)
	}

	query := "how do I rotate my API key?"
	// Start uncached, so that reruns against your own Redis show the same.
	if err := clients[0].Forget(ctx, cacheKey(query)); err != nil {
		return err
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string]int{}
		shared  int
		errs    []error
	)
	start := time.Now()
	for i := range requests {
		wg.Go(func() {
			ans, sh, err := answer(ctx, clients[i%len(clients)], query)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			answers[string(ans)]++
			if sh {
				shared++
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
	fmt.Printf("%d concurrent requests over %d replicas for one uncached query: %d pipeline run(s), %d/%d identical answers, %d shared (%v)\n",
		requests, len(clients), runs.Load(), same, requests, shared, time.Since(start).Round(time.Millisecond))
	if runs.Load() != 1 || len(answers) != 1 || shared != requests-1 {
		return errors.New("want one pipeline run and one answer for all")
	}
	return nil
}
