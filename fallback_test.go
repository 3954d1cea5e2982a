package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/redistest"
)

// downTarget is a real redis-server a test kills and restarts, with a
// go-redis client that does not retry a refused dial (so an attempt fails
// at once when the server is down).
func downTarget(t *testing.T) (*redistest.Server, *redis.Client) {
	t.Helper()
	s := redistest.Start(t, redistest.Config{})
	o := s.Options()
	o.MaxRetries = -1
	o.DialerRetries = 1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	return s, rdb
}

// restart starts s again and waits until rdb's pool dials it: after a
// run of refused dials, go-redis reports its last dial error until a probe
// of its own gets through.
func restart(t *testing.T, s *redistest.Server, rdb *redis.Client) {
	t.Helper()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for rdb.Ping(ctx).Err() != nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the restarted server is not reachable")
		}
	}
}

// TestFallback_redisDown: with the server killed, Acquire falls back to a
// degraded hold (fence 0, no TTL, never lost), reported to the Observer
// and logged; goroutines of the Client still exclude each other on the
// key; Release frees it; once the server is back, acquisitions use Redis
// again.
func TestFallback_redisDown(t *testing.T) {
	t.Parallel()
	srv, rdb := downTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	rec := &kindtest.Recorder{}
	var logs kindtest.SyncBuffer
	c := newClient(t, rdb, lock.WithFallback(lock.FallbackLocal), lock.WithObserver(rec),
		lock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), lock.WithTTL(5*time.Second))

	up := c.NewLock(key)
	must(t, "Acquire() with Redis up", up.Acquire(ctx))
	if up.Degraded() || up.Fence() == 0 {
		t.Fatalf("with Redis up: Degraded() = %v, Fence() = %d; want a Redis hold", up.Degraded(), up.Fence())
	}
	must(t, "Release()", up.Release(ctx))

	srv.Kill()
	l := c.NewLock(key)
	must(t, "Acquire() with Redis down", l.Acquire(ctx))
	if !l.Degraded() || l.Fence() != 0 || l.Token() == "" {
		t.Fatalf("Degraded() = %v, Fence() = %d, Token() = %q; want a degraded hold, fence 0, a token",
			l.Degraded(), l.Fence(), l.Token())
	}
	if _, err := l.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("TTL() error = %v, want ErrNotHeld (no Redis key)", err)
	}
	must(t, "Extend()", l.Extend(ctx, time.Second))
	if ok, err := c.NewLock(key).TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() while degraded-held = (%v, %v), want (false, nil)", ok, err)
	}
	if l.Lost() == nil || isClosed(l.Lost()) || l.LostErr() != nil {
		t.Fatalf("Lost() of a degraded hold: closed or nil")
	}
	must(t, "Release()", l.Release(ctx))
	wantErr(t, "second Release()", l.Release(ctx), lock.ErrNotHeld)
	wantErr(t, "Extend() after Release", l.Extend(ctx, time.Second), lock.ErrNotHeld)

	var fallbacks, degradedReleases int
	for _, e := range rec.Events() {
		switch {
		case e.Kind == lock.EventFallback && e.Err == nil && e.Degraded && e.Token == l.Token():
			fallbacks++
		case e.Kind == lock.EventRelease && e.Degraded && e.Err == nil:
			degradedReleases++
		}
	}
	if fallbacks != 1 || degradedReleases != 1 {
		t.Fatalf("events: %d degraded EventFallback, %d degraded EventRelease; want 1 and 1 (%v)", fallbacks, degradedReleases, rec.Kinds())
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"lock degraded") {
		t.Fatalf("log has no degraded warning:\n%s", logs.String())
	}

	// Single-process exclusion across goroutines while Redis is down.
	const workers, rounds = 8, 25
	var inside, overlaps, degraded atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				l := c.NewLock(key, lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
				if err := l.Acquire(ctx); err != nil {
					t.Errorf("Acquire() = %v", err)
					return
				}
				if l.Degraded() {
					degraded.Add(1)
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release() = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if overlaps.Load() != 0 || degraded.Load() != workers*rounds {
		t.Fatalf("%d overlaps, %d degraded holds of %d; want 0 overlaps, all degraded", overlaps.Load(), degraded.Load(), workers*rounds)
	}

	restart(t, srv, rdb)
	back := c.NewLock(key)
	must(t, "Acquire() with Redis back", back.Acquire(ctx))
	if back.Degraded() || back.Fence() == 0 {
		t.Fatalf("with Redis back: Degraded() = %v, Fence() = %d; want a Redis hold", back.Degraded(), back.Fence())
	}
	if got, _ := rdb.Get(ctx, lockKey(key)).Result(); got != back.Token() {
		t.Fatalf("Redis has %q at the key, want the new hold's token", got)
	}
	must(t, "Release()", back.Release(ctx))
	if n, _ := lock.LocalGate(c, key); n != 0 {
		t.Fatalf("local gate keeps %d keys after every hold ended, want 0", n)
	}
}

// TestFallback_degradedExcludesRedisPath: a degraded hold and a Redis hold
// of one key are never held at once in one Client whose default is the
// fallback: once Redis is back, a lock of it without the fallback finds
// the key held while the degraded hold is live (no attempt sent) and gets
// it, from Redis, only after its Release.
func TestFallback_degradedExcludesRedisPath(t *testing.T) {
	srv, rdb := downTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, rdb, lock.WithTTL(5*time.Second), lock.WithFallback(lock.FallbackLocal))
	deg := c.NewLock(key, lock.WithFallback(lock.FallbackLocal))
	srv.Kill()
	must(t, "Acquire() with Redis down", deg.Acquire(ctx))
	if !deg.Degraded() {
		t.Fatal("Degraded() = false with Redis down")
	}
	restart(t, srv, rdb)
	other := c.NewLock(key, lock.WithFallback(lock.FallbackNone), lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
	if ok, err := other.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() while a degraded hold is live = (%v, %v), want (false, nil)", ok, err)
	}
	if n, _ := rdb.Exists(ctx, lockKey(key)).Result(); n != 0 {
		t.Fatal("the refused attempt wrote the key")
	}
	var released atomic.Bool
	got := make(chan error, 1)
	go func() {
		err := other.Acquire(ctx)
		if err == nil && !released.Load() {
			err = errors.New("acquired while the degraded hold was live")
		}
		got <- err
	}()
	released.Store(true)
	must(t, "Release() of the degraded hold", deg.Release(ctx))
	must(t, "Acquire() after the degraded Release", <-got)
	if other.Degraded() {
		t.Fatal("Degraded() = true with Redis up")
	}
	must(t, "Release()", other.Release(ctx))
}

