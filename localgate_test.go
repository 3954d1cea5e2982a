package lock_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/redistest"
)

// switchedRedis is a go-redis client of a real redis-server whose
// connections a test cuts at will: down, every connection it made is
// closed and every dial goes to an address nothing listens on (refused at
// once), as when the server is unreachable; up, dials reach the server.
type switchedRedis struct {
	rdb  *redis.Client
	srv  string
	dead string

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func newSwitchedRedis(t *testing.T, srv *redistest.Server, hooks ...redis.Hook) *switchedRedis {
	t.Helper()
	s := &switchedRedis{srv: srv.Addr(), dead: kindtest.ClosedAddr(t)}
	o := srv.Options()
	o.MaxRetries = -1
	o.DialerRetries = 1
	o.Dialer = s.dial
	s.rdb = redis.NewClient(o)
	for _, h := range hooks {
		s.rdb.AddHook(h)
	}
	t.Cleanup(func() { s.rdb.Close() })
	return s
}

func (s *switchedRedis) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	s.mu.Lock()
	addr := s.srv
	if s.down {
		addr = s.dead
	}
	s.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, c)
	return c, nil
}

// setDown makes the server unreachable (down) or reachable again.
func (s *switchedRedis) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	if down {
		for _, c := range s.conns {
			c.Close()
		}
		s.conns = nil
	}
}

// dropNext is a go-redis hook that, armed, lets the next script call (EVAL
// or EVALSHA, alone or in a pipeline) that succeeds reach Redis and then
// reports it failed as a lost reply would: an attempt of unknown outcome.
type dropNext struct{ armed atomic.Bool }

func (h *dropNext) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *dropNext) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && kindtest.AnyScript([]redis.Cmder{cmd}) && h.armed.CompareAndSwap(true, false) {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func (h *dropNext) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err != nil || !kindtest.AnyScript(cmds) || !h.armed.CompareAndSwap(true, false) {
			return err
		}
		for _, c := range cmds {
			c.SetErr(io.ErrUnexpectedEOF)
		}
		return io.ErrUnexpectedEOF
	}
}

// gateHandle is what a kind's handle offers: *lock.Lock and
// *lock.MultiLock.
type gateHandle interface {
	Acquire(ctx context.Context) error
	TryAcquire(ctx context.Context) (bool, error)
	Release(ctx context.Context) error
	Lost() <-chan struct{}
}

// gateKind is one kind of lock as the gate tests use it.
type gateKind struct {
	name string
	// members returns the user keys its lock on key takes.
	members func(key string) []string
	// handle returns a handle on key; nil for a kind with no handle (Once).
	handle func(c *lock.Client, key string) gateHandle
	// with runs fn under the kind's hold of key (its WithX, or Once).
	with func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error
	// degrades: with WithFallback, an acquisition that finds Redis
	// unreachable takes a degraded hold.
	degrades bool
}

func oneKey(key string) []string { return []string{key} }

func gateMultiKeys(key string) []string { return []string{key, key + ":b"} }

