package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// keyReplyHold is a go-redis hook that, once armed with a Redis key, holds
// back the reply of the next script call naming that key (sent alone or in
// a pipeline) that Redis ran without error, until the test frees it: the caller has
// taken the lock in Redis and does not know it yet.
type keyReplyHold struct {
	early bool // set before use: hold the call before it is sent instead
	mu    sync.Mutex
	key   string        // armed for this key; "" when not armed
	held  chan struct{} // closed once a reply is held
	free  chan struct{} // closed by the test: the held reply goes on
}

// arm holds the reply of the next script call naming key (a Redis key).
func (h *keyReplyHold) arm(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.key, h.held, h.free = key, make(chan struct{}), make(chan struct{})
}

// take reports the channels to hold a reply on if one of cmds names the
// armed key, disarming the hook; err is the call's error, for a command
// sent alone.
func (h *keyReplyHold) take(err error, cmds ...redis.Cmder) (held, free chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.key == "" || err != nil {
		return nil, nil
	}
	for _, cmd := range cmds {
		// A NOSCRIPT reply ran nothing: the script is sent again.
		if cmd.Err() == nil && slices.Contains(kindtest.ScriptKeys(cmd), h.key) {
			h.key = ""
			return h.held, h.free
		}
	}
	return nil, nil
}

func (h *keyReplyHold) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *keyReplyHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.early {
			h.hold(nil, cmd)
		}
		err := next(ctx, cmd)
		if !h.early {
			h.hold(err, cmd)
		}
		return err
	}
}

func (h *keyReplyHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.early {
			h.hold(nil, cmds...)
		}
		err := next(ctx, cmds)
		if !h.early {
			h.hold(nil, cmds...)
		}
		return err
	}
}

// hold holds the call of cmds, with error err, if it is the one armed for,
// until the test frees it.
func (h *keyReplyHold) hold(err error, cmds ...redis.Cmder) {
	if held, free := h.take(err, cmds...); held != nil {
		close(held)
		<-free
	}
}

// lossWatch is what a test watches of one hold: Lost and LostErr.
type lossWatch interface {
	Lost() <-chan struct{}
	LostErr() error
}

// onceHold watches the hold of a Once call through its fn's context.
type onceHold struct{ ctx chan context.Context }

func (o *onceHold) get() context.Context {
	select {
	case ctx := <-o.ctx:
		o.ctx <- ctx
		return ctx
	case <-time.After(10 * time.Second):
		return nil
	}
}

func (o *onceHold) Lost() <-chan struct{} {
	if ctx := o.get(); ctx != nil {
		return ctx.Done()
	}
	return nil
}

func (o *onceHold) LostErr() error {
	if ctx := o.get(); ctx != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// installCase is one kind in TestClient_ForceRelease_beforeInstall.
type installCase struct {
	name string
	// start begins the acquisition of key by c whose reply the hook holds:
	// it calls arm(redisKey) just before the call that takes the key, and
	// returns the hold to watch and the acquisition's outcome.
	start func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error)
	// take has another Client take key once it is free.
	take func(c *lock.Client, key string) error
}

// acquireArmed starts l.Acquire with the hook armed for key's lock.
func acquireArmed(l interface{ Acquire(context.Context) error }, key string, arm func(string)) <-chan error {
	done := make(chan error, 1)
	arm(lockKey(key))
	go func() { done <- l.Acquire(context.Background()) }()
	return done
}

// handedArmed has cur, held, hand key over to a waiter made by newLock,
// the hook holding the reply of the release that hands it over.
func handedArmed(t *testing.T, c *lock.Client, key string, arm func(string), newLock func(opts ...lock.Option) *lock.Lock) (lossWatch, <-chan error) {
	t.Helper()
	ctx := context.Background()
	cur := newLock()
	must(t, "Acquire() cur", cur.Acquire(ctx))
	next := newLock(lock.WithBackoff(time.Minute, time.Minute))
	done := make(chan error, 1)
	go func() { done <- next.Acquire(ctx) }()
	waitIdle(t, c, key, 1) // a release now hands over
	arm(lockKey(key))
	go func() { _ = cur.Release(ctx) }()
	return next, done
}

func takeLock(opts ...lock.Option) func(c *lock.Client, key string) error {
	return func(c *lock.Client, key string) error { return c.NewLock(key, opts...).Acquire(context.Background()) }
}

