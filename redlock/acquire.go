package redlock

import (
	"context"
	"fmt"
	"time"

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
	// The attempt's tombstone refuses it on a node where its undo came
	// first (see Lock.drop).
	call := luascripts.NewPrebuilt(luascripts.AcquireBoxed, false, k.hd.Keys.TombstoneAcquireKeys(token), token, s.ttlBox, "0", flag(s.fencing))
	r := c.newRound(ctx, call, start.Add(s.callTimeout), s.callTimeout, nil, false)
	r.sendAll()
	t := r.tallyAcquire(ctx, s.quorum)

	var failure error
	if t.granted == s.quorum {
		if failure = l.confirm(ctx, token, r, t.fence, start, validUntil); failure == nil {
			l.acq.Store(r)
			return lease.Attempt{OK: true, Fence: t.fence, Sent: start}
		}
	}
	l.cleanup(ctx, token, r)
	if failure != nil {
		return lease.Attempt{Err: failure}
	}
	if t.held > n-s.quorum {
		return lease.Attempt{PTTL: t.pttl} // others have it: not an error
	}
	return lease.Attempt{PTTL: t.pttl, Err: r.quorumError(ctx, t.granted, s.quorum)}
}

// acquireTally is what the replies of an acquire round said, up to quorum.
type acquireTally struct {
	granted, held int           // nodes that hold our token, someone else's
	fence         int64         // the highest fence a granting node returned
	pttl          time.Duration // the shortest TTL left on a node held by another; 0 if none
}

// tallyAcquire reads the replies of r, an acquire round, as they come,
// until quorum nodes granted it or no more replies come, marking each
// node's state.
func (r *round) tallyAcquire(ctx context.Context, quorum int) (t acquireTally) {
	for range len(r.nodes) {
		i, ok := r.next(ctx)
		if !ok {
			break
		}
		nd := &r.nodes[i]
		v, err := nd.cmd.Result()
		if err != nil {
			nd.st = stateFailed
			continue
		}
		ours, f, left := luascripts.AcquireReply(v)
		if !ours {
			nd.st = stateHeld
			t.held++
			if t.pttl == 0 || left < t.pttl {
				t.pttl = left
			}
			continue
		}
		nd.st, nd.val = stateGranted, f
		t.fence = max(t.fence, f)
		if t.granted++; t.granted == quorum {
			break
		}
	}
	return t
}

// confirm makes a quorum's grant of acq, sent at start, a hold: it raises
// the fences of the granting nodes to fence, and refuses a hold whose
// validity ran out meanwhile.
func (l *Lock) confirm(ctx context.Context, token string, acq *round, fence int64, start, validUntil time.Time) error {
	if l.cfg.fencing {
		if err := l.raiseFences(ctx, token, acq, fence, validUntil); err != nil {
			return err
		}
	}
	if !time.Now().Before(validUntil) {
		return lease.Chain(lock.ErrNotAcquired, errValidity, fmt.Errorf("after %v", time.Since(start)))
	}
	return nil
}

// quorumError reports, node by node, why r, an acquire round, reached
// granted of the needed nodes.
func (r *round) quorumError(ctx context.Context, granted, needed int) *QuorumError {
	qe := &QuorumError{Reached: granted, Needed: needed, Errs: make([]error, len(r.nodes))}
	for i := range r.nodes {
		switch nd := &r.nodes[i]; nd.st {
		case stateHeld:
			qe.Errs[i] = errHeldByOther
		case stateFailed:
			qe.Errs[i] = nd.cmd.Err()
		case statePending:
			qe.Errs[i] = errNodeTimeout
			if ctx.Err() != nil {
				qe.Errs[i] = context.Cause(ctx)
			}
		}
	}
	return qe
}

// flag is a script's boolean argument: "1" or "0".
func flag(b bool) any {
	if b {
		return "1"
	}
	return "0"
}