func gateKinds() []gateKind {
	asHandle := func(l *lock.Lock) gateHandle { return l }
	return []gateKind{
		{name: "mutex", members: oneKey, degrades: true,
			handle: func(c *lock.Client, key string) gateHandle { return asHandle(c.NewLock(key)) },
			with: func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
				return c.WithLock(ctx, key, fn)
			}},
		{name: "reentrant", members: oneKey, degrades: true,
			handle: func(c *lock.Client, key string) gateHandle { return asHandle(c.NewLock(key, lock.WithOwner("owner"))) },
			with: func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
				return c.WithLock(ctx, key, fn, lock.WithOwner("owner"))
			}},
		{name: "fair", members: oneKey, degrades: true,
			handle: func(c *lock.Client, key string) gateHandle { return asHandle(c.NewLock(key, lock.WithFair(true))) },
			with: func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
				return c.WithLock(ctx, key, fn, lock.WithFair(true))
			}},
		{name: "read", members: oneKey,
			handle: func(c *lock.Client, key string) gateHandle { return asHandle(c.NewRWLock(key).ReadLock()) },
			with: func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
				return c.NewRWLock(key).WithReadLock(ctx, fn)
			}},
		{name: "write", members: oneKey,
			handle: func(c *lock.Client, key string) gateHandle { return asHandle(c.NewRWLock(key).WriteLock()) },
			with: func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
				return c.NewRWLock(key).WithWriteLock(ctx, fn)
			}},
		{name: "permit", members: oneKey,
			handle: func(c *lock.Client, key string) gateHandle { return asHandle(c.NewSemaphore(key, 2).Permit()) },
			with: func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
				return c.NewSemaphore(key, 2).WithPermit(ctx, fn)
			}},
		{name: "multi", members: gateMultiKeys,
			handle: func(c *lock.Client, key string) gateHandle { return c.NewMultiLock(gateMultiKeys(key)) },
			with: func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
				return c.WithMultiLock(ctx, gateMultiKeys(key), fn)
			}},
		{name: "once", members: oneKey,
			with: func(ctx context.Context, c *lock.Client, key string, fn func(context.Context) error) error {
				_, _, err := c.Once(ctx, key, func(ctx context.Context) ([]byte, error) { return []byte("v"), fn(ctx) })
				return err
			}},
	}
}

// gateVerbs are the ways to acquire: the handle's Acquire and TryAcquire,
// and the kind's WithX (Once for Once).
var gateVerbs = []string{"Acquire", "TryAcquire", "With"}

// gateModes are the options that put every lock of a Client through its
// local gate.
var gateModes = []struct {
	name string
	opt  lock.Option
}{
	{"fallback", lock.WithFallback(lock.FallbackLocal)},
	{"maxWaiters", lock.WithMaxWaiters(8)},
}

// gateHold is one hold (or attempt) of a kind by a verb.
type gateHold struct {
	h gateHandle // the handle verbs; nil for With

	// With: fn runs on a goroutine until out closes or its ctx ends.
	in, out chan struct{}
	done    chan error
	fctx    atomic.Pointer[context.Context]
}

// acquireBy acquires k's lock on key by verb, waiting at most wait:
// (true, nil) when held, (false, nil) when TryAcquire found it held,
// (false, err) on failure.
func acquireBy(c *lock.Client, k gateKind, verb, key string, wait time.Duration) (*gateHold, bool, error) {
	ctx := context.Background()
	if verb != "With" {
		g := &gateHold{h: k.handle(c, key)}
		if verb == "TryAcquire" {
			ok, err := g.h.TryAcquire(ctx)
			return g, ok, err
		}
		actx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		err := g.h.Acquire(actx)
		return g, err == nil, err
	}
	g := &gateHold{in: make(chan struct{}), out: make(chan struct{}), done: make(chan error, 1)}
	actx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		g.done <- k.with(actx, c, key, func(fctx context.Context) error {
			g.fctx.Store(&fctx)
			close(g.in)
			select {
			case <-g.out:
			case <-fctx.Done():
			}
			return nil
		})
	}()
	timer := time.AfterFunc(wait, func() {
		if g.fctx.Load() == nil {
			cancel()
		}
	})
	defer timer.Stop()
	select {
	case <-g.in:
		return g, true, nil
	case err := <-g.done:
		return g, false, err
	}
}

// release ends the hold; for With, it lets fn return and returns the
// WithX's error.
func (g *gateHold) release() error {
	if g.h != nil {
		return g.h.Release(context.Background())
	}
	close(g.out)
	return <-g.done
}

// lost returns a channel closed when the hold is lost.
func (g *gateHold) lost() <-chan struct{} {
	if g.h != nil {
		return g.h.Lost()
	}
	return (*g.fctx.Load()).Done()
}

// degraded reports whether the hold is a degraded one.
func (g *gateHold) degraded() bool {
	l, ok := g.h.(*lock.Lock)
	return ok && l.Degraded()
}

