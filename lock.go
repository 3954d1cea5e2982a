package lock

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Lock is a handle on one distributed lock. It is not held until Acquire or
// TryAcquire succeeds; after Release it may be acquired again, each hold
// getting a fresh token and fence. Its methods are safe for concurrent use,
// but one handle holds the lock at most once at a time: use one handle per
// holder.
type Lock struct {
	cfg     *settings // the Client's own when NewLock had no options; nil on error
	hd      lease.Handle
	rw      *rwSide                   // a read-write lock's hold (rwlock.go); nil for the mutex
	deg     atomic.Pointer[localHold] // the current hold when degraded (fallback.go)
	falling atomic.Bool               // an acquisition that may fall back is under way (fallback.go)
}

// kind returns the calls of l's kind of lock, as the engine sees them:
// those chosen when l was made, or the mutex's on a Lock that failed (or
// a zero or nil one), whose verbs return its error before any call.
func (l *Lock) kind() lease.Kind {
	if l == nil || l.cfg == nil {
		return (*kind)(l)
	}
	return l.cfg.ops.wait(l)
}

// tryKind is kind for TryAcquire.
func (l *Lock) tryKind() lease.Kind {
	if l == nil || l.cfg == nil {
		return (*kind)(l)
	}
	return l.cfg.ops.try(l)
}

// kindOps is how the Locks of one settings are their kind as the engine
// sees them, chosen when the settings are made: wait for Acquire, Release,
// Extend and WithLock, try for TryAcquire (a read-write lock's writer marks
// nothing there). Kept in the settings, so a Lock carries no more than a
// pointer to them; each conversion of *Lock costs no allocation.
type kindOps struct {
	wait, try func(*Lock) lease.Kind
}

// The kinds of *Lock.
var (
	mutexOps  = &kindOps{wait: func(l *Lock) lease.Kind { return (*kind)(l) }, try: func(l *Lock) lease.Kind { return (*kind)(l) }}
	fairOps   = &kindOps{wait: func(l *Lock) lease.Kind { return (*fairKind)(l) }, try: func(l *Lock) lease.Kind { return (*fairTry)(l) }}
	rwOps     = &kindOps{wait: func(l *Lock) lease.Kind { return (*rwKind)(l) }, try: func(l *Lock) lease.Kind { return rwTry{(*rwKind)(l)} }}
	permitOps = &kindOps{wait: func(l *Lock) lease.Kind { return permitKind{(*kind)(l)} }, try: func(l *Lock) lease.Kind { return permitKind{(*kind)(l)} }}
)

// initMutex makes l a handle on key under s: a mutex, re-entrant or not,
// or a fair lock ([WithFair]), whose Acquire waits by s's strategy. A
// semaphore's permit and Once's lock are mutexes to the engine, over
// their own backend and settings.
func (l *Lock) initMutex(s *settings, keys luascripts.Keys) {
	l.cfg = s
	l.hd.Init(&s.pol, keys)
}

// NewLock returns a handle on the lock named key, configured by the Client's
// options and then opts. Any bytes make a key; distinct keys never exclude
// each other. An empty key, an invalid option or a Client not made by
// [NewClient] (a zero or nil one) is reported, wrapping [ErrInvalid], by
// every verb of the handle. NewLock talks to no server and starts nothing.
func (c *Client) NewLock(key string, opts ...Option) *Lock {
	l := &Lock{}
	if c.zero() {
		l.hd.Fail(key, keyError(key, errZeroClient))
		return l
	}
	s, err := c.set, c.err
	if err == nil && len(opts) > 0 {
		s, err = c.lockSettings(opts) // shared by locks of the same options
	}
	if err == nil && s.acks > 0 && !canWait(c.rdb) {
		err = invalidf("replica acks need a *redis.Client or *redis.ClusterClient, not %T", c.rdb)
	}
	if err == nil {
		err = c.checkKey(key)
	}
	if err != nil {
		l.hd.Fail(key, keyError(key, err))
		return l
	}
	l.initMutex(s, luascripts.NewKeys(s.prefix, key))
	return l
}

// checkKey reports a key no lock of c can take.
func (c *Client) checkKey(key string) error {
	switch {
	case key == "":
		return invalidf("empty key")
	case c.cluster && strings.HasPrefix(key, "}"):
		// P{}...} has an empty hash tag: its keys would spread over slots.
		return invalidf("key %q: on Redis Cluster a key must not start with '}'", key)
	}
	return nil
}

// keyError is the configuration error of the lock on key.
func keyError(key string, err error) error {
	return lease.NewOpError("lock", "key", key, err)
}

// Key returns the caller's key, as given to NewLock; "" on a zero Lock.
func (l *Lock) Key() string { return l.handle().Key() }

// Token returns the token of the current or last hold: a random UUID v4, or
// the owner id for a re-entrant lock ([WithOwner]). "" before the first
// acquisition.
//
// A degraded hold's token ([Lock.Degraded]) is a random UUID Redis never
// sees.
func (l *Lock) Token() string {
	if d := l.degraded(); d != nil {
		return d.token
	}
	return l.handle().Token()
}

// Fence returns the fencing token of the current or last hold: a number that
// strictly increases with each acquisition of the key, to be passed to a
// downstream store that rejects writes carrying an older fence than it has
// seen. Nested re-entrant holds ([WithOwner]) share their outermost hold's
// fence. Fences are large (a counter starts from the server's clock in
// microseconds) and leave gaps. 0 before the first acquisition, or with
// [WithFencing](false), and for a degraded hold ([Lock.Degraded]).
func (l *Lock) Fence() int64 {
	if l.degraded() != nil {
		return 0
	}
	return l.handle().Fence()
}

// Lost returns a channel closed when the current hold ends involuntarily:
// taken by someone else, expired, deleted, or not confirmed by renewal
// before its safety deadline. A Release does not close it. Each hold has its
// own channel; before the first acquisition Lost returns nil (a channel that
// never closes). See [Lock.LostErr] for the reason. A degraded hold's
// channel ([Lock.Degraded]) never closes.
func (l *Lock) Lost() <-chan struct{} {
	if d := l.degraded(); d != nil {
		return d.lost
	}
	return l.handle().Lost()
}

// LostErr returns the [*LostError] of the current hold once [Lock.Lost] has
// closed, and nil before. It matches [ErrLockLost]. Always nil for a
// degraded hold ([Lock.Degraded]).
func (l *Lock) LostErr() error {
	if l.degraded() != nil {
		return nil
	}
	return l.handle().LostErr()
}

// errZeroClient is what the locks of a Client not made by NewClient report.
var errZeroClient = invalidf("zero Client: make clients with NewClient")

// handle returns the engine's handle; nil for a nil Lock.
func (l *Lock) handle() *lease.Handle {
	if l == nil {
		return nil
	}
	return &l.hd
}

// kind is a Lock as the engine sees it (lease.Kind): the Redis calls of its
// verbs. (*kind)(l) converts a *Lock at no cost.
type kind Lock

// Token returns a random UUID v4. For a re-entrant lock it returns the
// hold's id instead: the owner id, '#', and a UUID of its own, so that Redis
// tells this hold from the owner's others and a retried or resent call for
// it counts once (see acquire.lua).
func (k *kind) Token() (string, error) {
	u, err := lease.NewToken()
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	if k.cfg.ownerSet {
		return k.cfg.owner + "#" + u, nil
	}
	return u, nil
}
