package redlock

import (
	"context"
	"strconv"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/lease"
)

// settings is one configuration of locks — the Client's defaults, or one
// lock's own options — with what it means to the engine and the quorum
// logic. Locks share it.
type settings struct {
	config
	c           *Client
	quorum      int
	callTimeout time.Duration // the node timeout for the configured TTL
	ttlBox      any           // the TTL in ms, as a script argument, boxed once
	pol         lease.Policy
}

// settings returns the settings of cfg, which is valid for c's nodes.
func (c *Client) settings(cfg config) *settings {
	s := &settings{config: cfg, c: c, quorum: cfg.quorumOf(len(c.nodes)),
		callTimeout: effectiveNodeTimeout(&cfg), ttlBox: strconv.FormatInt(cfg.ttl.Milliseconds(), 10)}
	s.pol = lease.Policy{
		Strategy:   lease.Fresh, // each attempt its own token, undone by itself
		Engine:     &c.eng,
		Pkg:        "redlock",
		TTL:        cfg.ttl,
		Watchdog:   cfg.watchdog,
		Wait:       cfg.wait,
		BackoffMin: cfg.backoffMin,
		BackoffMax: cfg.backoffMax,
		Notify:     cfg.notify,
		Fencing:    cfg.fencing,
		// Every per-node call carries its own deadline (fanout.go).
		Bounded:     false,
		UndoTimeout: releaseTimeout(s.callTimeout),
		Margin:      s.drift,
		Group:       s.group,
		Lost: func(key string, r lease.Reason, err error) error {
			return &lock.LostError{Key: key, Reason: r, Err: err}
		},
		Logger: cfg.logger,
	}
	if o := cfg.observer; o != nil {
		s.pol.Observe = func(e lease.Event) {
			o.Observe(lock.Event{Kind: e.Kind, Key: e.Key, Token: e.Token, Fence: e.Fence,
				Duration: e.Duration, Attempts: e.Attempts, Err: e.Err, Ctx: e.Ctx,
				TTL: e.TTL, Held: e.Held, Validity: e.Validity})
		}
		if co, ok := o.(lock.ContextObserver); ok {
			s.pol.ObserveContext = func(ctx context.Context, e lease.Event) context.Context {
				return co.ObserveContext(ctx, lock.Event{Kind: lock.EventKind(e.Kind), Key: e.Key, Ctx: e.Ctx})
			}
		}
	}
	return s
}

// drift is the clock-drift allowance of a hold of ttl: the margin by which
// its validity ends before the TTL would run out.
func (s *settings) drift(ttl time.Duration) time.Duration { return drift(ttl, s.driftFactor) }

// releaseTimeout bounds a release made on the caller's behalf: a few node
// timeouts, since each node's call is bounded by one.
func releaseTimeout(nodeTimeout time.Duration) time.Duration {
	return max(4*nodeTimeout, time.Second)
}
