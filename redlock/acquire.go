package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"

	"github.com/agentlock/lock/internal/lockutil"
)

// Node states within one acquire round.
const (
	statePending uint8 = iota // no reply (yet)
	stateGranted              // the node holds our token
	stateHeld                 // the node holds someone else's token
	stateFailed               // the call failed
)

// outcome is what one acquire attempt came to.
type outcome struct {
	h    *hold         // the new hold, when acquired
	pttl time.Duration // the shortest TTL left among other holders' nodes
	err  error         // nil when others hold the lock; else why the quorum failed
}

// attempt sends one acquire round to every node. It returns at quorum; the
// nodes that have not answered by then finish in the background (their
// grants are ours, covered by renewal and Release). A failed round is undone
// on every node that did not refuse us, including those that failed or did
// not answer, since their call may still have taken effect.
func (l *Lock) attempt(ctx context.Context, token string) outcome {
	c := l.c
	n := len(c.nodes)
	start := time.Now()
	validUntil := start.Add(l.cfg.ttl - drift(l.cfg.ttl, l.cfg.driftFactor))
	fencing := "0"
	if l.cfg.fencing {
		fencing = "1"
	}
	r := c.fan(ctx, start.Add(l.nodeTimeout), nil, func(ctx context.Context, _ int, rdb redis.UniversalClient) result {
		v, err := luascripts.Acquire.Run(ctx, rdb, l.k.AcquireKeys(), token, l.ttlArg, "0", fencing).Int64Slice()
		if err != nil {
			return result{err: err}
		}
		if len(v) != 2 {
			return result{err: fmt.Errorf("redlock: unexpected acquire reply %v", v)}
		}
		return result{code: v[0], val: v[1]}
	})

	states := make([]uint8, n)
	fences := make([]int64, n)
	var errs []error
	var pttl time.Duration
	granted := make([]int, 0, l.quorum)
	var fence int64
	held := 0
	for range n {
		res, ok := r.next(ctx)
		if !ok {
			break
		}
		switch {
		case res.err != nil:
			states[res.node] = stateFailed
			if errs == nil {
				errs = make([]error, n)
			}
			errs[res.node] = res.err
		case res.code == 0:
			states[res.node] = stateHeld
			held++
			if d := time.Duration(res.val) * time.Millisecond; pttl == 0 || d < pttl {
				pttl = d
			}
		default:
			states[res.node] = stateGranted
			granted = append(granted, res.node)
			fences[res.node] = res.val
			fence = max(fence, res.val)
		}
		if len(granted) == l.quorum {
			break
		}
	}

	var failure error
	if len(granted) == l.quorum {
		if l.cfg.fencing {
			failure = l.raiseFences(ctx, token, granted, fences, fence, validUntil)
		}
		if failure == nil && !time.Now().Before(validUntil) {
			failure = fmt.Errorf("%w: %w after %v", lock.ErrNotAcquired, errValidity, time.Since(start))
		}
		if failure == nil {
			h := newHold(l, token, fence, start, validUntil)
			h.acq = r
			l.install(h)
			return outcome{h: h}
		}
	}
	l.cleanup(token, states, r)
	if failure != nil {
		return outcome{err: failure}
	}
	if held > n-l.quorum {
		return outcome{pttl: pttl} // others have it: not an error
	}
	qe := &QuorumError{Reached: len(granted), Needed: l.quorum, Errs: make([]error, n)}
	for i, st := range states {
		switch st {
		case stateHeld:
			qe.Errs[i] = errHeldByOther
		case stateFailed:
			qe.Errs[i] = errs[i]
		case statePending:
			qe.Errs[i] = errNodeTimeout
			if ctx.Err() != nil {
				qe.Errs[i] = context.Cause(ctx)
			}
		}
	}
	return outcome{pttl: pttl, err: qe}
}

// raiseFences makes sure a quorum of nodes holds a counter >= fence before
// the fence is handed out. granted is the quorum that took the lock; each
// returned its counter (fences, by node) after incrementing it, and fence
// is their maximum.
// Nodes whose counter is lower are raised to fence (fence_raise.lua, which
// requires our token to still be there), costing one more round trip only
// when the counters disagree. The next holder's quorum shares a node with
// this one, whose counter it increments past fence.
func (l *Lock) raiseFences(ctx context.Context, token string, granted []int, fences []int64, fence int64, validUntil time.Time) error {
	var low []int
	for _, i := range granted {
		if fences[i] < fence {
			low = append(low, i)
		}
	}
	if len(low) == 0 {
		return nil
	}
	l.c.fenceRaises.Add(1)
	deadline := lockutil.MinTime(time.Now().Add(l.nodeTimeout), validUntil)
	r := l.c.fan(ctx, deadline, low, func(ctx context.Context, _ int, rdb redis.UniversalClient) result {
		v, err := luascripts.FenceRaise.Run(ctx, rdb, l.k.AcquireKeys(), token, fence).Int64()
		return result{code: v, err: err}
	})
	res := r.all(ctx, len(l.c.nodes), low)
	qe := &QuorumError{Reached: len(granted) - len(low), Needed: l.quorum, Errs: make([]error, len(l.c.nodes))}
	for _, i := range low {
		switch {
		case res[i].err != nil:
			qe.Errs[i] = fmt.Errorf("fence raise: %w", res[i].err)
		case res[i].code != 1:
			qe.Errs[i] = fmt.Errorf("fence raise: %w", errNotOurs)
		default:
			qe.Reached++
		}
	}
	if qe.Reached >= l.quorum {
		return nil
	}
	return qe
}

