package lock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
)

// Fallback says what an acquisition of a mutex does when Redis is unreachable;
// see [WithFallback].
type Fallback int

const (
	// FallbackNone: the acquisition fails (Acquire retries until its wait
	// ends). The default: fail closed.
	FallbackNone Fallback = iota
	// FallbackLocal: the acquisition takes an in-process lock on the key
	// instead, giving exclusion within this Client only ([Lock.Degraded]).
	FallbackLocal
)

// String names the fallback.
func (f Fallback) String() string {
	switch f {
	case FallbackNone:
		return "none"
	case FallbackLocal:
		return "local"
	}
	return "Fallback(" + strconv.Itoa(int(f)) + ")"
}

// WithFallback sets what a mutex's Acquire, TryAcquire and WithLock do when
// Redis is unreachable. [FallbackNone] (the default) fails closed.
// [FallbackLocal] degrades: when an attempt fails with a network error
// (dial, reset, closed connection, timeout, empty pool), the call takes an
// in-process lock on the key instead, shared by every lock of the [Client],
// with an [EventFallback] to the Observer. Error replies, a key held by
// another and the caller's own ctx never fall back.
//
// A degraded hold ([Lock.Degraded]) gives NO exclusion against other
// processes. Its fence is 0; it is never renewed or lost, Extend does
// nothing, TTL returns [ErrNotHeld], and Release does not talk to Redis.
// Within the Client it excludes every kind of lock on the key, for locks
// that have WithFallback or [WithMaxWaiters]: give it to [NewClient]. Only
// mutexes fall back; the other kinds keep trying Redis. See
// docs/guide.md#degrading-redis-down-a-key-swamped and docs/safety.md.
func WithFallback(f Fallback) Option {
	return func(c *config) { c.fallback = f; c.given |= optFallback }
}

// localHold is a degraded hold: the in-process lock of one key.
type localHold struct {
	key      string // the lock's Redis key (prefix and hash tag included)
	token    string
	since    time.Time
	lost     chan struct{} // never closed: a degraded hold is never lost
	released atomic.Bool
}

// claimHandle marks an acquisition on l as under way when l falls back to
// a local lock, for its Redis part and its degraded one alike (the
// engine's own mark ends with the Redis part); done unmarks it. A second
// one meanwhile fails with ErrInvalid, as the engine fails it.
func (l *Lock) claimHandle() (done func(), err error) {
	if !l.degradable() {
		return func() {}, nil
	}
	if !l.falling.CompareAndSwap(false, true) {
		return nil, l.hd.Err("acquire", invalidf("another acquisition on this handle is under way"))
	}
	return func() { l.falling.Store(false) }, nil
}

// degradable reports whether l falls back to a local lock.
func (l *Lock) degradable() bool {
	return l != nil && l.cfg != nil && l.rw == nil && l.cfg.fallback == FallbackLocal && !l.cfg.permits()
}

// unreachable reports whether err says Redis could not be reached: a
// network error (dial, reset, closed, timeout) or an empty connection
// pool; not an error reply, not the caller's context.
func unreachable(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, redis.ErrClosed):
		return false
	}
	return networkFailure(err)
}

// final reports whether an acquire attempt of l that failed with err ends
// the Redis part of the acquisition: an error a retry cannot mend, or an
// unreachable Redis when l falls back to a local lock.
func (l *Lock) final(err error) bool {
	return !retryable(err) || (l.degradable() && unreachable(err))
}

// heldLocally returns the error of an acquisition on a handle whose
// degraded hold is live, or nil.
func (l *Lock) heldLocally() error {
	if d := l.degraded(); d != nil && !d.released.Load() {
		return l.hd.Err("acquire", invalidf("already held (degraded) by this handle; release it first"))
	}
	return nil
}

// acquireLocal takes the key's in-process lock after Redis failed with
// cause: for an Acquire begun at start, waiting until it is free, ctx is
// done or the wait timeout (counted from start) passes; for a TryAcquire
// (start zero), not at all. carry is the Acquire's waiterCarry: counted
// among the key's waiters since its start, it is not counted again.
func (l *Lock) acquireLocal(ctx context.Context, start time.Time, cause error, carry *waiterCarry) (bool, error) {
	g := &l.cfg.c.local
	wait := !start.IsZero()
	began := time.Now()
	wctx := ctx
	if wait && l.cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadlineCause(ctx, start.Add(l.cfg.wait), errLocalWait)
		defer cancel()
	}
	if wait && l.cfg.maxWaiters > 0 && !carry.counted() {
		leave, err := g.admit(&l.hd, l.cfg.maxWaiters)
		if err != nil {
			l.observeFallback(ctx, nil, began, err)
			return false, err
		}
		defer leave()
	}
	eng := &l.cfg.c.eng
	for {
		if eng.Closed() {
			err := l.hd.Err("acquire", ErrClosed, cause)
			l.observeFallback(ctx, nil, began, err)
			return false, err
		}
		d, freed := g.takeLocal(l.hd.Keys.Lock())
		if d != nil {
			l.deg.Store(d)
			l.announceLocal(ctx, d, began, cause)
			return true, nil
		}
		if !wait {
			l.observeFallback(ctx, nil, began, ErrNotAcquired)
			return false, nil
		}
		// Woken when the key is free in the gate: the degraded hold in the
		// way released, the Redis acquisitions and holds of this Client
		// on the key ended. Close ends the wait, as it ends a wait for
		// Redis.
		select {
		case <-freed:
		case <-eng.Context().Done():
		case <-wctx.Done():
			err := l.hd.Err("acquire", ErrNotAcquired, context.Cause(wctx), cause)
			l.observeFallback(ctx, nil, began, err)
			return false, err
		}
	}
}

