package lock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// scriptHolder holds the first call of one script until open closes:
// before sending it (before true) or after, its reply then held.
type scriptHolder struct {
	script  *redis.Script
	before  bool
	skip    int32 // calls let through before the one held
	seen    atomic.Int32
	entered chan struct{}
	open    chan struct{}
	first   sync.Once
}

func (s *scriptHolder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scriptHolder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// acquireHeld calls acquire with a 1s deadline that ends while s holds
// the call named what, and checks that it returned by then with
// ErrNotAcquired; then it lets the held call go.
func (s *scriptHolder) acquireHeld(t *testing.T, acquire func(context.Context) error, what string) {
	t.Helper()
	openHook := sync.OnceFunc(func() { close(s.open) })
	t.Cleanup(openHook)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := acquire(ctx)
	if late := time.Since(deadline); late > deadlineSlack {
		t.Fatalf("Acquire() returned %v past its deadline (error %v)", late, err)
	}
	wantErr(t, "Acquire()", err, lock.ErrNotAcquired)
	if !isClosed(s.entered) {
		t.Fatalf("%s was never held", what)
	}
	openHook()
}

// runsScript reports whether cmd runs sc, by EVALSHA or by EVAL of its text.
func runsScript(cmd redis.Cmder, sc *redis.Script) bool {
	a := cmd.Args()
	if len(a) < 2 {
		return false
	}
	name, _ := a[0].(string)
	body, _ := a[1].(string)
	switch strings.ToLower(name) {
	case "evalsha":
		return body == sc.Hash()
	case "eval":
		sum := sha1.Sum([]byte(body))
		return hex.EncodeToString(sum[:]) == sc.Hash()
	}
	return false
}

func (s *scriptHolder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !runsScript(cmd, s.script) {
			return next(ctx, cmd)
		}
		held := false
		if s.seen.Add(1) > s.skip {
			s.first.Do(func() { held = true })
		}
		if !held {
			return next(ctx, cmd)
		}
		var err error
		if !s.before {
			err = next(ctx, cmd)
		}
		close(s.entered)
		<-s.open
		if s.before {
			err = next(ctx, cmd)
		}
		return err
	}
}

// TestWithLock_deadlineDuringHandoff: WithLock's release hands the key to
// a waiter of the same Client, and the handoff (held before it is sent, or
// its reply held) is still out when both the WithLock's deadline and the
// waiter's end. Both return by their deadlines; once the handoff goes
// through, the key the waiter left behind is freed, not left to its TTL.
func TestWithLock_deadlineDuringHandoff(t *testing.T) {
	t.Parallel()
	for _, before := range []bool{false, true} {
		t.Run(map[bool]string{false: "reply held", true: "send held"}[before], func(t *testing.T) {
			tg := realTarget(t)
			key := keyFor(t)
			rdb := tg.newRDB(t)
			h := &scriptHolder{script: luascripts.Handoff, before: before,
				entered: make(chan struct{}), open: make(chan struct{})}
			rdb.AddHook(h)
			openHook := sync.OnceFunc(func() { close(h.open) })
			t.Cleanup(openHook)
			c := newClient(t, rdb, lock.WithCoalescing(false), lock.WithLogger(nil), lock.WithTTL(time.Minute))
			fnIn, fnGo := make(chan struct{}), make(chan struct{})
			type res struct {
				late time.Duration // past the ctx's deadline
				err  error
			}
			call := func(d time.Duration, f func(context.Context) error, out chan<- res) {
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				deadline, _ := ctx.Deadline()
				err := f(ctx)
				out <- res{time.Since(deadline), err}
			}
			first, waiter := make(chan res, 1), make(chan res, 1)
			go call(2*time.Second, func(ctx context.Context) error {
				return c.WithLock(ctx, key, func(context.Context) error { close(fnIn); <-fnGo; return nil })
			}, first)
			waitClosed(t, fnIn, 5*time.Second, "WithLock's fn")
			go call(3*time.Second, c.NewLock(key).Acquire, waiter)
			if !waitFor(2*time.Second, func() bool { return lock.IdleWaiters(c, key) == 1 }) {
				t.Fatal("the waiter never waited")
			}
			close(fnGo)
			waitClosed(t, h.entered, 5*time.Second, "the handoff")
			for name, ch := range map[string]chan res{"WithLock()": first, "waiter's Acquire()": waiter} {
				r := <-ch
				if r.late > deadlineSlack {
					t.Errorf("%s returned %v past its deadline (error %v)", name, r.late, r.err)
				}

			}
			openHook()
			if !waitFor(5*time.Second, func() bool { return tg.rdb.Exists(context.Background(), lockKey(key)).Val() == 0 }) {
				t.Fatalf("key still held %v after the handoff went through (PTTL %v)", 5*time.Second,
					tg.rdb.PTTL(context.Background(), lockKey(key)).Val())
			}
		})
	}
}

