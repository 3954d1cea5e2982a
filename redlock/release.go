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

// drop deletes token on the nodes in which (every node when nil) with
// release.lua (1 released, 0 gone, -1 someone else's) and returns the
// replies that arrived by deadline, by node; a node without one gets
// errNodeTimeout. The calls do not depend on any caller's ctx: a release or
// an undo must happen even when its caller gave up, and what they did is
// reported.
//
// With acq, the acquire round that sent token, each node's delete is sent
// only once that node's acquire call has returned. Acquire returns at
// quorum, and a failed attempt at its deadline, while a slower acquire may
// still be on its way to the node (go-redis has not given up on it, or a
// stopped node holds it): a delete sent on another connection could
// overtake it, and the acquire would then leave our key there for its
// whole TTL. A node whose acquire is still out gets its delete from a
// goroutine of the Client when the acquire returns — at most a TTL later,
// and at once when Close begins — and is reported as a node timeout unless
// that happens by deadline.
func (l *Lock) drop(token string, which []int, acq *round, deadline time.Time) []result {
	c := l.c
	n := len(c.nodes)
	if which == nil {
		which = make([]int, n)
		for i := range which {
			which[i] = i
		}
	}
	ch := make(chan result, len(which)) // late replies never block
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel() // by then every call on ctx has replied or passed deadline
	call := func(ctx context.Context, i int) {
		v, err := luascripts.Release.Run(ctx, c.nodes[i], l.k.ReleaseKeys(), token, "0").Int64()
		ch <- result{node: i, code: v, err: err}
	}
	for _, i := range which {
		if acq.callEnded(i) {
			c.run(func() { call(ctx, i) })
			continue
		}
		later := func() {
			acq.waitCall(i, l.cfg.ttl, c.ctx.Done())
			ctx, cancel := context.WithTimeout(context.Background(), l.nodeTimeout)
			defer cancel()
			// The call runs on a call goroutine and this one, which Close
			// waits for, stops waiting at the node timeout: a client
			// without ContextTimeoutEnabled may not end the call by then.
			sent := make(chan struct{})
			c.run(func() {
				call(ctx, i)
				close(sent)
			})
			select {
			case <-sent:
			case <-ctx.Done():
			}
		}
		if !c.goBackground(later) {
			c.run(later) // Close has begun: later does not wait
		}
	}

	out := make([]result, n)
	got := make([]bool, n)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
collect:
	for range which {
		select {
		case res := <-ch:
			out[res.node], got[res.node] = res, true
		case <-t.C:
			break collect
		}
	}
	for _, i := range which {
		if !got[i] {
			out[i] = result{node: i, err: errNodeTimeout}
		}
	}
	return out
}

// dropDeadline is how long a release or undo of a hold acquired by acq
// waits for replies: a node timeout, counted from the acquire round's
// deadline while that is still ahead (a straggling acquire has to return
// before its node's delete is sent).
func (l *Lock) dropDeadline(acq *round) time.Time {
	now := time.Now()
	if acq != nil {
		if d, _ := acq.ctx.Deadline(); d.After(now) {
			return d.Add(l.nodeTimeout)
		}
	}
	return now.Add(l.nodeTimeout)
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
// wrapping the [*QuorumError] of the round; [lock.ErrInvalid] for a Lock not
// made by [Client.NewLock].
//
// The deletes do not end with ctx: Release sends them, and waits for the
// replies up to the node timeout, even when ctx is already done, and
// reports what the nodes did. A node whose acquire call of this hold has
// not returned yet gets its delete when it does (see [Lock.TryAcquire]).
// Release works after [Client.Close].
func (l *Lock) Release(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	h := l.hold()
	if h == nil {
		return fmt.Errorf("redlock: release %q: %w", l.key, lock.ErrNotHeld)
	}
	start := time.Now()
	h.stopRenewal()
	t := l.count(l.drop(h.token, nil, h.acq, l.dropDeadline(h.acq)))
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
// ending by deadline, and counts the replies that arrive by then or until
// ctx is done.
func (l *Lock) extendRound(ctx context.Context, h *hold, ttl time.Duration, deadline time.Time) tally {
	ttlArg := l.ttlArg
	if ttl != l.cfg.ttl {
		ttlArg = strconv.FormatInt(ttl.Milliseconds(), 10)
	}
	r := l.c.fan(ctx, deadline, nil, func(ctx context.Context, _ int, rdb redis.UniversalClient) result {
		v, err := luascripts.Extend.Run(ctx, rdb, l.k.LockKeys(), h.token, ttlArg, "0").Int64()
		return result{code: v, err: err}
	})
	return l.count(r.all(ctx, len(l.c.nodes), nil))
}

// Extend sets the hold's TTL to ttl on every node, counted from now; later
// renewals keep it. It needs a quorum, and recomputes the validity from the
// round's start. It returns an error wrapping [lock.ErrNotHeld] when too many
// nodes no longer hold our token for a quorum to be possible, or when the
// validity ran out before the round ended (reporting the hold lost either
// way); the round's [*QuorumError] when failing nodes kept the quorum out of
// reach; [lock.ErrInvalid] for a ttl that leaves no validity; or
// [lock.ErrClosed] after Close.
//
// A shorter TTL takes effect before the round is sent, whatever its
// outcome: the validity drops at once to what ttl gives from now (if that is
// less), and renewals use ttl. Nodes that answered late, or not at all, may
// have applied it; so a failed Extend to a shorter TTL leaves the hold
// valid only until that earlier end, and [Lock.Lost] closes then unless a
// renewal is confirmed first. A failed Extend to a longer TTL changes
// nothing. The round's calls are bounded by the node timeout for ttl (at
// most ttl/10) and by the validity; they do not end with ctx, and Extend
// waits for their replies, also when ctx is already done, and reports what
// the nodes did.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.check(); err != nil {
		return err
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
	validUntil := start.Add(ttl - drift(ttl, cfg.driftFactor))
	if h.shorten(validUntil, ttl) {
		h.moved() // Lost must close by the lower validity, whatever the round does
	}
	deadline := lockutil.MinTime(start.Add(effectiveNodeTimeout(&cfg)), h.deadline())
	t := l.extendRound(context.Background(), h, ttl, deadline)
	var err error
	switch {
	case t.ok >= l.quorum && time.Now().Before(validUntil):
		h.confirmed(start, ttl)
		h.moved()
	case t.ok >= l.quorum:
		h.markLost(lock.LossExpired, errValidity)
		err = fmt.Errorf("redlock: extend %q: %w: %w", l.key, lock.ErrNotHeld, errValidity)
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