// raiseFences makes sure a quorum of nodes holds a counter >= fence before
// the fence is handed out. The granted nodes of acq took the lock; each
// returned its counter (its val) after incrementing it, and fence is their
// maximum.
// Nodes whose counter is lower are raised to fence (fence_raise.lua, which
// requires our token to still be there), costing one more round trip only
// when the counters disagree. The next holder's quorum shares a node with
// this one, whose counter it increments past fence.
func (l *Lock) raiseFences(ctx context.Context, token string, acq *round, fence int64, validUntil time.Time) error {
	var low []int
	granted := 0
	for i := range acq.nodes {
		if nd := &acq.nodes[i]; nd.st == stateGranted {
			granted++
			if nd.val < fence {
				low = append(low, i)
			}
		}
	}
	if len(low) == 0 {
		return nil
	}
	c := l.cfg.c
	c.fenceRaises.Add(1)
	deadline := time.Now().Add(min(l.cfg.callTimeout, time.Until(validUntil)))
	call := luascripts.NewPrebuilt(luascripts.FenceRaiseBoxed, false, l.hd.Keys.AcquireKeys(), token, fence)
	r := c.newRound(ctx, call, deadline, l.cfg.callTimeout, low, false)
	r.sendAll()
	r.all(ctx)
	qe := &QuorumError{Reached: granted - len(low), Needed: l.cfg.quorum, Errs: make([]error, len(c.nodes))}
	for _, i := range low {
		switch v, err := r.result(i); {
		case err != nil:
			qe.Errs[i] = lease.Chain(errFenceRaise, err)
		case v != 1:
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
// node's acquire call in acq (see drop), and Close waits for the deletes;
// cleanup waits for their replies (up to a node timeout past acq's
// deadline) only until ctx is done.
func (l *Lock) cleanup(ctx context.Context, token string, acq *round) {
	var which []int
	for i := range acq.nodes {
		if acq.nodes[i].st != stateHeld {
			which = append(which, i)
		}
	}
	if len(which) > 0 {
		l.drop(ctx, token, which, acq, l.dropDeadline(acq))
	}
}

// Undo deletes token on every node, once each node's acquire call has
// returned: the engine refused the hold the round took (its reply came too
// late).
func (k *kind) Undo(_ context.Context, token string) {
	l := (*Lock)(k)
	acq := l.acq.Load()
	l.drop(context.Background(), token, nil, acq, l.dropDeadline(acq))
}

// TryAcquire makes one attempt on every node. It returns (true, nil) when
// the lock is now held, (false, nil) when other holders keep the quorum out
// of reach, and (false, err) otherwise: a [*QuorumError] (matching
// [lock.ErrNotAcquired]) when failed or slow nodes kept the quorum out of
// reach, or an error wrapping [lock.ErrInvalid] (also for a Lock not made
// by [Client.NewLock]) or [lock.ErrClosed].
//
// A failed attempt is undone on every node that may have granted it, each
// node's delete sent only once that node's acquire call has returned.
// TryAcquire waits for the deletes up to a node timeout past the attempt's
// deadline, never past ctx's end; the rest are sent in the background, and
// [Client.Close] waits for them. See docs/safety.md#the-algorithm-as-implemented.
func (l *Lock) TryAcquire(ctx context.Context) (bool, error) {
	return l.handle().TryAcquire(ctx, (*kind)(l))
}

// Acquire waits until the lock is held on a quorum of nodes, ctx is done, or
// the wait timeout ([WithWaitTimeout]) passes, sleeping between attempts with
// backoff ([WithBackoff]) and waking when any node publishes a release
// ([WithNotify]). Each attempt carries a fresh random token, the same on
// every node, so a late undo cannot delete a later attempt's grant;
// [Lock.Token] is the token of the attempt that won.
//
// It returns nil when held; an error wrapping [lock.ErrNotAcquired] when the
// wait ended (also matching context.Cause(ctx) when ctx ended it, and the
// last failed attempt's [*QuorumError] when failing nodes were to blame); or
// [lock.ErrInvalid] (also for a handle already held) or [lock.ErrClosed]. It
// returns by ctx's deadline and the wait timeout. Failed attempts go to the
// Observer ([lock.EventAttemptFailed]) and the log ([WithLogger]), and are
// undone in the background, by a goroutine [Client.Close] waits for.
func (l *Lock) Acquire(ctx context.Context) error { return l.handle().Acquire(ctx, (*kind)(l)) }