// TestFallback_redisHoldExcludesDegraded: the other way round: a Redis
// hold of this Client is live when the server dies; a degraded acquire of
// the key must not get in until that hold ends.
func TestFallback_redisHoldExcludesDegraded(t *testing.T) {
	srv, rdb := downTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, rdb, lock.WithTTL(30*time.Second), lock.WithFallback(lock.FallbackLocal))
	held := c.NewLock(key)
	must(t, "Acquire()", held.Acquire(ctx))
	srv.Kill()
	l := c.NewLock(key)
	if ok, err := l.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("degraded TryAcquire() while a Redis hold is live = (%v, %v), want (false, nil)", ok, err)
	}
	if err := held.Release(ctx); err == nil {
		t.Fatal("Release() with Redis down = nil, want its error")
	}
	if ok, err := l.TryAcquire(ctx); !ok || err != nil || !l.Degraded() {
		t.Fatalf("TryAcquire() after the Redis hold ended = (%v, %v), Degraded() = %v; want a degraded hold", ok, err, l.Degraded())
	}
	must(t, "Release()", l.Release(ctx))
}

// TestFallback_offFailsClosed: without the option, Redis down fails the
// acquisition (the default).
func TestFallback_offFailsClosed(t *testing.T) {
	srv, rdb := downTarget(t)
	ctx := context.Background()
	c := newClient(t, rdb)
	srv.Kill()
	if ok, err := c.NewLock(keyFor(t)).TryAcquire(ctx); ok || err == nil {
		t.Fatalf("TryAcquire() with Redis down and no fallback = (%v, %v), want an error", ok, err)
	}
	actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	wantErr(t, "Acquire()", c.NewLock(keyFor(t)).Acquire(actx), lock.ErrNotAcquired)
}

// TestFallback_withLock: WithLock runs fn under a degraded hold when Redis
// is down, and frees it afterwards.
func TestFallback_withLock(t *testing.T) {
	srv, rdb := downTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, rdb)
	srv.Kill()
	ran := false
	must(t, "WithLock()", c.WithLock(ctx, key, func(fctx context.Context) error {
		ran = true
		if ok, err := c.NewLock(key, lock.WithFallback(lock.FallbackLocal)).TryAcquire(ctx); ok || err != nil {
			t.Errorf("TryAcquire() inside = (%v, %v), want (false, nil)", ok, err)
		}
		return fctx.Err()
	}, lock.WithFallback(lock.FallbackLocal)))
	if !ran {
		t.Fatal("fn did not run")
	}
	l := c.NewLock(key, lock.WithFallback(lock.FallbackLocal))
	if ok, err := l.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("TryAcquire() after WithLock = (%v, %v), want the key free", ok, err)
	}
	must(t, "Release()", l.Release(ctx))
}

