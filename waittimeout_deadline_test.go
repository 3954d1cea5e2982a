package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestDeadline_waitTimeoutBoundsAcquire: WithWaitTimeout bounds an Acquire
// (and the helpers that acquire) whose ctx has no deadline, against a
// SIGSTOPped server, with coalescing and ContextTimeoutEnabled on and off.
func TestDeadline_waitTimeoutBoundsAcquire(t *testing.T) {
	t.Parallel()
	const wait = 300 * time.Millisecond
	w := lock.WithWaitTimeout(wait)
	calls := map[string]func(ctx context.Context, c *lock.Client, key string) error{
		"mutex": func(ctx context.Context, c *lock.Client, key string) error { return c.NewLock(key, w).Acquire(ctx) },
		"fair": func(ctx context.Context, c *lock.Client, key string) error {
			return c.NewLock(key, w, lock.WithFair(true)).Acquire(ctx)
		},
		"read": func(ctx context.Context, c *lock.Client, key string) error {
			return c.NewRWLock(key, w).ReadLock().Acquire(ctx)
		},
		"write": func(ctx context.Context, c *lock.Client, key string) error {
			return c.NewRWLock(key, w).WriteLock().Acquire(ctx)
		},
		"permit": func(ctx context.Context, c *lock.Client, key string) error {
			return c.NewSemaphore(key, 2, w).Permit().Acquire(ctx)
		},
		"multi": func(ctx context.Context, c *lock.Client, key string) error {
			return c.NewMultiLock([]string{key + ":a", key + ":b"}, w).Acquire(ctx)
		},
		"once": func(ctx context.Context, c *lock.Client, key string) error {
			_, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return nil, nil }, w)
			return err
		},
		"withlock": func(ctx context.Context, c *lock.Client, key string) error {
			return c.WithLock(ctx, key, func(context.Context) error { return nil }, w)
		},
	}
	for _, cte := range []bool{false, true} {
		for _, co := range []bool{false, true} {
			t.Run(fmt.Sprintf("cte=%v/coalesce=%v", cte, co), func(t *testing.T) {
				srv := redistest.Start(t, redistest.Config{})
				opts := srv.Options()
				opts.ContextTimeoutEnabled = cte
				rdb := redis.NewClient(opts)
				t.Cleanup(func() { rdb.Close() })
				must(t, "PING", rdb.Ping(context.Background()).Err())
				c := newClient(t, rdb, lock.WithCoalescing(co), lock.WithLogger(nil))
				// Warm the scripts while the server answers.
				for name, call := range calls {
					_ = call(context.Background(), c, keyFor(t)+":warm:"+name)
				}
				must(t, "Pause()", srv.Pause())
				t.Cleanup(func() { srv.Resume() })
				type res struct {
					name string
					took time.Duration
					err  error
				}
				out := make(chan res, len(calls))
				for name, call := range calls {
					go func() {
						start := time.Now()
						err := call(context.Background(), c, keyFor(t)+":"+name)
						out <- res{name, time.Since(start), err}
					}()
				}
				for range calls {
					r := <-out
					if r.took > wait+deadlineSlack {
						t.Errorf("%s with WithWaitTimeout(%v), no ctx deadline, returned after %v (error %v)", r.name, wait, r.took, r.err)
					}
				}
			})
		}
	}
}