// wantGateEmpty fails the test unless c's local gate keeps no state.
func wantGateEmpty(t *testing.T, c *lock.Client, what string) {
	t.Helper()
	if n, w := lock.LocalGate(c, ""); n != 0 || w != 0 {
		t.Fatalf("local gate keeps %d keys, %d waiters %s; want none", n, w, what)
	}
}

// wantNothingWritten fails the test if a lock key of members is in Redis.
func wantNothingWritten(t *testing.T, rdb *redis.Client, members []string, what string) {
	t.Helper()
	for _, m := range members {
		if n := rdb.Exists(context.Background(), lockKey(m)).Val(); n != 0 {
			t.Fatalf("%s: %s was written to Redis", what, lockKey(m))
		}
	}
}

// degradeProbe takes a degraded hold of key with c while sw is down and
// returns it; or, when want is false, checks that c cannot: the key is
// held in the Client.
func degradeProbe(t *testing.T, c *lock.Client, sw *switchedRedis, key string, want bool) *lock.Lock {
	t.Helper()
	sw.setDown(true)
	defer sw.setDown(false)
	p := c.NewLock(key, lock.WithFallback(lock.FallbackLocal))
	ok, err := p.TryAcquire(context.Background())
	switch {
	case want && (!ok || err != nil || !p.Degraded()):
		t.Fatalf("degraded TryAcquire() of %q = (%v, %v), Degraded() = %v; want a degraded hold", key, ok, err, p.Degraded())
	case !want && (ok || err != nil):
		t.Fatalf("degraded TryAcquire() of %q while the key is held in the Client = (%v, %v), Degraded() = %v; want (false, nil)",
			key, ok, err, p.Degraded())
	}
	return p
}

// TestGate_degradedHoldExcludesEveryKind: while a degraded hold of a key is
// live in a Client, no lock of that Client takes the key in Redis, whatever
// its kind and verb (its attempts are not sent); once the degraded hold is
// released, it does. The gate keeps nothing afterwards. For a MultiLock the
// degraded hold is of its second member.
func TestGate_degradedHoldExcludesEveryKind(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	for _, mode := range gateModes {
		for _, k := range gateKinds() {
			for _, verb := range gateVerbs {
				if k.handle == nil && verb != "With" {
					continue
				}
				t.Run(mode.name+"/"+k.name+"/"+verb, func(t *testing.T) {
					sw := newSwitchedRedis(t, srv)
					key := keyFor(t)
					members := k.members(key)
					c := newClient(t, sw.rdb, mode.opt, lock.WithTTL(5*time.Second),
						lock.WithBackoff(time.Millisecond, 10*time.Millisecond))
					deg := degradeProbe(t, c, sw, members[len(members)-1], true)

					g, ok, err := acquireBy(c, k, verb, key, 150*time.Millisecond)
					if ok || (verb == "TryAcquire") != (err == nil) || err != nil && !errors.Is(err, lock.ErrNotAcquired) {
						if ok {
							_ = g.release()
						}
						t.Fatalf("%s while a degraded hold is live = (%v, %v); want not acquired", verb, ok, err)
					}
					wantNothingWritten(t, srv.Client(t), members, verb+" while a degraded hold is live")
					must(t, "degraded Release()", deg.Release(context.Background()))

					g, ok, err = acquireBy(c, k, verb, key, 5*time.Second)
					if !ok || err != nil || g.degraded() {
						t.Fatalf("%s after the degraded Release = (%v, %v), degraded %v; want a Redis hold", verb, ok, err, g.degraded())
					}
					must(t, "Release()", g.release())
					wantGateEmpty(t, c, "after the cycle")
				})
			}
		}
	}
}