// heldThenDown returns a Client with opt of a switchable redis-server, a
// lock of the Client holding key in Redis, and the server switched off.
func heldThenDown(t *testing.T, opt lock.Option) (*lock.Client, *switchedRedis, *lock.Lock, string) {
	t.Helper()
	sw := newSwitchedRedis(t, redistest.Start(t, redistest.Config{}))
	key := keyFor(t)
	c := newClient(t, sw.rdb, opt, lock.WithTTL(30*time.Second))
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(context.Background()))
	sw.setDown(true)
	return c, sw, holder, key
}

// TestFallback_closeEndsDegradedWait: an Acquire that fell back and waits
// for the key in the Client's gate (a Redis hold of the Client is in the
// way) ends with ErrClosed when the Client closes, as a wait for Redis
// does: it does not take a degraded hold after Close once the Redis hold
// ends.
func TestFallback_closeEndsDegradedWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, sw, holder, key := heldThenDown(t, lock.WithFallback(lock.FallbackLocal))
	// The trap holds l's Acquire at its wait's first look at ctx.Done:
	// in the degraded wait, the holder's Redis hold in the way.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tc := &trapCtx{Context: cctx, hit: make(chan struct{}), free: make(chan struct{})}
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAcquire && e.Err != nil {
			tc.armedDone.Store(true) // the Redis part ended
		}
	})
	l := c.NewLock(key, lock.WithObserver(obs))
	done := make(chan error, 1)
	go func() { done <- l.Acquire(tc) }()
	select {
	case <-tc.hit:
	case err := <-done:
		t.Fatalf("Acquire() = %v before it waited in the gate", err)
	}

	must(t, "Close()", c.Close())
	close(tc.free)
	// The holder's Redis hold is still in the way: Close alone ends the
	// wait (5s: a bound, not a speed; the holder's TTL is 30s). Once the holder is released, a wait
	// Close did not end takes a degraded hold.
	var err error
	ended := true
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		ended = false
	}
	sw.setDown(false)
	must(t, "holder Release() after Close", holder.Release(ctx))
	if !ended {
		err = <-done
		if err == nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("Close did not end the degraded wait; once the holder released, Acquire() = %v (Degraded() = %v); want ErrClosed at Close", err, l.Degraded())
	}
	if err == nil {
		_ = l.Release(ctx)
		t.Fatalf("Acquire() under way at Close = nil (Degraded() = %v) after Close; want ErrClosed", l.Degraded())
	}
	if !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Acquire() under way at Close = %v; want ErrClosed", err)
	}
	wantGateEmpty(t, c, "after Close and the holder's Release")
}

// TestFallback_panickingObserverOnDegradedHold: an Observer that panics
// when told of a degraded acquisition (EventFallback) ends the degraded
// hold before the panic goes on, as it ends a Redis hold: the caller never
// learnt it held the key, and a degraded hold never expires, so it would
// keep every lock of the Client out of the key for good.
func TestFallback_panickingObserverOnDegradedHold(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	for _, verb := range []string{"Acquire", "TryAcquire", "WithLock"} {
		t.Run(verb, func(t *testing.T) {
			ctx := context.Background()
			var armed atomic.Bool
			obs := lock.ObserverFunc(func(e lock.Event) {
				if e.Kind == lock.EventFallback && e.Degraded && armed.CompareAndSwap(true, false) {
					panic("observer panicked")
				}
			})
			sw := newSwitchedRedis(t, srv)
			key := keyFor(t)
			c := newClient(t, sw.rdb, lock.WithFallback(lock.FallbackLocal))
			l := c.NewLock(key, lock.WithObserver(obs))
			sw.setDown(true)
			armed.Store(true)
			ran := false
			mustPanic(t, verb+"()", "the Observer's panic", func() {
				switch verb {
				case "Acquire":
					_ = l.Acquire(ctx)
				case "TryAcquire":
					_, _ = l.TryAcquire(ctx)
				default:
					_ = c.WithLock(ctx, key, func(context.Context) error { ran = true; return nil }, lock.WithObserver(obs))
				}
			})
			sw.setDown(false)
			if ran {
				t.Fatal("WithLock ran fn although its acquisition panicked")
			}
			wantGateEmpty(t, c, "after the panic")
			degradeProbe(t, c, sw, key, true)
		})
	}
}

