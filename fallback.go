package lock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
)

// Fallback says what an Acquire of a mutex does when Redis is unreachable;
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
// [FallbackLocal] degrades: when an acquire attempt fails because Redis
// cannot be reached — a dial or connection error, a connection reset or
// closed by the server, a network timeout, or no free connection in the
// pool — the call stops trying Redis and takes an in-process lock on the key
// instead, shared by every lock of the same [Client]. A Redis error reply
// (LOADING, READONLY, NOPERM, a script error), an answer that someone else
// holds the lock, and the caller's own context ending never fall back.
//
// A degraded hold ([Lock.Degraded] reports true) excludes only the other
// locks of the same key in this Client: it gives NO exclusion against other
// processes, which may hold the key in Redis or degraded themselves at the
// same time. Its fence is 0, its token a random UUID that Redis never sees;
// it is never renewed and never lost (its [Lock.Lost] channel never
// closes), [Lock.Extend] is a no-op and [Lock.TTL] returns an error
// wrapping [ErrNotHeld]; Release frees the local lock and does not talk to
// Redis. When Redis comes back while it is held, nothing changes for it: it
// stays degraded until released, and it does not take the Redis key. While
// it is held, every lock of the Client on that key that takes part in the
// Client's local gate finds the key held (its attempts are not sent); and a
// degraded acquire waits while such a lock holds the key in Redis or is
// acquiring it. A lock takes part when it or its Client has WithFallback or
// WithMaxWaiters: give the option to [NewClient] so that every lock does
// (the others pay nothing for the gate). The fallback is taken with an [EventFallback] to the
// Observer and a warning in the log ([WithLogger]).
//
// Only mutexes fall back: read-write locks and semaphore permits ignore the
// option.
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

// localGate is a Client's in-process state by key: the live degraded hold,
// the handles that talk to Redis for the key, and the count of waiters
// ([WithMaxWaiters]).
type localGate struct {
	mu   sync.Mutex
	keys map[string]*gateEntry
}

type gateEntry struct {
	held    *localHold                 // the live degraded hold, or nil
	redis   map[*lease.Handle]struct{} // handles acquiring or holding the key in Redis
	waiters int                        // Acquire calls under way, with WithMaxWaiters
	freed   chan struct{}              // closed when held is released; nil when nobody waits for it
}

// entry returns key's entry, making it; g.mu is held.
func (g *localGate) entry(key string) *gateEntry {
	e := g.keys[key]
	if e == nil {
		if g.keys == nil {
			g.keys = make(map[string]*gateEntry)
		}
		e = &gateEntry{}
		g.keys[key] = e
	}
	return e
}

// tidy drops key's entry if it holds nothing; g.mu is held.
func (g *localGate) tidy(key string, e *gateEntry) {
	if e.held == nil && len(e.redis) == 0 && e.waiters == 0 {
		delete(g.keys, key)
	}
}

// enterRedis registers hd as about to talk to Redis for its key; it
// reports false, registering nothing, while a degraded hold of the key is
// live in this Client.
func (g *localGate) enterRedis(hd *lease.Handle) bool {
	key := hd.Keys.Lock()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entry(key)
	if e.held != nil {
		g.tidy(key, e)
		return false
	}
	e.addRedis(hd)
	return true
}

// register records hd as acquiring its key in Redis, whether or not a
// degraded hold is live (its attempts are refused meanwhile): from the
// start of an Acquire, so that a hold a release hands it without an
// attempt of its own is never unknown to the gate.
func (g *localGate) register(hd *lease.Handle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entry(hd.Keys.Lock()).addRedis(hd)
}

func (e *gateEntry) addRedis(hd *lease.Handle) {
	if e.redis == nil {
		e.redis = make(map[*lease.Handle]struct{})
	}
	e.redis[hd] = struct{}{}
}

// leaveRedis unregisters hd, whose hold ended (or is being released);
// with idle, only if no acquisition is under way on hd.
func (g *localGate) leaveRedis(hd *lease.Handle, idle bool) {
	if idle && hd.Busy() {
		return
	}
	key := hd.Keys.Lock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.keys[key]; e != nil {
		delete(e.redis, hd)
		g.tidy(key, e)
	}
}

// live reports whether hd is acquiring or holding its key in Redis.
func live(hd *lease.Handle) bool {
	if hd.Busy() {
		return true
	}
	h := hd.Hold()
	return h != nil && h.Active()
}