// announceLocal tells the logger and the Observer of d, the degraded hold
// an acquisition that began at began took after Redis failed with cause.
// If either panics (or exits the goroutine), the caller never learns it
// holds the key and will not release it: d, which never expires, is
// released before the panic goes on, as a Redis hold is.
func (l *Lock) announceLocal(ctx context.Context, d *localHold, began time.Time, cause error) {
	told := false
	defer func() {
		if !told {
			l.cfg.c.local.releaseLocal(d)
		}
	}()
	if lg := l.cfg.logger; lg != nil {
		lg.Warn("lock degraded: Redis unreachable, holding the key in this process only",
			slog.String("key", l.hd.Keys.User), slog.Any("err", cause))
	}
	l.observeFallback(ctx, d, began, nil)
	told = true
}

// errLocalWait is the cause of a degraded wait that ran out.
var errLocalWait = errors.New("lock: wait timeout")

// observeFallback reports the end of a fallback that began at start: d is
// the hold taken, or nil with err.
func (l *Lock) observeFallback(ctx context.Context, d *localHold, start time.Time, err error) {
	o := l.cfg.observer
	if o == nil {
		return
	}
	e := Event{Kind: EventFallback, Key: l.hd.Keys.User, Duration: time.Since(start), Err: err, Ctx: ctx}
	if d != nil {
		e.Token, e.Degraded = d.token, true
	}
	o.Observe(e)
}

// releaseLocal is Release of a degraded hold d.
func (l *Lock) releaseLocal(ctx context.Context, d *localHold) error {
	start := time.Now()
	var err error
	if !l.cfg.c.local.releaseLocal(d) {
		err = l.hd.Err("release", ErrNotHeld)
	}
	if o := l.cfg.observer; o != nil {
		now := time.Now()
		o.Observe(Event{Kind: EventRelease, Key: l.hd.Keys.User, Token: d.token, Duration: now.Sub(start),
			Err: err, Ctx: ctx, Held: now.Sub(d.since), Degraded: true})
	}
	return err
}

// degraded returns the current hold when it is degraded; nil otherwise
// and on a nil Lock.
func (l *Lock) degraded() *localHold {
	if l == nil {
		return nil
	}
	return l.deg.Load()
}

// Degraded reports whether the current or last hold came from the
// fallback ([WithFallback]): an in-process lock, not a Redis one. It is
// false before the first acquisition and after an acquisition that reached
// Redis.
func (l *Lock) Degraded() bool { return l.degraded() != nil }

// extendLocal is Extend of a degraded hold d: nothing to extend.
func (l *Lock) extendLocal(d *localHold, ttl time.Duration) error {
	if ttl < MinTTL {
		return l.hd.Err("extend", ttlError(ttl))
	}
	if d.released.Load() {
		return l.hd.Err("extend", ErrNotHeld)
	}
	return nil
}

// errDegradedTTL says why a degraded hold has no TTL.
var errDegradedTTL = errors.New("degraded hold: Redis holds no key for it")

// withLockFallback is WithLock of a lock with [FallbackLocal]: when the
// acquisition finds Redis unreachable, fn runs under a degraded hold, its
// ctx never cancelled by a loss (a degraded hold is never lost).
func (l *Lock) withLockFallback(ctx context.Context, fn func(context.Context) error) error {
	ran, start := false, time.Now()
	carry := l.carryWaiter()
	defer carry.end()
	err := lease.WithLock(ctx, "lock", &l.hd, l.kind(), func(ctx context.Context) error {
		ran = true
		return fn(ctx)
	})
	if ran || !unreachable(err) {
		return err
	}
	if _, err := l.acquireLocal(ctx, start, err, carry); err != nil {
		return err
	}
	d := l.deg.Load()
	defer func() { _ = l.releaseLocal(context.WithoutCancel(ctx), d) }()
	return fn(ctx)
}

// degrades reports whether cfg asks for the local gate: a fallback or a
// cap on waiters.
func (cfg *config) degrades() bool {
	return cfg.fallback != FallbackNone || cfg.maxWaiters > 0
}