// TestGate_everyKindsHoldEnds: a hold of every kind, by every verb, in a
// Client whose locks go through the local gate: while it is live, a
// degraded acquisition of the key in the Client is refused (of each
// member, for a MultiLock); when it ends — released, lost, force-released
// — or when an attempt fails or its outcome is unknown, the gate keeps
// nothing of it.
func TestGate_everyKindsHoldEnds(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	for _, mode := range gateModes {
		for _, k := range gateKinds() {
			for _, verb := range gateVerbs {
				if k.handle == nil && verb != "With" {
					continue
				}
				for _, end := range []string{"released", "lost", "forceReleased", "failed", "unknown"} {
					t.Run(mode.name+"/"+k.name+"/"+verb+"/"+end, func(t *testing.T) {
						drop := &dropNext{}
						sw := newSwitchedRedis(t, srv, drop)
						key := keyFor(t)
						c := newClient(t, sw.rdb, mode.opt, lock.WithTTL(time.Second),
							lock.WithBackoff(time.Millisecond, 10*time.Millisecond))
						switch end {
						case "failed":
							gateAttemptFails(t, c, sw, k, mode.name, verb, key)
						case "unknown":
							gateAttemptUnknown(t, c, drop, k, mode.name, verb, key)
						default:
							gateHoldEnds(t, c, sw, admin, k, verb, key, end)
						}
						wantGateEmpty(t, c, "after the hold ended")
					})
				}
			}
		}
	}
}

// gateHoldEnds holds key by k and verb, checks that the Client's degraded
// acquisitions of its members are refused, and ends the hold by end.
func gateHoldEnds(t *testing.T, c *lock.Client, sw *switchedRedis, admin *redis.Client, k gateKind, verb, key, end string) {
	t.Helper()
	ctx := context.Background()
	g, ok, err := acquireBy(c, k, verb, key, 5*time.Second)
	if !ok || err != nil {
		t.Fatalf("%s = (%v, %v), want held", verb, ok, err)
	}
	for _, m := range k.members(key) {
		degradeProbe(t, c, sw, m, false)
	}
	switch end {
	case "released":
		must(t, "Release()", g.release())
		return
	case "lost":
		for _, m := range k.members(key) {
			must(t, "DEL", admin.Del(ctx, lockKey(m)).Err())
		}
	case "forceReleased":
		must(t, "ForceRelease()", c.ForceRelease(ctx, k.members(key)[0]))
	}
	waitClosed(t, g.lost(), 10*time.Second, "Lost() of the hold")
	wantGateEmpty(t, c, "once Lost() closed")
	if err := g.release(); !errors.Is(err, lock.ErrNotHeld) && !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("Release() after the loss = %v, want ErrNotHeld or ErrLockLost", err)
	}
}

// gateAttemptFails acquires key by k and verb while Redis is unreachable:
// a degraded hold (released at once) when k falls back, a failure
// otherwise.
func gateAttemptFails(t *testing.T, c *lock.Client, sw *switchedRedis, k gateKind, mode, verb, key string) {
	t.Helper()
	sw.setDown(true)
	g, ok, err := acquireBy(c, k, verb, key, 150*time.Millisecond)
	sw.setDown(false)
	if k.degrades && mode == "fallback" {
		if !ok || err != nil {
			t.Fatalf("%s with Redis unreachable and the fallback = (%v, %v), want a degraded hold", verb, ok, err)
		}
		if g.h != nil && !g.degraded() {
			t.Fatalf("%s with Redis unreachable: Degraded() = false", verb)
		}
		must(t, "Release()", g.release())
		return
	}
	if ok || err == nil {
		if ok {
			_ = g.release()
		}
		t.Fatalf("%s with Redis unreachable = (%v, %v), want an error", verb, ok, err)
	}
}

// gateAttemptUnknown acquires key by k and verb with the reply of its
// first script call lost: a TryAcquire fails (or degrades), an Acquire
// confirms the hold with its next attempt (or degrades); either hold is
// released.
func gateAttemptUnknown(t *testing.T, c *lock.Client, drop *dropNext, k gateKind, mode, verb, key string) {
	t.Helper()
	drop.armed.Store(true)
	g, ok, err := acquireBy(c, k, verb, key, 5*time.Second)
	if drop.armed.Load() {
		t.Fatal("no script call of the acquisition was dropped")
	}
	switch {
	case ok:
		must(t, "Release()", g.release())
	case verb != "TryAcquire" || err == nil || k.degrades && mode == "fallback":
		t.Fatalf("%s with its reply lost = (%v, %v), want held (or, for TryAcquire, an error)", verb, ok, err)
	}
}