var installCases = []installCase{
	{"mutex", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		l := c.NewLock(key)
		return l, acquireArmed(l, key, arm)
	}, takeLock()},
	{"try", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		l := c.NewLock(key)
		done := make(chan error, 1)
		arm(lockKey(key))
		go func() {
			ok, err := l.TryAcquire(context.Background())
			if err == nil && !ok {
				err = errors.New("TryAcquire() = false, want true")
			}
			done <- err
		}()
		return l, done
	}, takeLock()},
	{"uncoalesced", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		l := c.NewLock(key, lock.WithCoalescing(false))
		return l, acquireArmed(l, key, arm)
	}, takeLock()},
	{"reentrant", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		l := c.NewLock(key, lock.WithOwner("worker-1"))
		return l, acquireArmed(l, key, arm)
	}, takeLock()},
	{"read", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		l := c.NewRWLock(key).ReadLock()
		return l, acquireArmed(l, key, arm)
	}, func(c *lock.Client, key string) error {
		return c.NewRWLock(key).WriteLock().Acquire(context.Background())
	}},
	{"write", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		l := c.NewRWLock(key).WriteLock()
		return l, acquireArmed(l, key, arm)
	}, func(c *lock.Client, key string) error {
		return c.NewRWLock(key).WriteLock().Acquire(context.Background())
	}},
	{"permit", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		l := c.NewSemaphore(key, 1).Permit()
		return l, acquireArmed(l, key, arm)
	}, func(c *lock.Client, key string) error {
		return c.NewSemaphore(key, 1).Permit().Acquire(context.Background())
	}},
	{"fair", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		l := c.NewLock(key, lock.WithFair(true))
		return l, acquireArmed(l, key, arm)
	}, takeLock(lock.WithFair(true))},
	{"multi", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		m := c.NewMultiLock([]string{key, key + ":other"})
		return m, acquireArmed(m, key, arm)
	}, takeLock()},
	{"once", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		o := &onceHold{ctx: make(chan context.Context, 1)}
		done := make(chan error, 1)
		arm(lockKey(key))
		go func() {
			_, _, err := c.Once(context.Background(), key, func(ctx context.Context) ([]byte, error) {
				o.ctx <- ctx
				<-ctx.Done()
				return nil, context.Cause(ctx)
			})
			done <- err
		}()
		return o, done
	}, takeLock()},
	{"handoff", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		return handedArmed(t, c, key, arm, func(opts ...lock.Option) *lock.Lock { return c.NewLock(key, opts...) })
	}, takeLock()},
	{"permit-handoff", func(t *testing.T, c *lock.Client, key string, arm func(string)) (lossWatch, <-chan error) {
		// Permits take no options: the semaphore's waiters back off for a
		// minute, so none tries again while the hook is armed.
		sem := c.NewSemaphore(key, 1, lock.WithBackoff(time.Minute, time.Minute))
		return handedArmed(t, c, key, arm, func(...lock.Option) *lock.Lock { return sem.Permit() })
	}, func(c *lock.Client, key string) error {
		return c.NewSemaphore(key, 1).Permit().Acquire(context.Background())
	}},
}

// TestClient_ForceRelease_beforeInstall: a force-release that lands after
// an acquire took the key in Redis but before its reply came back (the
// reply held back by a hook), followed by another Client taking the key,
// reaches the hold as soon as it is installed: its Lost() closes, with
// LostErr force-released, long before its first renewal (the TTL is a
// minute), for every kind, a hold handed over in-process too, with the
// watchdog on and off. The holder's Client already listens on its force
// channel (a hold of another key), so it hears the message while the reply
// is held: a force-release of that other hold, heard after it, says when.
// (redlock's holds listen on no force channel: their renewal finds a
// force-release on a node.)
func TestClient_ForceRelease_beforeInstall(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	for _, watchdog := range []bool{true, false} {
		for _, tc := range installCases {
			name := tc.name + "/watchdog"
			if !watchdog {
				name += "Off"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				hook := &keyReplyHold{}
				rdb := tg.newRDB(t)
				rdb.AddHook(hook)
				c := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithWatchdog(watchdog))
				op := newClient(t, tg.newRDB(t))
				key := keyFor(t)
				warm := c.NewLock(key + ":warm")
				must(t, "Acquire() warm", warm.Acquire(ctx))
				waitUntil(t, "the force channel's subscription", func() bool { return lock.InboxReady(c) })

				h, done := tc.start(t, c, key, hook.arm)
				waitClosed(t, hook.held, 10*time.Second, "the acquire's reply held")
				must(t, "ForceRelease()", op.ForceRelease(ctx, key))
				must(t, "another Client's Acquire()", tc.take(op, key))
				must(t, "ForceRelease() warm", op.ForceRelease(ctx, key+":warm"))
				waitClosed(t, warm.Lost(), 10*time.Second, "warm.Lost(): the force messages heard")
				close(hook.free)

				if tc.name != "once" {
					must(t, "Acquire()", <-done)
				}
				waitClosed(t, h.Lost(), 5*time.Second, "Lost() of the hold force-released before its install")
				var le *lock.LostError
				if err := h.LostErr(); !errors.As(err, &le) || le.Reason != lock.LossForceReleased {
					t.Fatalf("LostErr() = %v, want a *LostError with reason force-released", err)
				}
			})
		}
	}
}

