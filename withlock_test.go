package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

func TestClient_WithLock(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		ran := false
		err := c.WithLock(ctx, key, func(ctx context.Context) error {
			ran = true
			if tg.rdb.Exists(ctx, lockKey(key)).Val() != 1 {
				t.Error("lock key absent inside fn")
			}
			return nil
		})
		must(t, "WithLock()", err)
		if !ran {
			t.Fatal("fn did not run")
		}
		if tg.rdb.Exists(ctx, lockKey(key)).Val() != 0 {
			t.Fatal("lock key left after WithLock")
		}
	})
}

func TestClient_WithLock_fnError(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		c := newClient(t, tg.rdb)
		boom := errors.New("boom")
		err := c.WithLock(context.Background(), keyFor(t), func(context.Context) error { return boom })
		if err != boom {
			t.Fatalf("WithLock() error = %v, want fn's error itself", err)
		}
	})
}

func TestClient_WithLock_panic(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		func() {
			defer func() {
				if r := recover(); r != "kaboom" {
					t.Fatalf("recovered %v, want the fn's panic value", r)
				}
			}()
			_ = c.WithLock(context.Background(), key, func(context.Context) error { panic("kaboom") })
		}()
		if tg.rdb.Exists(context.Background(), lockKey(key)).Val() != 0 {
			t.Fatal("lock key left after fn panicked")
		}
	})
}

func TestClient_WithLock_releasesWithCancelledCtx(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		ctx, cancel := context.WithCancel(context.Background())
		err := c.WithLock(ctx, key, func(context.Context) error {
			cancel() // the caller gives up while fn runs
			return nil
		})
		must(t, "WithLock()", err)
		if tg.rdb.Exists(context.Background(), lockKey(key)).Val() != 0 {
			t.Fatal("release skipped because the caller's ctx was done")
		}
	})
}

func TestClient_WithLock_lost(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		err := c.WithLock(context.Background(), key, func(ctx context.Context) error {
			tg.expire(t, key) // the hold vanishes behind our back
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				return errors.New("ctx not cancelled after the lock was lost")
			}
			wantErr(t, "context.Cause()", context.Cause(ctx), lock.ErrLockLost)
			return nil // fn pretends all is well: WithLock must still report the loss
		}, lock.WithTTL(300*time.Millisecond))
		wantErr(t, "WithLock()", err, lock.ErrLockLost)
		var le *lock.LostError
		if !errors.As(err, &le) || le.Reason != lock.LossVanished || le.Key != key {
			t.Fatalf("WithLock() error = %v, want a LostError for %q with reason vanished", err, key)
		}
	})
}

func TestClient_WithLock_lostFoundAtRelease(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		c := newClient(t, tg.rdb, lock.WithWatchdog(false))
		key := keyFor(t)
		err := c.WithLock(context.Background(), key, func(ctx context.Context) error {
			tg.expire(t, key)
			return nil
		})
		wantErr(t, "WithLock()", err, lock.ErrLockLost)
	})
}

func TestClient_WithLock_badInput(t *testing.T) {
	t.Parallel()
	c := newClient(t, miniTarget(t).rdb)
	wantErr(t, "WithLock(nil fn)", c.WithLock(context.Background(), "k", nil), lock.ErrInvalid)
	wantErr(t, "WithLock(\"\")", c.WithLock(context.Background(), "", func(context.Context) error { return nil }), lock.ErrInvalid)
}

// TestClient_WithLock_panickingObserverOnAcquireUndoesTheHold: an Observer that
// panics when told of the acquisition (on the caller's goroutine, once
// the hold is installed and renewed) hands its panic to WithLock's caller
// before fn runs. The hold, on a Lock nobody else can reach, is undone in
// the background, rather than renewed until Close.
func TestClient_WithLock_panickingObserverOnAcquireUndoesTheHold(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAcquire && e.Err == nil {
			panic("observer panicked")
		}
	})
	c := newClient(t, tg.rdb, lock.WithObserver(obs))
	key := keyFor(t)
	mustPanic(t, "WithLock()", "the Observer's panic", func() {
		_ = c.WithLock(ctx, key, func(context.Context) error {
			t.Error("fn ran; want the panic before it")
			return nil
		})
	})
	eventually(t, "the hold undone (key gone)", func() bool {
		return tg.rdb.Exists(ctx, lockKey(key)).Val() == 0
	})
}

// TestClient_WithLock_panickingReleaseAfterPanickingFn: when fn panics and
// the release WithLock then sends panics too (a go-redis hook), the panic
// that reaches the caller is fn's, as WithLock promises; the release's is
// logged, and the hold has ended (the Lock's key is free once the release
// ran in Redis).
func TestClient_WithLock_panickingReleaseAfterPanickingFn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	rdb.AddHook(panicAfter{match: func(cmd redis.Cmder) bool { return isScriptCall(cmd) && !isAcquire(cmd) }})
	logs := &logRecorder{}
	c := newClient(t, rdb, lock.WithLogger(slog.New(logs)))
	key := keyFor(t)
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("recovered %v, want the fn's panic value", r)
			}
		}()
		_ = c.WithLock(ctx, key, func(context.Context) error { panic("kaboom") })
	}()
	if rdb.Exists(ctx, lockKey(key)).Val() != 0 {
		t.Fatal("lock key left after WithLock's release ran")
	}
	wantPanicLogged(t, logs, "release panicked")
}
