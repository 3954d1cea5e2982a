package lock_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// TestLock_lateAttemptAfterUndo: the mutex's counterpart of
// TestFair_lateAttemptAfterLeave, a liveness limit (docs/safety.md, "Late
// attempts"). An acquire attempt reaches Redis only after its Acquire gave
// up and the undo of its token ran (a hook keeps it from the wire and
// reports it lost; the test sends it once the undo is done, as a network,
// or a stalled server reading its sockets in another order, may deliver
// it). With the key free by then, the late attempt takes it for the
// departed token: nobody releases it, and it is held until its TTL runs
// out, never longer.
func TestLock_lateAttemptAfterUndo(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder := newClient(t, tg.rdb).NewLock(key)
	must(t, "Acquire()", holder.Acquire(ctx))

	d := newLateWrite(func(cmd redis.Cmder) bool {
		keys := scriptKeys(cmd)
		return len(keys) == 2 && strings.HasSuffix(keys[1], ":fence")
	}, func(cmd redis.Cmder) bool {
		keys := scriptKeys(cmd)
		return len(keys) == 2 && strings.HasSuffix(keys[1], ":notify")
	})
	rdb := tg.newRDB(t)
	rdb.AddHook(d)
	d.giveUp(t, newClient(t, rdb, lock.WithBackoff(time.Second, 2*time.Second)).NewLock(key))
	must(t, "Release()", holder.Release(ctx))

	if err := tg.rdb.Do(ctx, d.attempt...).Err(); err != nil {
		t.Fatalf("late attempt: %v", err)
	}
	got, err := tg.rdb.Get(ctx, lockKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		t.Fatal("the late attempt took nothing: the limit is gone; update docs/safety.md (Late attempts) and this test")
	}
	if err != nil || got == holder.Token() {
		t.Fatalf("GET after the late attempt = %q, %v; want the departed waiter's token", got, err)
	}
	pttl := tg.rdb.PTTL(ctx, lockKey(key)).Val()
	if pttl <= 0 || pttl > lock.DefaultTTL {
		t.Fatalf("PTTL of the key a late attempt took = %v, want within the TTL %v", pttl, lock.DefaultTTL)
	}
	t.Logf("a late attempt holds the free key for its departed token, PTTL %v (TTL %v)", pttl, lock.DefaultTTL)
	other := newClient(t, tg.newRDB(t)).NewLock(key)
	if ok, err := other.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() of the key a late attempt holds = %v, %v; want false", ok, err)
	}
}

// scriptKeys returns the KEYS of cmd when it runs a script (EVAL or
// EVALSHA), nil otherwise.
var scriptKeys = kindtest.ScriptKeys

// hasKeySuffix reports whether one of keys ends with suffix.
func hasKeySuffix(keys []string, suffix string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, suffix) })
}

// lateWrite is a go-redis hook that keeps the first attempt (a command
// isAttempt matches) from Redis, keeps its arguments in attempt and
// reports it lost (held closes then); undone closes once a command isUndo
// matches has run in Redis after it. The test then sends attempt itself:
// an attempt that reaches Redis after its own undo.
type lateWrite struct {
	isAttempt, isUndo func(redis.Cmder) bool
	attempt           []any
	held, undone      chan struct{}
	phase             atomic.Int32 // 0: before the attempt, 1: attempt held, 2: undone
}

func newLateWrite(isAttempt, isUndo func(redis.Cmder) bool) *lateWrite {
	return &lateWrite{isAttempt: isAttempt, isUndo: isUndo, held: make(chan struct{}), undone: make(chan struct{})}
}

// giveUp starts w's Acquire, whose first attempt d keeps from Redis,
// cancels it once that attempt is held, and returns once the undo of its
// token has run in Redis.
func (d *lateWrite) giveUp(t *testing.T, w *lock.Lock) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Acquire(ctx) }()
	<-d.held // go-redis reported the attempt lost
	cancel()
	wantErr(t, "cancelled Acquire()", <-errc, lock.ErrNotAcquired)
	<-d.undone
}

func (*lateWrite) DialHook(next redis.DialHook) redis.DialHook { return next }
func (d *lateWrite) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if d.phase.Load() == 0 && d.isAttempt(cmd) && d.phase.CompareAndSwap(0, 1) {
			d.attempt = slices.Clone(cmd.Args())
			close(d.held)
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		err := next(ctx, cmd)
		if d.phase.Load() == 1 && d.isUndo(cmd) && !redis.HasErrorPrefix(err, "NOSCRIPT") && d.phase.CompareAndSwap(1, 2) {
			close(d.undone)
		}
		return err
	}
}
func (*lateWrite) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
