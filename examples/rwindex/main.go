// Rwindex: many readers search a tenant's RAG index while a writer rebuilds
// it from time to time, across three replicas of a service. Readers share
// the index; a rebuild waits for the readers inside to finish, keeps new
// ones out meanwhile, and so is never starved by a stream of searches.
//
// Run it with `go run ./examples/rwindex` (an in-process Redis is started),
// or against your own server with `REDIS_ADDR=localhost:6379 go run ./examples/rwindex`.
// It exits 1 if a search saw a half-rebuilt index, a rebuild never got in,
// or the index's fence went backwards.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentlock/lock"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const (
	replicas = 3
	readers  = 8 // per replica
	rebuilds = 5 // per replica
	shards   = 4 // the index is written shard by shard
)

// The index lives in Redis: each shard carries the version it was built at.
func shardKey(tenant string, i int) string { return fmt.Sprintf("index:%s:shard:%d", tenant, i) }

// rebuild writes every shard at a new version, one at a time: a reader in
// the middle would see shards of two versions.
func rebuild(ctx context.Context, rdb *redis.Client, tenant string, fence int64) error {
	for i := range shards {
		if err := rdb.Set(ctx, shardKey(tenant, i), fence, 0).Err(); err != nil {
			return err
		}
		time.Sleep(2 * time.Millisecond) // embedding the next shard
	}
	return nil
}

// search reads every shard and reports an error if they disagree.
func search(ctx context.Context, rdb *redis.Client, tenant string) (version int64, err error) {
	for i := range shards {
		v, err := rdb.Get(ctx, shardKey(tenant, i)).Result()
		if errors.Is(err, redis.Nil) {
			v = "0"
		} else if err != nil {
			return 0, err
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		if i > 0 && n != version {
			return 0, fmt.Errorf("half-rebuilt index: shard 0 at %d, shard %d at %d", version, i, n)
		}
		version = n
	}
	return version, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rwindex:", err)
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenant := "tenant-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	var (
		wg       sync.WaitGroup
		searches atomic.Int64
		done     atomic.Int64 // rebuilds finished
		mu       sync.Mutex
		errs     []error
		lastW    int64 // the fence of the last rebuild
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	for range replicas {
		// Each replica has its own connection and lock Client, as a
		// separate process would.
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		locks := lock.NewClient(rdb, lock.WithTTL(10*time.Second))
		defer locks.Close()
		index := locks.NewRWLock("index:" + tenant)

		wg.Go(func() {
			for range rebuilds {
				w := index.WriteLock()
				if err := w.Acquire(ctx); err != nil {
					fail(fmt.Errorf("rebuild: %w", err))
					return
				}
				mu.Lock()
				if w.Fence() <= lastW {
					errs = append(errs, fmt.Errorf("rebuild fence %d after %d", w.Fence(), lastW))
				}
				lastW = w.Fence()
				mu.Unlock()
				err := rebuild(ctx, rdb, tenant, w.Fence())
				if rerr := w.Release(context.WithoutCancel(ctx)); err == nil {
					err = rerr
				}
				if err != nil {
					fail(fmt.Errorf("rebuild: %w", err))
					return
				}
				done.Add(1)
				time.Sleep(20 * time.Millisecond) // until the next rebuild
			}
		})
		for range readers {
			wg.Go(func() {
				for done.Load() < replicas*rebuilds && ctx.Err() == nil {
					err := index.WithReadLock(ctx, func(ctx context.Context) error {
						_, err := search(ctx, rdb, tenant)
						return err
					})
					if err != nil {
						fail(fmt.Errorf("search: %w", err))
						return
					}
					searches.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if done.Load() != replicas*rebuilds {
		return fmt.Errorf("%d rebuilds finished, want %d", done.Load(), replicas*rebuilds)
	}
	fmt.Printf("%d searches and %d rebuilds over %d replicas; no search saw a half-rebuilt index\n",
		searches.Load(), done.Load(), replicas)
	return nil
}