// trapCtx is a context whose Deadline or Done, once armed, blocks its
// first caller until the test lets it go. Armed when the Redis part of an
// Acquire ends: Deadline is next called when the fallback derives its
// wait's context (WithWaitTimeout), before the degraded wait counts
// itself as a waiter; Done (without WithWaitTimeout) when the degraded
// wait, the key held in the gate, begins to wait.
type trapCtx struct {
	context.Context
	armed     atomic.Bool // traps the next Deadline
	armedDone atomic.Bool // traps the next Done
	hit       chan struct{}
	free      chan struct{}
}

func (c *trapCtx) Done() <-chan struct{} {
	if c.armedDone.CompareAndSwap(true, false) {
		close(c.hit)
		<-c.free
	}
	return c.Context.Done()
}

func (c *trapCtx) Deadline() (time.Time, bool) {
	if c.armed.CompareAndSwap(true, false) {
		close(c.hit)
		<-c.free
	}
	return c.Context.Deadline()
}

// TestMaxWaiters_fallbackStaysCounted: an Acquire with WithFallback counts
// as a waiter under WithMaxWaiters from its start until it returns, its
// change from the Redis part to the degraded wait included: while it is
// under way, a further Acquire of the key is refused with ErrContended,
// and the Acquire that was admitted is never refused halfway.
func TestMaxWaiters_fallbackStaysCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, sw, holder, key := heldThenDown(t, lock.WithMaxWaiters(1))

	tc := &trapCtx{Context: ctx, hit: make(chan struct{}), free: make(chan struct{})}
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAcquire && e.Err != nil {
			tc.armed.Store(true) // the Redis part ended: trap the fallback's first step
		}
	})
	l := c.NewLock(key, lock.WithFallback(lock.FallbackLocal), lock.WithWaitTimeout(time.Minute), lock.WithObserver(obs))
	done := make(chan error, 1)
	go func() { done <- l.Acquire(tc) }()
	select {
	case <-tc.hit:
	case err := <-done:
		t.Fatalf("Acquire() = %v before it fell back", err)
	}

	// l is under way (between its Redis part and its degraded wait): a
	// further Acquire of the key is one too many.
	other := c.NewLock(key)
	octx, ocancel := context.WithTimeout(ctx, 500*time.Millisecond)
	oerr := other.Acquire(octx)
	ocancel()
	close(tc.free)
	if oerr == nil {
		_ = other.Release(ctx)
	}
	sw.setDown(false)
	must(t, "holder Release()", holder.Release(ctx))
	lerr := <-done
	if lerr == nil {
		_ = l.Release(ctx)
	}
	if !errors.Is(oerr, lock.ErrContended) {
		t.Errorf("a second Acquire while the first is under way = %v; want ErrContended", oerr)
	}
	if lerr != nil {
		t.Errorf("the admitted Acquire = %v; want the lock once the holder released it", lerr)
	}
	wantGateEmpty(t, c, "at the end")
}

// TestFallback_handleBusyDuringDegradedWait: one handle holds the lock at
// most once at a time, and a second acquisition on it while one is under
// way fails with ErrInvalid, also while the first waits for the key in the
// Client's gate after falling back.
func TestFallback_handleBusyDuringDegradedWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, sw, holder, key := heldThenDown(t, lock.WithFallback(lock.FallbackLocal))

	tc := &trapCtx{Context: ctx, hit: make(chan struct{}), free: make(chan struct{})}
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAcquire && e.Err != nil {
			tc.armed.Store(true)
		}
	})
	l := c.NewLock(key, lock.WithWaitTimeout(time.Minute), lock.WithObserver(obs))
	done := make(chan error, 1)
	go func() { done <- l.Acquire(tc) }()
	select {
	case <-tc.hit: // l's Acquire fell back: its Redis part is over
	case err := <-done:
		t.Fatalf("Acquire() = %v before it fell back", err)
	}
	close(tc.free)

	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	oerr := l.Acquire(octx)
	ocancel()
	sw.setDown(false)
	must(t, "holder Release()", holder.Release(ctx))
	if err := <-done; err == nil {
		_ = l.Release(ctx)
	}
	if !errors.Is(oerr, lock.ErrInvalid) {
		t.Fatalf("a second Acquire() on the handle while its first waits degraded = %v; want ErrInvalid", oerr)
	}
}
