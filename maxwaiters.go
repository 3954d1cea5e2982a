package lock

import (
	"fmt"

	"github.com/agentlock/lock/internal/lease"
)

// WithMaxWaiters caps how many Acquire calls (and WithLock calls, and
// their kinds' WithX) may wait for one key at once in this [Client]: while
// n of them are under way, a further one fails at once, before any attempt
// and without waiting, with an error wrapping [ErrContended]. The count is
// per process (per Client), not cluster-wide: it counts the calls of this
// Client's locks on the key that have this option, and an Acquire counts
// from its start, its first attempt included, until it returns. TryAcquire
// never waits and is never refused. Default 0: no cap. Negative is invalid.
func WithMaxWaiters(n int) Option {
	return func(c *config) { c.maxWaiters = n; c.given |= optMaxWaiters }
}

// admit counts one more waiter for hd's key, or fails with ErrContended
// when n already wait. leave uncounts it.
func (g *localGate) admit(hd *lease.Handle, n int) (leave func(), err error) {
	key := hd.Keys.Lock()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entry(key)
	if e.waiters >= n {
		g.tidy(key, e)
		return nil, hd.Err("acquire", fmt.Errorf("%w: %d waiters already", ErrContended, n))
	}
	e.waiters++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		e.waiters--
		g.tidy(key, e)
	}, nil
}

// admit is the Policy.Admit of s: the waiter cap, and the gate's record
// of the handle: registered while the Acquire is under way, settled when
// it returns.
func (s *settings) admit(hd *lease.Handle) (func(), error) {
	g := &s.c.local
	if s.maxWaiters <= 0 {
		g.register(hd)
		return func() { g.settle(hd) }, nil
	}
	leave, err := g.admit(hd, s.maxWaiters)
	if err != nil {
		return nil, err
	}
	g.register(hd)
	return func() {
		leave()
		g.settle(hd)
	}, nil
}

// settle updates the gate once an acquisition on hd ended: a handle that
// holds nothing is forgotten; one that holds the key is forgotten when its
// hold is lost (Release forgets it too, see kind.Release).
func (g *localGate) settle(hd *lease.Handle) {
	key := hd.Keys.Lock()
	g.mu.Lock()
	e := g.keys[key]
	if e == nil {
		g.mu.Unlock()
		return
	}
	if _, ok := e.redis[hd]; !ok {
		g.mu.Unlock()
		return
	}
	h := hd.Hold()
	if h == nil || !h.Active() {
		delete(e.redis, hd)
		g.tidy(key, e)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	h.OnLost(func(error) { g.leaveRedis(hd, true) })
}
