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
// from its start, its first attempt included, until it returns. A
// [MultiLock] counts on each of its keys, and is refused when one of them
// has n. TryAcquire never waits and is never refused. Default 0: no cap.
// Negative is invalid.
func WithMaxWaiters(n int) Option {
	return func(c *config) { c.maxWaiters = n; c.given |= optMaxWaiters }
}

// count counts one more waiter on each of keys, or fails with
// ErrContended when n already wait on one of them; nothing with n <= 0.
// g.mu is held.
func (g *localGate) count(hd *lease.Handle, keys []string, n int) error {
	if n <= 0 {
		return nil
	}
	for _, key := range keys {
		if e := g.keys[key]; e != nil && e.waiters >= n {
			return hd.Err("acquire", fmt.Errorf("%w: %d waiters already", ErrContended, n))
		}
	}
	for _, key := range keys {
		g.entry(key).waiters++
	}
	return nil
}

// uncount undoes count's count on keys.
func (g *localGate) uncount(keys []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, key := range keys {
		if e := g.keys[key]; e != nil {
			e.waiters--
			g.tidy(key, e)
		}
	}
}

// admit counts one more waiter on hd's key for a degraded wait, or fails
// with ErrContended when n already wait; leave uncounts it.
func (g *localGate) admit(hd *lease.Handle, n int) (leave func(), err error) {
	keys := []string{hd.Keys.Lock()}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.count(hd, keys, n); err != nil {
		return nil, err
	}
	return func() { g.uncount(keys) }, nil
}

// waiterCarry keeps an Acquire that may fall back ([WithFallback]) counted
// as a waiter ([WithMaxWaiters]) without a break from its start until it
// returns: its pass in the gate, leaving without a hold, leaves its count
// to the carry, which its degraded wait goes on with, and which end
// uncounts.
type waiterCarry struct {
	g  *localGate
	hd *lease.Handle
	p  *gatePass // the Acquire's pass, once it entered the gate counted
}

// carryWaiter returns the waiterCarry of an Acquire of l: nil when l does
// not fall back, has no cap on waiters, or another acquisition on l is
// under way (which the engine refuses).
func (l *Lock) carryWaiter() *waiterCarry {
	if !l.degradable() || l.cfg.maxWaiters <= 0 {
		return nil
	}
	g := &l.cfg.c.local
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.carries[&l.hd] != nil {
		return nil
	}
	if g.carries == nil {
		g.carries = make(map[*lease.Handle]*waiterCarry)
	}
	c := &waiterCarry{g: g, hd: &l.hd}
	g.carries[&l.hd] = c
	return c
}

// counted reports whether c holds its Acquire's count as a waiter.
func (c *waiterCarry) counted() bool { return c != nil && c.p != nil && c.p.carried }

// end uncounts what c holds and forgets c; deferred by the Acquire.
func (c *waiterCarry) end() {
	if c == nil {
		return
	}
	g := c.g
	g.mu.Lock()
	if g.carries[c.hd] == c {
		delete(g.carries, c.hd)
	}
	g.mu.Unlock()
	if c.counted() {
		c.p.carried = false
		g.uncount(c.p.keys)
	}
}