// TestFair_deadlineDuringQueueJoin: a fair Acquire's first attempt (which
// joins the queue) is held — before it is sent, or its reply — until the
// Acquire's deadline passed. The Acquire returns by its deadline; once the
// attempt goes through, the entry it may have left is undone, so the
// holder's release does not hand the key to the departed waiter: a third
// lock takes it at once.
func TestFair_deadlineDuringQueueJoin(t *testing.T) {
	t.Parallel()
	for _, before := range []bool{false, true} {
		t.Run(map[bool]string{false: "reply held", true: "send held"}[before], func(t *testing.T) {
			tg := realTarget(t)
			key := keyFor(t)
			ctx := context.Background()
			fair := []lock.Option{lock.WithFair(true), lock.WithTTL(time.Minute)}
			other := newClient(t, tg.rdb)
			blocker := other.NewLock(key, fair...)
			must(t, "blocker's Acquire()", blocker.Acquire(ctx))
			rdb := tg.newRDB(t)
			h := &scriptHolder{script: luascripts.FairAcquire, before: before,
				entered: make(chan struct{}), open: make(chan struct{})}
			rdb.AddHook(h)
			c := newClient(t, rdb, lock.WithCoalescing(false), lock.WithLogger(nil))
			h.acquireHeld(t, c.NewLock(key, fair...).Acquire, "the queue join")
			// The undo goes out once the held attempt returns; the
			// Client's Close waits for it.
			must(t, "Close()", c.Close())
			must(t, "blocker's Release()", blocker.Release(ctx))
			third := other.NewLock(key, fair...)
			ok, err := third.TryAcquire(ctx)
			must(t, "third TryAcquire()", err)
			if !ok {
				t.Fatalf("the key went to the departed waiter (PTTL %v)", tg.rdb.PTTL(ctx, lockKey(key)).Val())
			}
			must(t, "third Release()", third.Release(ctx))
		})
	}
}

// TestMultiLock_deadlineDuringSecondGroup: on a cluster, a multi-lock's
// Acquire takes its first slot group and its deadline ends while the second
// group's acquire is out (its send or its reply held). The Acquire returns
// by its deadline, and once the call goes through every member is freed:
// the group taken first is not left to its TTL.
func TestMultiLock_deadlineDuringSecondGroup(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	for _, before := range []bool{false, true} {
		t.Run(map[bool]string{false: "reply held", true: "send held"}[before], func(t *testing.T) {
			ctx := context.Background()
			key := keyFor(t)
			keys := []string{key + ":a", key + ":b"}
			rdb := cl.Client(t)
			h := &scriptHolder{script: luascripts.MultiAcquire, before: before, skip: 1,
				entered: make(chan struct{}), open: make(chan struct{})}
			rdb.AddHook(h)
			c := newClient(t, rdb, lock.WithLogger(nil), lock.WithTTL(time.Minute))
			h.acquireHeld(t, c.NewMultiLock(keys).Acquire, "the second group's acquire")
			check := cl.Client(t)
			for _, k := range keys {
				if !waitFor(5*time.Second, func() bool { return check.Exists(ctx, lockKey(k)).Val() == 0 }) {
					t.Errorf("member %s still held 5s after the call went through (PTTL %v)", k, check.PTTL(ctx, lockKey(k)).Val())
				}
			}
		})
	}
}
