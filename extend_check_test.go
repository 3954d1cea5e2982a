package lock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// holdNthScript holds the nth script call on key (counted from 1, alone or
// in a pipeline) before it is sent, until release; held is closed once it
// waits there.
type holdNthScript struct {
	key     string
	n       int
	mu      sync.Mutex
	seen    int
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHoldNthScript(t *testing.T, key string, n int) *holdNthScript {
	h := &holdNthScript{key: key, n: n, held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(h.let) // also when the test fails: the held call must end
	return h
}

func (h *holdNthScript) let() { h.once.Do(func() { close(h.release) }) }

// wait holds the calling send if cmds carry the nth script call on key.
func (h *holdNthScript) wait(cmds []redis.Cmder) {
	h.mu.Lock()
	hit := false
	for _, c := range cmds {
		if slices.Contains(kindtest.ScriptKeys(c), h.key) {
			h.seen++
			hit = hit || h.seen == h.n
		}
	}
	h.mu.Unlock()
	if hit {
		close(h.held)
		<-h.release
	}
}

func (h *holdNthScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdNthScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.wait([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *holdNthScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.wait(cmds)
		return next(ctx, cmds)
	}
}

// TestExtend_checkRenewalLandingLateIsRenewedOver: a Client's first hold is
// asked about in Redis by a renewal once its force channel is confirmed.
// Held before it is sent, that renewal carries the acquire's TTL; an Extend
// to a longer TTL goes through meanwhile, and then the renewal lands,
// leaving the shorter TTL in Redis. The hold must then be renewed with the
// Extend's TTL, the watchdog off too: the key keeps what the Extend set and
// the hold is not lost.
func TestExtend_checkRenewalLandingLateIsRenewedOver(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	// Load every script the test sends, so that none is replayed after a
	// NOSCRIPT and the count of calls on the key is the acquire, then the
	// check.
	rec := &kindtest.Recorder{Renewals: true}
	other := newClient(t, tg.newRDB(t), lock.WithObserver(rec))
	warmUp(t, other, rec)
	warm := other.NewLock(keyFor(t) + ":scripts")
	must(t, "warm-up Acquire()", warm.Acquire(ctx))
	must(t, "warm-up Extend()", warm.Extend(ctx, extendedTTL))
	must(t, "warm-up Release()", warm.Release(ctx))

	for _, watchdog := range []bool{false, true} {
		t.Run(fmt.Sprintf("watchdog=%v", watchdog), func(t *testing.T) {
			key := keyFor(t)
			rdb := tg.newRDB(t)
			check := newHoldNthScript(t, lockKey(key), 2)
			rdb.AddHook(check)
			rec := &kindtest.Recorder{Renewals: true}
			c := newClient(t, rdb, lock.WithObserver(rec), lock.WithTTL(acquireTTL), lock.WithWatchdog(watchdog))
			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			select {
			case <-check.held: // the check, taken out with the acquire's TTL
			case <-time.After(10 * time.Second):
				t.Fatal("no check of the first hold within 10s")
			}
			must(t, "Extend()", l.Extend(ctx, extendedTTL))
			check.let()
			waitUntil(t, "the check's answer", func() bool { return slices.Contains(rec.Kinds(), lock.EventRenewed) })
			eventually(t, "the key gets the Extend's TTL back after the check landed last", func() bool {
				return tg.rdb.PTTL(ctx, lockKey(key)).Val() >= lateFloor
			})
			if err := l.LostErr(); err != nil {
				t.Fatalf("LostErr() = %v after an Extend that Redis confirmed, want nil", err)
			}
			must(t, "Release()", l.Release(ctx))
		})
	}
}
