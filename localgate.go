package lock

import (
	"sync"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// localGate is a Client's in-process state by key: the live degraded hold,
// the acquisitions and holds of the key in Redis, and the count of waiters
// ([WithMaxWaiters]). Every kind's acquisitions go through it when its
// settings ask for it ([settings.gated]), from before the first attempt
// of an Acquire or TryAcquire (lease.Policy.Gate) until the acquisition
// ends holding nothing, or its hold ends (released, lost, force-released,
// abandoned by Close).
type localGate struct {
	mu      sync.Mutex
	keys    map[string]*gateEntry
	carries map[*lease.Handle]*waiterCarry // Acquires that may fall back, with WithMaxWaiters
}

// gateEntry is the gate's state of one key.
type gateEntry struct {
	held    *localHold             // the live degraded hold, or nil
	passes  map[*gatePass]struct{} // acquisitions and holds of the key in Redis
	waiters int                    // Acquire calls under way, with WithMaxWaiters
	freed   chan struct{}          // closed when the key is free in the gate; nil when nobody waits for that
}

// gatePass is one acquisition in the gate (a lease.GatePass), on the
// Redis lock keys of its lock (a MultiLock's members), and then the hold
// it took.
type gatePass struct {
	g       *localGate
	keys    []string
	waiting bool // counted among its keys' waiters until Leave
	carry   bool // a waiterCarry takes over its count when it leaves without a hold
	carried bool // its count is the waiterCarry's now
	gone    bool // left the gate (g.mu)
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

// tidy wakes those waiting for key to be free, if it is, and drops its
// entry if it keeps nothing; g.mu is held.
func (g *localGate) tidy(key string, e *gateEntry) {
	if e.held != nil || len(e.passes) > 0 {
		return
	}
	if e.freed != nil {
		close(e.freed)
		e.freed = nil
	}
	if e.waiters == 0 {
		delete(g.keys, key)
	}
}

// enter admits an acquisition on keys: counted among their waiters when
// maxWaiters > 0 (an Acquire with [WithMaxWaiters]), which fails with
// ErrContended while maxWaiters are counted on one of them already.
func (g *localGate) enter(hd *lease.Handle, keys []string, maxWaiters int) (*gatePass, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.count(hd, keys, maxWaiters); err != nil {
		return nil, err
	}
	p := &gatePass{g: g, keys: keys, waiting: maxWaiters > 0}
	if c := g.carries[hd]; c != nil && c.p == nil && p.waiting {
		c.p, p.carry = p, true
	}
	for _, key := range keys {
		e := g.entry(key)
		if e.passes == nil {
			e.passes = make(map[*gatePass]struct{})
		}
		e.passes[p] = struct{}{}
	}
	return p, nil
}

// Open reports whether p's attempt may go to Redis: not while a degraded
// hold of one of its keys is live.
func (p *gatePass) Open() bool {
	g := p.g
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, key := range p.keys {
		if e := g.keys[key]; e != nil && e.held != nil {
			return false
		}
	}
	return true
}

// Leave ends p's acquisition, which took h (nil: none): p stays in the
// gate until h ends.
func (p *gatePass) Leave(h *lease.Hold) {
	switch {
	case p.waiting && p.carry && h == nil:
		p.carried = true // still under way: it may fall back (waiterCarry)
	case p.waiting:
		p.g.uncount(p.keys)
	}
	if h == nil {
		p.drop()
		return
	}
	h.OnEnd(p.drop)
}

// drop takes p out of the gate.
func (p *gatePass) drop() {
	g := p.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.gone {
		return
	}
	p.gone = true
	for _, key := range p.keys {
		if e := g.keys[key]; e != nil {
			delete(e.passes, p)
			g.tidy(key, e)
		}
	}
}

// takeLocal takes key's in-process lock; when it cannot (a degraded hold,
// or an acquisition or hold of the key in Redis, is in the way), it
// returns nil and a channel closed once the key is free in the gate.
func (g *localGate) takeLocal(key string) (*localHold, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entry(key)
	if e.held != nil || len(e.passes) > 0 {
		if e.freed == nil {
			e.freed = make(chan struct{})
		}
		return nil, e.freed
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
	g.tidy(d.key, e)
	return true
}

// gated reports whether the locks of s go through the Client's local
// gate: when they or the Client have WithFallback or WithMaxWaiters.
// Every kind does then, so that a degraded hold excludes them all within
// the Client; the others pay nothing for the gate.
func (s *settings) gated() bool { return s.degrades() || s.c.cfg.degrades() }

// lockGate is the lease.Gate of the locks of settings: a lock's key in the
// gate is its own Redis lock key (P{K}).
type lockGate struct{ s *settings }

// Enter admits an acquisition of hd: see localGate.enter.
func (g lockGate) Enter(hd *lease.Handle, wait bool) (lease.GatePass, error) {
	return g.s.enter(hd, []string{hd.Keys.Lock()}, wait)
}

// enter admits an acquisition of hd on keys; an Acquire (wait) counts as
// a waiter under WithMaxWaiters.
func (s *settings) enter(hd *lease.Handle, keys []string, wait bool) (lease.GatePass, error) {
	n := 0
	if wait {
		n = s.maxWaiters
	}
	p, err := s.c.local.enter(hd, keys, n)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// multiGate is a MultiLock's lease.Gate: its keys in the gate are its
// members' Redis lock keys.
type multiGate struct {
	s    *settings
	keys []string
}

// Enter admits an acquisition of the MultiLock hd.
func (g multiGate) Enter(hd *lease.Handle, wait bool) (lease.GatePass, error) {
	return g.s.enter(hd, g.keys, wait)
}

// gate returns the lease.Gate of m under s: nil when s is not gated.
func (m *MultiLock) gate(s *settings) lease.Gate {
	if !s.gated() {
		return nil
	}
	keys := make([]string, 0, len(m.groups))
	for _, g := range m.groups {
		for i := range g {
			keys = append(keys, g[i].Lock())
		}
	}
	return multiGate{s: s, keys: keys}
}
