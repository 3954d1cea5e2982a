package lock

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/adminhook"
	"github.com/agentlock/lock/internal/lease"
)

// settings is one configuration of locks — the Client's defaults, or one
// lock's own options — with what it means to the engine: the backend its
// locks talk through and the engine's Policy. Locks share it.
type settings struct {
	config
	c   *Client
	be  backend
	pol lease.Policy
	// info is the holder info its holds write (holderinfo.go), boxed
	// once; nil when off.
	info any
	// aud writes its audit entries ([WithAudit]); nil when off.
	aud *auditor
	// ops is what its Locks are as the engine sees them (kindOps); how
	// their Acquire waits is pol.Strategy.
	ops *kindOps
	// sem is a semaphore's backend, its be too (semaphore.go); zero for
	// the settings of other kinds.
	sem semBackend
	// grp is the renewal group of its holds (with no master named), boxed
	// once: the renewal loop asks for every hold's group at every renewal.
	grp lease.Group
}

// settings returns the settings of cfg, which is valid.
func (c *Client) settings(cfg config) *settings { return c.fill(&settings{config: cfg}) }

// fill completes s, whose config is valid, and returns it.
func (c *Client) fill(s *settings) *settings {
	cfg := &s.config
	s.c = c
	s.info = holderInfo(cfg)
	s.be = c.backend(backendKind{mode: cfg.mode, reentrant: cfg.ownerSet, fencing: cfg.fencing, coalesce: cfg.coalesce,
		info: s.info != nil})
	s.grp = renewGroup{be: s.be, rdb: c.rdb}
	s.pol = lease.Policy{
		Engine:      &c.eng,
		Pkg:         "lock",
		TTL:         cfg.ttl,
		Watchdog:    cfg.watchdog,
		MaxHold:     cfg.maxHold,
		Wait:        cfg.wait,
		BackoffMin:  cfg.backoffMin,
		BackoffMax:  cfg.backoffMax,
		Notify:      cfg.notify,
		Fencing:     cfg.fencing,
		Bounded:     cfg.coalesce || !keepsDeadlines(c.rdb),
		UndoTimeout: cleanupTimeout(cfg.ttl),
		Margin:      safetyMargin,
		Group:       s.group,
		Lost:        newLostError,
		Logger:      cfg.logger,
	}
	s.pol.Strategy = mutexStrategy(cfg)
	s.ops = mutexOps
	if cfg.fair {
		s.ops = fairOps
	}
	if cfg.ownerSet {
		s.pol.Owner = cfg.owner
	}
	if cfg.fair {
		s.pol.BackoffMin = fairBackoffMin(cfg.backoffMin, cfg.backoffMax)
	}
	if cfg.observer != nil {
		s.pol.Observe = observerFunc(cfg.observer)
		s.pol.ObserveContext = contextObserverFunc(cfg.observer)
	}
	// After the Observer: the audit records, then passes the event on.
	if cfg.audit != "" {
		s.aud = c.auditor(cfg)
		s.aud.s = s
		s.pol.Observe = s.aud.chain(s.pol.Observe)
	}
	if cfg.notify {
		s.pol.Inbox = c.forceChannel(cfg.prefix)
	}
	if s.gated() {
		// The local gate and WithMaxWaiters (localgate.go, maxwaiters.go).
		s.pol.Gate = lockGate{s}
	}
	return s
}

// keepsDeadlines reports whether rdb ends a call at its context's deadline
// on its own (adminhook.KeepsDeadlines).
func keepsDeadlines(rdb redis.UniversalClient) bool { return adminhook.KeepsDeadlines(rdb) }

// safetyMargin is how long before its TTL would run out (counted from when
// the confirming call was sent) a hold that renewal could not confirm is
// declared lost: a tenth of the TTL, plus 2ms. It covers clock-rate
// differences between client and server (far under 1%) and leaves the holder
// time to stop before anyone else can take the lock.
// For TTLs under 4ms the margin is capped at half the TTL, so even a 1ms
// lease leaves a window in which a hold can be confirmed.
func safetyMargin(ttl time.Duration) time.Duration {
	return min(ttl/10+2*time.Millisecond, ttl/2)
}

// cleanupTimeout bounds the calls the library makes on the caller's behalf
// once the caller's own context may be gone: a release after WithLock, the
// undo of a failed acquisition.
func cleanupTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl, time.Second), 5*time.Second)
}

// mutexStrategy returns how a mutex of cfg waits. A fair lock hands over
// in Redis, to its queue's head (fair.go). Only plain script-mode holds
// without a replica WAIT can be handed over by a release in this process
// (see handoff.lua).
func mutexStrategy(cfg *config) lease.Strategy {
	switch {
	case cfg.fair:
		return lease.FIFO
	case cfg.mode == ReleaseScript && !cfg.ownerSet && cfg.acks == 0:
		return lease.HandOff
	}
	return lease.Contend
}

// permits reports whether s is a semaphore's.
func (s *settings) permits() bool { return s.sem.sb != nil }
