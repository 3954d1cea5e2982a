package lock

import (
	"context"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Semaphore lets at most n holders at once hold one key, across every
// process: each holder holds a permit, a *Lock leased, renewed, lost and
// fenced like a mutex's hold; a crashed holder's permit counts until its
// TTL runs out. Every permit's fence is greater than any earlier permit's
// of the key. Make one with [Client.NewSemaphore]; it is safe for
// concurrent use, and holds nothing itself.
//
// n belongs to each Semaphore value, not to the key: lowering it revokes no
// permit, and while processes disagree the key holds at most the largest n.
// A released permit goes to one waiter, not to all of them.
//
// A semaphore needs scripting, and its permits are neither re-entrant nor
// queued: [ReleaseWatch], [WithOwner], [WithReplicaAck] and [WithFair]
// given to [Client.NewSemaphore] are [ErrInvalid]; set on the Client, a
// semaphore ignores them. See docs/guide.md#semaphores and docs/safety.md#semaphores.
type Semaphore struct {
	key  string
	n    int
	set  *settings // nil when err is set
	err  error
	keys luascripts.Keys
}

// NewSemaphore returns a semaphore of n permits on key, configured by the
// Client's options and then opts (TTL, watchdog, wait timeout, backoff,
// notify, prefix, observer, logger, max hold, fencing, coalescing). n <= 0,
// an empty key, an option a semaphore cannot honour ([ReleaseWatch],
// [WithOwner], [WithReplicaAck], [WithFair]) or an invalid option is
// reported, wrapping [ErrInvalid], by every verb of every permit and by
// [Semaphore.Available].
// NewSemaphore talks to no server and starts nothing.
func (c *Client) NewSemaphore(key string, n int, opts ...Option) *Semaphore {
	s := &Semaphore{key: key, n: n}
	if c.zero() {
		s.err = keyError(key, errZeroClient)
		return s
	}
	cfg, err := c.kindConfig(kindPermit, opts)
	switch {
	case err != nil:
	case n <= 0:
		err = invalidf("semaphore of %d permits: n must be at least 1", n)
	default:
		err = c.checkKey(key)
	}
	if err != nil {
		s.err = keyError(key, err)
		return s
	}
	s.set, s.keys = c.semSettings(cfg, n, len(opts) == 0), luascripts.NewKeys(cfg.prefix, key)
	return s
}

// semSettings returns the settings of a semaphore of n permits configured
// by cfg. Semaphores made without options share one per n, so that a
// release hands its permit to a waiter of any of them (see semHandoff),
// also when callers make a Semaphore per request.
func (c *Client) semSettings(cfg config, n int, shared bool) *settings {
	if shared {
		c.beMu.Lock()
		set := c.sems[n]
		c.beMu.Unlock()
		if set != nil {
			return set
		}
	}
	set := c.settings(cfg)
	sb := c.backend(backendKind{mode: ReleaseScript, fencing: cfg.fencing, coalesce: cfg.coalesce,
		info: set.info != nil}).(*scriptBackend)
	set.sem = semBackend{sb: sb, rdb: c.rdb, n: n, info: set.info}
	set.be = set.sem
	set.ops = permitOps
	set.pol.Strategy = lease.HandOff // to waiters of the same settings only: see semHandoff
	set.pol.Tag = semTag{}           // so a mutex's release hands it nothing (handoff)
	// The renewal group of its permits (settings.group): one per script
	// backend, shared by the permits of every semaphore of the Client
	// that uses it, whatever their n.
	set.grp = renewGroup{be: semBackend{sb: sb}, rdb: c.rdb}
	if shared {
		c.beMu.Lock()
		defer c.beMu.Unlock()
		if c.sems == nil {
			c.sems = map[int]*settings{}
		}
		if prev := c.sems[n]; prev != nil {
			return prev
		}
		c.sems[n] = set
	}
	return set
}

// semTag marks the policies of semaphores (lease.Policy.Tag).
type semTag struct{}

// errZeroSemaphore is what a zero or nil Semaphore reports.
var errZeroSemaphore = invalidf("zero Semaphore: make semaphores with Client.NewSemaphore")

// usable returns the error every use of s reports, or nil.
func (s *Semaphore) usable() error {
	switch {
	case s == nil || (s.set == nil && s.err == nil):
		return errZeroSemaphore
	case s.err != nil:
		return s.err
	}
	return nil
}

// Key returns the caller's key, as given to NewSemaphore; "" on a zero
// Semaphore.
func (s *Semaphore) Key() string {
	if s == nil {
		return ""
	}
	return s.key
}

// N returns the number of permits this Semaphore lets out at once.
func (s *Semaphore) N() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Permit returns a new handle on one permit, not yet held: a *Lock whose
// every verb works as a mutex's (Acquire waits for a free permit, TryAcquire
// reports (false, nil) when all n are out, Release gives the permit back,
// and Extend, TTL, Fence, Lost and LostErr belong to this permit alone).
// Use one handle per holder. On a Semaphore that is invalid, every verb of
// the permit returns its error, wrapping [ErrInvalid].
func (s *Semaphore) Permit() *Lock {
	l := &Lock{}
	if err := s.usable(); err != nil {
		l.hd.Fail(s.Key(), err)
		return l
	}
	l.cfg = s.set
	l.hd.Init(&s.set.pol, s.keys)
	return l
}

// WithPermit acquires a permit (waiting, as [Lock.Acquire]), runs fn and
// gives the permit back, also when fn panics (the panic then continues),
// with the meanings of [Client.WithLock]: fn's context ends, cause a
// [*LostError], if the permit is lost while fn runs, and the error then
// matches [ErrLockLost] whatever fn returned.
func (s *Semaphore) WithPermit(ctx context.Context, fn func(context.Context) error) error {
	l := s.Permit()
	return lease.WithLock(ctx, "lock", &l.hd, l.kind(), fn)
}

// Available returns how many of the Semaphore's n permits are free now: n
// less the live permits on the key, at least 0 (it is 0 while more than n
// are out, after n was lowered). The answer may be stale by the time it
// returns. It returns an error wrapping [ErrInvalid] for an invalid
// Semaphore or a key that holds another kind of lock, or the Redis error.
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	var n int
	err := s.set.c.callBounded(ctx, func() (err error) {
		n, err = s.set.sem.available(ctx, &s.keys)
		return err
	})
	if err != nil {
		return 0, lease.NewOpError("lock", "available", s.key, err)
	}
	return n, nil
}
