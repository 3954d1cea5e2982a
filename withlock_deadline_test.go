package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// withHelper is one With* helper (or Once) of some kind, running fn under
// a fresh hold of key.
type withHelper struct {
	name string
	run  func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error
	// keys are the Redis keys the hold writes for key.
	keys func(key string) []string
}

func withHelpers() []withHelper {
	one := func(key string) []string { return []string{lockKey(key)} }
	return []withHelper{
		{"WithLock", func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
			return c.WithLock(ctx, key, fn)
		}, one},
		{"WithLock/fair", func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
			return c.WithLock(ctx, key, fn, lock.WithFair(true))
		}, one},
		{"WithLock/fallback", func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
			return c.WithLock(ctx, key, fn, lock.WithFallback(lock.FallbackLocal))
		}, one},
		{"WithReadLock", func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
			return c.NewRWLock(key).WithReadLock(ctx, fn)
		}, one},
		{"WithWriteLock", func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
			return c.NewRWLock(key).WithWriteLock(ctx, fn)
		}, one},
		{"WithPermit", func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
			return c.NewSemaphore(key, 2).WithPermit(ctx, fn)
		}, one},
		{"WithMultiLock", func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
			return c.WithMultiLock(ctx, []string{key + ":a", key + ":b"}, fn)
		}, func(key string) []string { return []string{lockKey(key + ":a"), lockKey(key + ":b")} }},
		{"Once", func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
			v, _, err := c.Once(ctx, key, func(ctx context.Context) ([]byte, error) { return []byte("v"), fn(ctx) })
			if err == nil && string(v) != "v" {
				err = fmt.Errorf("value %q, want %q", v, "v")
			}
			return err
		}, one},
	}
}

// TestDeadline_withHelpersReturnByDeadline: a With* helper (and Once)
// whose fn leaves Redis stopped (SIGSTOP) returns by its ctx's deadline
// plus deadlineSlack with fn's nil error, the release going on in the
// background; Close waits for that release, which frees the key once Redis
// answers again.
func TestDeadline_withHelpersReturnByDeadline(t *testing.T) {
	for _, wh := range withHelpers() {
		t.Run(wh.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Config{})
			rdb := srv.Client(t)
			c := lock.NewClient(rdb)
			t.Cleanup(func() { c.Close() })
			key := keyFor(t)
			resumed := false
			t.Cleanup(func() {
				if !resumed {
					srv.Resume()
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), verbDeadline)
			defer cancel()
			err := within(t, wh.name+" with Redis stopped inside fn", verbDeadline, func() error {
				return wh.run(ctx, c, key, func(context.Context) error { return srv.Pause() })
			})
			must(t, wh.name+" with the release still out at the deadline", err)
			must(t, "Resume()", srv.Resume())
			resumed = true
			must(t, "Close()", c.Close())
			for _, k := range wh.keys(key) {
				if n := rdb.Exists(context.Background(), k).Val(); n != 0 {
					t.Fatalf("%s exists after Close: the release left in the background did not run", k)
				}
			}
		})
	}
}

// TestClient_WithLock_errorAfterLoss: once the hold is lost while fn runs,
// WithLock's error says so once, with fn's own error when it has one, and
// nothing of the release, which a loss makes moot.
func TestClient_WithLock_errorAfterLoss(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		for _, tc := range []struct {
			name        string
			failRelease bool
			fnErr       func(ctx context.Context) error
			want        string
		}{
			{"fn returns the cause", false, context.Cause, `lock: lock %q lost (stolen)`},
			{"fn returns nil", false, func(context.Context) error { return nil }, `lock: lock %q lost (stolen)`},
			{"fn returns its own error", false, func(context.Context) error { return errors.New("fn failed") },
				"fn failed\nlock: lock %q lost (stolen)"},
			{"release fails", true, func(context.Context) error { return nil }, `lock: lock %q lost (stolen)`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rdb := tg.newRDB(t)
				fail := &failReleases{}
				rdb.AddHook(fail)
				c := newClient(t, rdb, lock.WithTTL(300*time.Millisecond))
				key := keyFor(t)
				err := c.WithLock(context.Background(), key, func(ctx context.Context) error {
					must(t, "SET", tg.rdb.Set(context.Background(), lockKey(key), "someone-else", time.Minute).Err())
					waitClosed(t, ctx.Done(), 10*time.Second, "fn's ctx after the lock was stolen")
					fail.armed.Store(tc.failRelease)
					return tc.fnErr(ctx)
				})
				wantErr(t, "WithLock()", err, lock.ErrLockLost)
				if want := fmt.Sprintf(tc.want, key); err.Error() != want {
					t.Fatalf("WithLock() error = %q, want %q", err, want)
				}
				if tc.failRelease && fail.armed.Load() {
					t.Fatal("the release was not sent through the failing hook")
				}
			})
		}
	})
}

// TestClient_WithLock_cancelledBeforeDeadlineWaitsForRelease: a ctx
// cancelled while fn runs, its deadline still ahead, has WithLock wait for
// a release Redis answers: the key is free when WithLock returns.
func TestClient_WithLock_cancelledBeforeDeadlineWaitsForRelease(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := c.WithLock(ctx, key, func(context.Context) error {
			cancel() // the caller gives up while fn runs
			return nil
		})
		must(t, "WithLock()", err)
		if tg.rdb.Exists(context.Background(), lockKey(key)).Val() != 0 {
			t.Fatal("WithLock returned before its release, ctx cancelled ahead of its deadline")
		}
	})
}