// cleanup undoes a failed attempt: it deletes token on every node that did
// not refuse us, including those that failed or did not answer, since their
// call may still have taken effect. Each node's delete waits for that
// node's acquire call in acq (see drop); cleanup waits for the replies up to
// a node timeout past acq's deadline, and the deletes run on even when the
// caller's ctx is done.
func (l *Lock) cleanup(token string, states []uint8, acq *round) {
	var which []int
	for i, st := range states {
		if st != stateHeld {
			which = append(which, i)
		}
	}
	if len(which) == 0 {
		return
	}
	l.drop(token, which, acq, l.dropDeadline(acq))
}

// Acquire waits until the lock is held on a quorum of nodes, ctx is done, or
// the wait timeout ([WithWaitTimeout]) passes. Between attempts it sleeps
// with jittered exponential backoff ([WithBackoff]), never past the
// holders' shortest remaining TTL, and wakes at once when any node publishes
// a release ([WithNotify]). Each attempt carries a fresh random token, the
// same on every node; [Lock.Token] is the token of the attempt that won.
// (The core lock reuses one token across the attempts of an Acquire; here a
// late undo of a failed attempt must not delete a later attempt's grant.)
//
// It returns nil when held; an error wrapping [lock.ErrNotAcquired] when the
// wait ended (also matching context.Cause(ctx) when ctx ended it, and the
// last attempt's [*QuorumError] when failing nodes were to blame); or
// [lock.ErrInvalid] or [lock.ErrClosed]. A failed Acquire leaves no hold
// behind on any reachable node. Acquire on a handle that is held returns
// ErrInvalid.
func (l *Lock) Acquire(ctx context.Context) error {
	if err := l.begin(); err != nil {
		return err
	}
	defer l.done()
	start := time.Now()
	l.observe(lock.Event{Kind: lock.EventAcquireStart})
	attempts, h, token, err := l.wait(ctx)
	if err != nil {
		l.observe(lock.Event{Kind: lock.EventAcquire, Token: token, Duration: time.Since(start), Attempts: attempts, Err: err})
		return err
	}
	l.observe(lock.Event{Kind: lock.EventAcquire, Token: token, Fence: h.fence, Duration: time.Since(start), Attempts: attempts})
	return nil
}

// wait is Acquire's loop. It returns the token of the last attempt.
func (l *Lock) wait(ctx context.Context) (attempts int, h *hold, token string, err error) {
	wctx := ctx
	if l.cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, l.cfg.wait, errWaitTimeout)
		defer cancel()
	}
	var w *waiter
	defer func() { w.leave() }()
	var lastErr error
	var timer *time.Timer
	for n := 0; ; n++ {
		if l.c.closed.Load() {
			return attempts, nil, token, fmt.Errorf("redlock: acquire %q: %w", l.key, lock.ErrClosed)
		}
		// A fresh token per attempt: the undo of an earlier attempt may
		// still be on its way to a node, and it must not delete what this
		// attempt wins there.
		if token, err = newToken(l.key); err != nil {
			return attempts, nil, token, err
		}
		attempts++
		o := l.attempt(wctx, token)
		if o.h != nil {
			return attempts, o.h, token, nil
		}
		lastErr = o.err
		if wctx.Err() != nil {
			break
		}
		if w == nil && l.cfg.notify {
			w = l.c.notifier.join(l.k.Notify())
		}
		d := l.backoff(n)
		if o.pttl > 0 && o.pttl < d {
			d = o.pttl
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-w.wake():
		case <-timer.C:
		case <-wctx.Done():
		case <-l.c.ctx.Done():
		}
		if wctx.Err() != nil {
			break
		}
	}
	var why error
	if cause := context.Cause(wctx); errors.Is(cause, errWaitTimeout) && ctx.Err() == nil {
		why = fmt.Errorf("%w after %v", lock.ErrNotAcquired, l.cfg.wait)
	} else {
		why = fmt.Errorf("%w: %w", lock.ErrNotAcquired, context.Cause(ctx))
	}
	if lastErr != nil {
		return attempts, nil, token, fmt.Errorf("redlock: acquire %q: %w (last attempt: %w)", l.key, why, lastErr)
	}
	return attempts, nil, token, fmt.Errorf("redlock: acquire %q: %w", l.key, why)
}

// backoff returns the n-th sleep: uniform in [min, min(max, min·2^n)].
func (l *Lock) backoff(n int) time.Duration {
	return lockutil.Backoff(l.cfg.backoffMin, l.cfg.backoffMax, n)
}
