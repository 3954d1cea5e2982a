package redlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"

	"github.com/agentlock/lock/internal/lockutil"
)

// releaseCall returns the per-node call that drops token (release.lua: 1
// released, 0 gone, -1 someone else's). With acq, the acquire round of the
// hold, a node's release waits until that node's acquire has returned (or
// the round's deadline passed): Acquire returns at quorum, and a release
// that overtook a slower node's acquire on another connection would leave
// our key there until its TTL.
func (l *Lock) releaseCall(token string, acq *round) func(context.Context, int, redis.UniversalClient) result {
	return func(ctx context.Context, i int, rdb redis.UniversalClient) result {
		if acq != nil {
			acq.waitNode(ctx, i)
		}
		v, err := luascripts.Release.Run(ctx, rdb, l.releaseKeys, token, "0").Int64()
		return result{code: v, err: err}
	}
}

// tally is what one extend or release round found across the nodes.
type tally struct {
	ok     int     // nodes that confirmed (extended, released)
	gone   int     // nodes without the key
	stolen int     // nodes holding someone else's token
	errs   []error // by node; nil where the node answered
	failed int     // nodes that failed or did not answer
}

func (l *Lock) count(results []result) tally {
	t := tally{errs: make([]error, len(results))}
	for i, res := range results {
		switch {
		case res.err != nil:
			t.errs[i] = res.err
			t.failed++
		case res.code == 1:
			t.ok++
		case res.code == 0:
			t.gone++
			t.errs[i] = errNotOurs
		default:
			t.stolen++
			t.errs[i] = errHeldByOther
		}
	}
	return t
}

// quorumError describes a round that fell short.
func (l *Lock) quorumError(t tally) *QuorumError {
	return &QuorumError{Reached: t.ok, Needed: l.quorum, Errs: t.errs}
}

// lossReason names why the nodes no longer have our hold.
func (l *Lock) lossReason(t tally, h *hold) lock.LossReason {
	if t.stolen > 0 {
		return lock.LossStolen
	}
	h.mu.Lock()
	sent, ttl := h.sentAt, h.ttl
	h.mu.Unlock()
	if time.Since(sent) >= ttl {
		return lock.LossExpired
	}
	return lock.LossForceReleased
}

// Release gives the lock up on every node: it stops the hold's renewal,
// then deletes the key wherever it still holds our token (publishing on
// the notify channel there, so that waiters try at once). It returns nil
// when at least one node dropped our hold (a node that could not be reached
// keeps its copy until its TTL); an error wrapping [lock.ErrNotHeld] when no
// node held it and a quorum said so, or when the handle was never acquired
// (the hold is then reported lost, if it was not already); otherwise an error
// wrapping the [*QuorumError] of the round. Each call is bounded by the node
// timeout. Release works after [Client.Close].
func (l *Lock) Release(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	h := l.hold()
	if h == nil {
		return fmt.Errorf("redlock: release %q: %w", l.key, lock.ErrNotHeld)
	}
	start := time.Now()
	h.stopRenewal()
	deadline := start.Add(l.nodeTimeout)
	if h.acq != nil {
		if d, _ := h.acq.ctx.Deadline(); d.After(start) {
			deadline = d.Add(l.nodeTimeout) // room for a release after a late acquire
		}
	}
	r := l.c.fan(ctx, deadline, nil, l.releaseCall(h.token, h.acq))
	t := l.count(r.all(ctx, len(l.c.nodes), nil))
	var err error
	switch {
	case t.ok > 0:
	case t.failed == 0 || t.gone+t.stolen >= l.quorum:
		h.markLost(l.lossReason(t, h), nil)
		err = fmt.Errorf("redlock: release %q: %w", l.key, lock.ErrNotHeld)
	default:
		err = fmt.Errorf("redlock: release %q: %w", l.key, l.quorumError(t))
	}
	h.finish()
	l.observe(lock.Event{Kind: lock.EventRelease, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
	return err
}

// extendRound resets the TTL of our hold to ttl on every node, each call
// ending by deadline.
func (l *Lock) extendRound(ctx context.Context, h *hold, ttl time.Duration, deadline time.Time) tally {
	ttlArg := l.ttlArg
	if ttl != l.cfg.ttl {
		ttlArg = strconv.FormatInt(ttl.Milliseconds(), 10)
	}
	r := l.c.fan(ctx, deadline, nil, func(ctx context.Context, _ int, rdb redis.UniversalClient) result {
		v, err := luascripts.Extend.Run(ctx, rdb, l.extendKeys, h.token, ttlArg, "0").Int64()
		return result{code: v, err: err}
	})
	return l.count(r.all(ctx, len(l.c.nodes), nil))
}

// Extend sets the hold's TTL to ttl on every node, counted from now; later
// renewals keep it. It needs a quorum, and recomputes the validity from the
// round's start. It returns an error wrapping [lock.ErrNotHeld] when too many
// nodes no longer hold our token for a quorum to be possible (reporting the
// hold lost), the round's [*QuorumError] when failing nodes kept the quorum
// out of reach (the hold stays valid until its current validity ends),
// [lock.ErrInvalid] for a ttl that leaves no validity, or [lock.ErrClosed]
// after Close.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l.err != nil {
		return l.err
	}
	if l.c.closed.Load() {
		return fmt.Errorf("redlock: extend %q: %w", l.key, lock.ErrClosed)
	}
	cfg := l.cfg
	cfg.ttl = ttl
	if err := cfg.validate(len(l.c.nodes)); err != nil {
		return fmt.Errorf("redlock: extend %q: %w", l.key, err)
	}
	h := l.hold()
	if h == nil || !h.active() {
		return fmt.Errorf("redlock: extend %q: %w", l.key, lock.ErrNotHeld)
	}
	h.op.Lock()
	start := time.Now()
	t := l.extendRound(ctx, h, ttl, lockutil.MinTime(start.Add(l.nodeTimeout), h.deadline()))
	var err error
	switch {
	case t.ok >= l.quorum:
		h.confirmed(start, ttl)
		h.startRenewal() // the new TTL may make renewal due before the starter fires
		select {
		case h.kick <- struct{}{}:
		default:
		}
	case t.gone+t.stolen > len(l.c.nodes)-l.quorum:
		h.markLost(l.lossReason(t, h), nil)
		err = fmt.Errorf("redlock: extend %q: %w", l.key, lock.ErrNotHeld)
	default:
		err = fmt.Errorf("redlock: extend %q: %w", l.key, l.quorumError(t))
	}
	h.op.Unlock()
	l.observe(lock.Event{Kind: lock.EventExtend, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
	return err
}