// TestFallback_waitTimeoutCountsFromStart: an Acquire with WithWaitTimeout
// whose Redis part uses up most of the wait (its attempt hangs on a
// SIGSTOPped server until the read timeout, then falls back) waits for the
// local lock only for what is left of the wait timeout, not for a fresh
// one: it returns ErrNotAcquired by the wait timeout (plus slack) while a
// Redis hold of its Client keeps the key.
func TestFallback_waitTimeoutCountsFromStart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	const wait, readTimeout, slack = 1500 * time.Millisecond, time.Second, 300 * time.Millisecond
	o := srv.Options()
	o.MaxRetries = -1
	o.ReadTimeout = readTimeout
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	key := keyFor(t)
	rec := &kindtest.Recorder{}
	c := newClient(t, rdb, lock.WithFallback(lock.FallbackLocal), lock.WithTTL(30*time.Second))
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	l := c.NewLock(key, lock.WithWaitTimeout(wait), lock.WithObserver(rec))
	start := time.Now()
	err := l.Acquire(ctx)
	took := time.Since(start)
	wantErr(t, "Acquire() while the Client holds the key in Redis", err, lock.ErrNotAcquired)
	if took > wait+slack {
		t.Fatalf("Acquire() with WithWaitTimeout(%v) returned after %v, want by %v", wait, took, wait+slack)
	}
	fellBack := false
	for _, e := range rec.Events() {
		fellBack = fellBack || e.Kind == lock.EventFallback && errors.Is(e.Err, lock.ErrNotAcquired)
	}
	if !fellBack {
		t.Fatalf("no failed EventFallback: the Redis part did not fall back (%v)", rec.Kinds())
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	must(t, "holder Release()", holder.Release(ctx))
	wantGateEmpty(t, c, "after the holder's Release")
}