// takeLocal takes key's in-process lock; when it cannot, it returns nil
// and a channel closed when the degraded hold in the way is released (nil
// when what is in the way is a Redis hold or acquisition of this Client).
func (g *localGate) takeLocal(key string) (*localHold, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entry(key)
	if e.held != nil {
		if e.freed == nil {
			e.freed = make(chan struct{})
		}
		return nil, e.freed
	}
	for hd := range e.redis {
		if live(hd) {
			return nil, nil
		}
		delete(e.redis, hd) // ended without telling (a lost hold's callback still to come)
	}
	token, err := lease.NewToken()
	if err != nil {
		token = "local"
	}
	d := &localHold{key: key, token: token, since: time.Now(), lost: make(chan struct{})}
	e.held = d
	return d, nil
}

// releaseLocal frees d; it reports false when d was already released.
func (g *localGate) releaseLocal(d *localHold) bool {
	if !d.released.CompareAndSwap(false, true) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.keys[d.key]
	if e == nil || e.held != d {
		return true
	}
	e.held = nil
	if e.freed != nil {
		close(e.freed)
		e.freed = nil
	}
	g.tidy(d.key, e)
	return true
}

// degradable reports whether l falls back to a local lock.
func (l *Lock) degradable() bool {
	if l == nil || l.cfg == nil || l.rw != nil || l.cfg.fallback != FallbackLocal {
		return false
	}
	_, sem := l.cfg.be.(semBackend)
	return !sem
}

// gated reports whether l's attempts go through the Client's local gate:
// a mutex (not a read-write lock or a semaphore permit) of a real Client,
// when it or its Client has WithFallback or WithMaxWaiters.
func (l *Lock) gated() bool {
	if l == nil || l.cfg == nil || l.cfg.c == nil || l.rw != nil {
		return false
	}
	if !l.cfg.degrades() && !l.cfg.c.cfg.degrades() {
		// Neither this lock nor its Client asked for a fallback or a
		// waiter cap: it pays nothing for the gate.
		return false
	}
	_, sem := l.cfg.be.(semBackend)
	return !sem
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

// heldLocally returns the error of an acquisition on a handle whose
// degraded hold is live, or nil.
func (l *Lock) heldLocally() error {
	if d := l.degraded(); d != nil && !d.released.Load() {
		return l.hd.Err("acquire", invalidf("already held (degraded) by this handle; release it first"))
	}
	return nil
}

// acquireLocal takes the key's in-process lock after Redis failed with
// cause: waiting (Acquire) until it is free, ctx is done or the wait
// timeout passes, or (TryAcquire) not at all.
func (l *Lock) acquireLocal(ctx context.Context, wait bool, cause error) (bool, error) {
	g := &l.cfg.c.local
	start := time.Now()
	wctx := ctx
	if wait && l.cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, l.cfg.wait, errLocalWait)
		defer cancel()
	}
	if wait && l.cfg.maxWaiters > 0 {
		leave, err := g.admit(&l.hd, l.cfg.maxWaiters)
		if err != nil {
			l.observeFallback(ctx, nil, start, err)
			return false, err
		}
		defer leave()
	}
	for n := 0; ; n++ {
		d, freed := g.takeLocal(l.hd.Keys.Lock())
		if d != nil {
			l.deg.Store(d)
			if lg := l.cfg.logger; lg != nil {
				lg.Warn("lock degraded: Redis unreachable, holding the key in this process only",
					slog.String("key", l.hd.Keys.User), slog.Any("err", cause))
			}
			l.observeFallback(ctx, d, start, nil)
			return true, nil
		}
		if !wait {
			l.observeFallback(ctx, nil, start, ErrNotAcquired)
			return false, nil
		}
		// A Redis hold of this Client ends without telling the gate: poll
		// it with the lock's backoff. A degraded one wakes us.
		t := time.NewTimer(lease.Backoff(l.cfg.backoffMin, l.cfg.backoffMax, n))
		select {
		case <-freed:
		case <-t.C:
		case <-wctx.Done():
			t.Stop()
			err := l.hd.Err("acquire", ErrNotAcquired, context.Cause(wctx), cause)
			l.observeFallback(ctx, nil, start, err)
			return false, err
		}
		t.Stop()
	}
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
	ran := false
	err := lease.WithLock(ctx, "lock", &l.hd, (*kind)(l), func(ctx context.Context) error {
		ran = true
		return fn(ctx)
	})
	if ran || !unreachable(err) {
		return err
	}
	if _, err := l.acquireLocal(ctx, true, err); err != nil {
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
