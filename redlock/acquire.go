package redlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Node states within one acquire round.
const (
	statePending uint8 = iota // no reply (yet)
	stateGranted              // the node holds our token
	stateHeld                 // the node holds someone else's token
	stateFailed               // the call failed
)

// Try sends one acquire round to every node. It returns at quorum; the
// nodes that have not answered by then finish in the background (their
// grants are ours, covered by renewal and Release). A failed round is undone
// in the background on every node that did not refuse us, including those
// that failed or did not answer, since their call may still have taken
// effect.
func (k *kind) Try(ctx context.Context, token string) lease.Attempt {
	l, s := (*Lock)(k), k.cfg
	c := s.c
	n := len(c.nodes)
	start := time.Now()
	validUntil := start.Add(s.ttl - drift(s.ttl, s.driftFactor))
	fencing, hint := "0", ""
	if s.fencing {
		// A new key's counters restart from this value on every node whose
		// clock agrees with ours within a second: they agree, and the
		// fence needs no raise round (see fence.lua).
		fencing = "1"
		hint = strconv.FormatInt(start.Add(luascripts.FenceHintAhead/2).UnixMicro(), 10)
	}
	r := c.fan(ctx, start.Add(s.callTimeout), nil, func(ctx context.Context, _ int, rdb redis.UniversalClient) result {
		n, err := luascripts.Acquire.Run(ctx, rdb, k.hd.Keys.AcquireKeys(), token, s.ttlArg, "0", fencing, hint).Int64()
		if err != nil {
			return result{err: err}
		}
		ours, fence, left := luascripts.AcquireReply(n)
		if !ours {
			return result{val: left.Milliseconds()} // code 0: held, the holder's PTTL in ms
		}
		return result{code: 1, val: fence}
	})

	states := make([]uint8, n)
	fences := make([]int64, n)
	var errs []error
	var pttl time.Duration
	granted := make([]int, 0, s.quorum)
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
		if len(granted) == s.quorum {
			break
		}
	}

	var failure error
	if len(granted) == s.quorum {
		if s.fencing {
			failure = l.raiseFences(ctx, token, granted, fences, fence, validUntil)
		}
		if failure == nil && !time.Now().Before(validUntil) {
			failure = lease.Chain(lock.ErrNotAcquired, errValidity, fmt.Errorf("after %v", time.Since(start)))
		}
		if failure == nil {
			l.acq.Store(r)
			return lease.Attempt{OK: true, Fence: fence, Sent: start}
		}
	}
	l.cleanup(ctx, token, states, r)
	if failure != nil {
		return lease.Attempt{Err: failure}
	}
	if held > n-s.quorum {
		return lease.Attempt{PTTL: pttl} // others have it: not an error
	}
	qe := &QuorumError{Reached: len(granted), Needed: s.quorum, Errs: make([]error, n)}
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
	return lease.Attempt{PTTL: pttl, Err: qe}
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
	c := l.cfg.c
	c.fenceRaises.Add(1)
	deadline := time.Now().Add(min(l.cfg.callTimeout, time.Until(validUntil)))
	r := c.fan(ctx, deadline, low, func(ctx context.Context, _ int, rdb redis.UniversalClient) result {
		v, err := luascripts.FenceRaise.Run(ctx, rdb, l.hd.Keys.AcquireKeys(), token, fence).Int64()
		return result{code: v, err: err}
	})
	res := r.all(ctx, len(c.nodes), low)
	qe := &QuorumError{Reached: len(granted) - len(low), Needed: l.cfg.quorum, Errs: make([]error, len(c.nodes))}
	for _, i := range low {
		switch {
		case res[i].err != nil:
			qe.Errs[i] = lease.Chain(errFenceRaise, res[i].err)
		case res[i].code != 1:
			qe.Errs[i] = lease.Chain(errFenceRaise, errNotOurs)
		default:
			qe.Reached++
		}
	}
	if qe.Reached >= l.cfg.quorum {
		return nil
	}
	return qe
}

// cleanup undoes a failed attempt: it deletes token on every node that did
// not refuse us, including those that failed or did not answer, since their
// call may still have taken effect. Each node's delete waits for that
// node's acquire call in acq (see drop). The deletes run on a goroutine of
// the Client, whatever ctx does; cleanup waits for their replies (up to a
// node timeout past acq's deadline) only until ctx is done.
func (l *Lock) cleanup(ctx context.Context, token string, states []uint8, acq *round) {
	var which []int
	for i, st := range states {
		if st != stateHeld {
			which = append(which, i)
		}
	}
	if len(which) == 0 {
		return
	}
	done := make(chan struct{})
	undo := func() {
		defer close(done)
		l.drop(token, which, acq, l.dropDeadline(acq))
	}
	if !l.cfg.c.eng.Go(undo) {
		undo() // Close has begun: drop does not wait for straggling acquires
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Undo deletes token on every node, once each node's acquire call has
// returned: the engine refused the hold the round took (its reply came too
// late).
func (k *kind) Undo(_ context.Context, token string) {
	l := (*Lock)(k)
	acq := l.acq.Load()
	l.drop(token, nil, acq, l.dropDeadline(acq))
}

// TryAcquire makes one attempt on every node. It returns (true, nil) when
// the lock is now held, (false, nil) when other holders keep the quorum out
// of reach, and (false, err) otherwise: a [*QuorumError] (matching
// [lock.ErrNotAcquired]) when failed or slow nodes kept the quorum out of
// reach, or an error wrapping [lock.ErrInvalid] (also for a Lock not made
// by [Client.NewLock]) or [lock.ErrClosed].
//
// A failed attempt is undone on every node that may have granted it: each
// node's delete is sent once that node's acquire call has returned, so that
// it cannot overtake an acquire still on its way. TryAcquire waits for the
// deletes up to a node timeout past the attempt's deadline, and never past
// ctx's end: the deletes still outstanding then are sent by a goroutine of
// the Client (a node whose acquire call is still out gets its delete when
// the call returns: at most a TTL later; at once when Close begins, and
// Close waits for it).
func (l *Lock) TryAcquire(ctx context.Context) (bool, error) {
	return l.handle().TryAcquire(ctx, (*kind)(l))
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
// last failed attempt's [*QuorumError] when failing nodes were to blame); or
// [lock.ErrInvalid] or [lock.ErrClosed]. It returns by ctx's deadline and
// the wait timeout, give or take a goroutine's scheduling. Each failed
// attempt is reported to the Observer ([lock.EventAttemptFailed]) and
// logged ([WithLogger]): at debug level, and as a warning at the third
// failure in a row and every tenth after. A failed Acquire leaves no hold
// behind on any reachable node: each failed attempt is undone in the
// background, by a goroutine [Client.Close] waits for. Acquire on a handle
// that is held returns ErrInvalid.
func (l *Lock) Acquire(ctx context.Context) error { return l.handle().Acquire(ctx, (*kind)(l)) }