// TestGate_holdEndsUnderOtherOptions: the gate lets go of a hold however
// its lock is configured and however it ends: a hold without renewal that
// expires, holds a Close abandons (lost at their deadline), a script-free
// hold (ReleaseWatch), one without coalescing; and after a run of holds
// handed from one Acquire to the next within the Client. While each hold
// is live, a degraded acquisition of the key is refused.
func TestGate_holdEndsUnderOtherOptions(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []lock.Option
		end  func(t *testing.T, c *lock.Client, l *lock.Lock)
	}{
		{"watchdogOffExpires", []lock.Option{lock.WithWatchdog(false), lock.WithTTL(300 * time.Millisecond)},
			func(t *testing.T, _ *lock.Client, l *lock.Lock) { waitClosed(t, l.Lost(), 5*time.Second, "Lost()") }},
		{"closeAbandons", []lock.Option{lock.WithTTL(300 * time.Millisecond)},
			func(t *testing.T, c *lock.Client, l *lock.Lock) {
				must(t, "Close()", c.Close())
				waitClosed(t, l.Lost(), 5*time.Second, "Lost()")
			}},
		{"releaseWatch", []lock.Option{lock.WithReleaseMode(lock.ReleaseWatch)},
			func(t *testing.T, _ *lock.Client, l *lock.Lock) { must(t, "Release()", l.Release(ctx)) }},
		{"coalescingOff", []lock.Option{lock.WithCoalescing(false)},
			func(t *testing.T, _ *lock.Client, l *lock.Lock) { must(t, "Release()", l.Release(ctx)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sw := newSwitchedRedis(t, srv)
			key := keyFor(t)
			c := newClient(t, sw.rdb, append([]lock.Option{lock.WithFallback(lock.FallbackLocal)}, tc.opts...)...)
			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			degradeProbe(t, c, sw, key, false)
			tc.end(t, c, l)
			wantGateEmpty(t, c, "once the hold ended")
		})
	}

	t.Run("handoffs", func(t *testing.T) {
		sw := newSwitchedRedis(t, srv)
		key := keyFor(t)
		c := newClient(t, sw.rdb, lock.WithMaxWaiters(16), lock.WithTTL(5*time.Second))
		const workers, rounds = 4, 25
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range rounds {
					l := c.NewLock(key)
					if err := l.Acquire(ctx); err != nil {
						t.Errorf("Acquire() = %v", err)
						return
					}
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release() = %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		wantGateEmpty(t, c, "after the handoffs")
		degradeProbe(t, c, sw, key, true)
	})
}

// TestGate_panickingObserverOnAcquire: an Observer that panics when told
// of an acquisition ends the hold before the panic goes on (the caller
// never learnt it held the lock): the gate lets go of it, so a degraded
// acquisition of the key is not kept out by a hold nobody has.
func TestGate_panickingObserverOnAcquire(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	for _, verb := range []string{"Acquire", "TryAcquire"} {
		t.Run(verb, func(t *testing.T) {
			ctx := context.Background()
			var armed atomic.Bool
			obs := lock.ObserverFunc(func(e lock.Event) {
				if e.Kind == lock.EventAcquire && e.Err == nil && armed.CompareAndSwap(true, false) {
					panic("observer panicked")
				}
			})
			sw := newSwitchedRedis(t, srv)
			key := keyFor(t)
			c := newClient(t, sw.rdb, lock.WithFallback(lock.FallbackLocal))
			l := c.NewLock(key, lock.WithObserver(obs))
			armed.Store(true)
			mustPanic(t, verb+"()", "the Observer's panic", func() {
				if verb == "Acquire" {
					_ = l.Acquire(ctx)
				} else {
					_, _ = l.TryAcquire(ctx)
				}
			})
			wantGateEmpty(t, c, "after the panic")
			degradeProbe(t, c, sw, key, true)
		})
	}
}

// TestMaxWaiters_multiLockCountsEveryMember: a waiting MultiLock counts as
// a waiter on each of its keys, so with WithMaxWaiters(1) an Acquire of
// any member key fails with ErrContended while it waits; TryAcquire is
// never refused; the gate keeps nothing once all is released.
func TestMaxWaiters_multiLockCountsEveryMember(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	ctx := context.Background()
	key := keyFor(t)
	keys := gateMultiKeys(key)
	c := newClient(t, srv.Client(t), lock.WithMaxWaiters(1), lock.WithTTL(5*time.Second),
		lock.WithBackoff(time.Millisecond, 10*time.Millisecond))
	holder := c.NewLock(keys[1])
	if ok, err := holder.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("holder TryAcquire() = (%v, %v), want held", ok, err)
	}
	m := c.NewMultiLock(keys)
	got := make(chan error, 1)
	go func() { got <- m.Acquire(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, w0 := lock.LocalGate(c, keys[0])
		_, w1 := lock.LocalGate(c, keys[1])
		if w0 == 1 && w1 == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters counted on the members = %d, %d; want 1, 1", w0, w1)
		}
		time.Sleep(time.Millisecond)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	wantErr(t, "Acquire() of the first member while the MultiLock waits", c.NewLock(keys[0]).Acquire(actx), lock.ErrContended)
	// The MultiLock holds no member between its attempts: the first is free.
	try := c.NewLock(keys[0])
	if ok, err := try.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("TryAcquire() of the first member while the MultiLock waits = (%v, %v), want (true, nil)", ok, err)
	}
	must(t, "Release()", try.Release(ctx))
	must(t, "holder Release()", holder.Release(ctx))
	must(t, "MultiLock Acquire()", <-got)
	must(t, "MultiLock Release()", m.Release(ctx))
	wantGateEmpty(t, c, "after the MultiLock's Release")
}
