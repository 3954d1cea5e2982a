package lock

import (
	"crypto/rand"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/agentlock/lock/internal/luascripts"
)

// Lock is a handle on one distributed lock. It is not held until Acquire or
// TryAcquire succeeds; after Release it may be acquired again, each hold
// getting a fresh token and fence. Its methods are safe for concurrent use,
// but one handle holds the lock at most once at a time: use one handle per
// holder.
type Lock struct {
	c   *Client
	k   keys
	cfg *config // the Client's own when NewLock had no options
	err error   // configuration error, returned by every verb
	be  backend

	mu   sync.Mutex
	busy bool  // an Acquire or TryAcquire is under way
	h    *hold // the current or last hold; nil before the first
}

// NewLock returns a handle on the lock named key, configured by the Client's
// options and then opts. Any bytes make a key; distinct keys never exclude
// each other. An empty key, an invalid option or a Client not made by
// [NewClient] (a zero or nil one) is reported, wrapping [ErrInvalid], by
// every verb of the handle. NewLock talks to no server and starts nothing.
func (c *Client) NewLock(key string, opts ...Option) *Lock {
	if c.zero() {
		return &Lock{k: keys{User: key}, err: fmt.Errorf("lock: key %q: %w", key, errZeroClient)}
	}
	l := &Lock{c: c, cfg: &c.cfg}
	if len(opts) > 0 {
		cfg := c.cfg.with(opts)
		l.cfg = &cfg
	}
	l.k = luascripts.NewKeys(l.cfg.prefix, key)
	l.err = c.err
	if l.err == nil && len(opts) > 0 {
		l.err = l.cfg.validate()
	}
	if l.err == nil && key == "" {
		l.err = invalidf("empty key")
	}
	if l.err == nil && l.cfg.acks > 0 && !canWait(c.rdb) {
		l.err = invalidf("replica acks need a *redis.Client or *redis.ClusterClient, not %T", c.rdb)
	}
	if l.err == nil && c.cluster && strings.HasPrefix(key, "}") {
		// P{}...} has an empty hash tag: its keys would spread over slots.
		l.err = invalidf("key %q: on Redis Cluster a key must not start with '}'", key)
	}
	if l.err != nil {
		l.err = fmt.Errorf("lock: key %q: %w", key, l.err)
		return l
	}
	l.be = c.backend(backendKind{mode: l.cfg.mode, reentrant: l.cfg.ownerSet, fencing: l.cfg.fencing, coalesce: l.cfg.coalesce})
	return l
}

// Key returns the caller's key, as given to NewLock; "" on a zero Lock.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.k.User
}

// Token returns the token of the current or last hold: a random UUID v4, or
// the owner id for a re-entrant lock ([WithOwner]). "" before the first
// acquisition.
func (l *Lock) Token() string {
	if h := l.hold(); h != nil {
		return l.publicToken(h.token)
	}
	return ""
}

// publicToken is the token Token and the Observer show for a hold's token:
// for a re-entrant hold the owner id, not the hold's own id.
func (l *Lock) publicToken(token string) string {
	if l.cfg.ownerSet && token != "" {
		return l.cfg.owner
	}
	return token
}

// Fence returns the fencing token of the current or last hold: a number that
// strictly increases with each acquisition of the key, to be passed to a
// downstream store that rejects writes carrying an older fence than it has
// seen. 0 before the first acquisition, or with [WithFencing](false).
func (l *Lock) Fence() int64 {
	if h := l.hold(); h != nil {
		return h.fence
	}
	return 0
}

// Lost returns a channel closed when the current hold ends involuntarily:
// taken by someone else, expired, deleted, or not confirmed by renewal
// before its safety deadline. A Release does not close it. Each hold has its
// own channel; before the first acquisition Lost returns nil (a channel that
// never closes). See [Lock.LostErr] for the reason.
func (l *Lock) Lost() <-chan struct{} {
	if h := l.hold(); h != nil {
		return h.lostChan()
	}
	return nil
}

// LostErr returns the [*LostError] of the current hold once [Lock.Lost] has
// closed, and nil before. It matches [ErrLockLost].
func (l *Lock) LostErr() error {
	if h := l.hold(); h != nil {
		return h.lostErr()
	}
	return nil
}

func (l *Lock) hold() *hold {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h
}

// newToken returns a random UUID v4 from crypto/rand. For a re-entrant lock
// it returns the hold's id instead: the owner id, '#', and a UUID of its
// own, so that Redis tells this hold from the owner's others and a retried
// or resent call for it counts once (see acquire.lua).
func (l *Lock) newToken() (string, error) {
	// A version 4 UUID filled straight from crypto/rand: uuid.NewRandom reads
	// through an io.Reader and costs one more allocation per acquisition.
	var u uuid.UUID
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("lock: acquire %q: token: %w", l.k.User, err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	if l.cfg.ownerSet {
		return l.cfg.owner + "#" + u.String(), nil
	}
	return u.String(), nil
}

var (
	errZeroClient = invalidf("zero Client: make clients with NewClient")
	errZeroLock   = invalidf("zero Lock: make locks with Client.NewLock")
)

// usable returns the handle's configuration error, if any: every verb asks
// first, so a zero or nil Lock, or one from a zero Client, touches nothing.
func (l *Lock) usable() error {
	switch {
	case l == nil:
		return errZeroLock
	case l.err != nil:
		return l.err
	case l.c == nil:
		return errZeroLock
	}
	return nil
}

// begin checks that an acquisition may start and marks the handle busy.
func (l *Lock) begin() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.c.closed.Load() {
		return fmt.Errorf("lock: acquire %q: %w", l.k.User, ErrClosed)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy {
		return fmt.Errorf("lock: acquire %q: %w: another acquisition on this handle is under way", l.k.User, ErrInvalid)
	}
	if l.h != nil && l.h.active() {
		return fmt.Errorf("lock: acquire %q: %w: already held by this handle; release it first", l.k.User, ErrInvalid)
	}
	l.busy = true
	return nil
}

func (l *Lock) done() {
	l.mu.Lock()
	l.busy = false
	l.mu.Unlock()
}