// TestClient_ForceRelease_beforeSubscribed: a Client's first hold, whose
// force channel is subscribed only once it is installed, cannot hear a
// force-release that lands before (the reply held back by a hook), and
// another Client takes the key: once the subscription is confirmed, the
// hold is asked about in Redis at once, and its Lost() closes long before
// its first renewal (the TTL is a minute), reported stolen (or
// force-released, when a hold of the same Client listened already, as a
// release that hands over has), for every kind, with the watchdog on and
// off.
func TestClient_ForceRelease_beforeSubscribed(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	for _, watchdog := range []bool{true, false} {
		for _, tc := range installCases {
			name := tc.name + "/watchdog"
			if !watchdog {
				name += "Off"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				hook := &keyReplyHold{}
				rdb := tg.newRDB(t)
				rdb.AddHook(hook)
				c := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithWatchdog(watchdog))
				op := newClient(t, tg.newRDB(t))
				key := keyFor(t)

				h, done := tc.start(t, c, key, hook.arm)
				waitClosed(t, hook.held, 10*time.Second, "the acquire's reply held")
				must(t, "ForceRelease()", op.ForceRelease(ctx, key))
				must(t, "another Client's Acquire()", tc.take(op, key))
				close(hook.free)

				if tc.name != "once" {
					must(t, "Acquire()", <-done)
				}
				waitClosed(t, h.Lost(), 5*time.Second, "Lost() of the hold force-released before its Client listened")
				var le *lock.LostError
				if err := h.LostErr(); !errors.As(err, &le) || (le.Reason != lock.LossStolen && le.Reason != lock.LossForceReleased) {
					t.Fatalf("LostErr() = %v, want a *LostError with reason stolen or force-released", err)
				}
			})
		}
	}
}

// TestClient_ForceRelease_whilePubSubDown: a force-release while the
// holder's pub/sub connection is down (cut by CLIENT KILL, its redial held
// by a hook) goes unheard, and another Client takes the key; once the
// connection is back and the force channel's subscription confirmed
// again, the hold is asked about in Redis at once: its Lost() closes,
// stolen, long before its first renewal (the TTL is a minute), with the
// watchdog on and off.
func TestClient_ForceRelease_whilePubSubDown(t *testing.T) {
	t.Parallel()
	for _, watchdog := range []bool{true, false} {
		t.Run(fmt.Sprintf("watchdog=%v", watchdog), func(t *testing.T) {
			ctx := context.Background()
			tg := realTarget(t)
			c, g := gatedClient(t, tg, lock.WithTTL(time.Minute), lock.WithWatchdog(watchdog))
			op := newClient(t, tg.newRDB(t))
			key := keyFor(t)
			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			waitUntil(t, "the force channel's subscription", func() bool { return lock.InboxReady(c) })
			cutPubSub(t, tg, g)
			must(t, "ForceRelease()", op.ForceRelease(ctx, key))
			must(t, "another Client's Acquire()", op.NewLock(key).Acquire(ctx))
			g.Release()
			waitClosed(t, l.Lost(), 5*time.Second, "Lost() of the hold force-released while its Client's pub/sub was down")
			var le *lock.LostError
			if err := l.LostErr(); !errors.As(err, &le) || le.Reason != lock.LossStolen {
				t.Fatalf("LostErr() = %v, want a *LostError with reason stolen", err)
			}
		})
	}
}
