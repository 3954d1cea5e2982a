package redlock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// drop deletes token on the nodes in which (every node when nil) with
// release.lua (1 released, 0 gone, -1 someone else's) and counts the
// replies that arrive by deadline, or until ctx is done; a node without one
// counts as failed. The calls do not depend on ctx: a release or an undo
// must happen even when its caller gave up, and what they did is reported.
//
// With acq, the acquire round that sent token, each node's delete is sent
// only once that node's acquire call has returned. Acquire returns at
// quorum, and a failed attempt at its deadline, while a slower acquire may
// still be on its way to the node (go-redis has not given up on it, or a
// stopped node holds it): a delete sent on another connection could
// overtake it, and the acquire would then leave our key there for its
// whole TTL. A node whose acquire is still out gets its delete from the
// goroutine of that call, when the call returns (bounded by its node
// timeout, or go-redis's read timeout on clients without
// ContextTimeoutEnabled; a call that never returns leaves a grant that
// ends with its TTL), and at once when Close begins; it is reported as a
// node timeout unless that happens by deadline. Close waits for every
// delete still out. A call that returned without a reply may still land
// after its delete: that node's delete leaves a tombstone for token, which
// refuses such an acquire for one TTL (see tombstones).
func (l *Lock) drop(ctx context.Context, token string, which []int, acq *round, deadline time.Time) tally {
	c := l.cfg.c
	call := luascripts.NewPrebuilt(luascripts.ReleaseBoxed, true, l.hd.Keys.ReleaseKeys(), token, "0")
	d := c.newRound(context.Background(), call, deadline, l.cfg.callTimeout, which, false)
	l.tombstones(d, token, acq)
	c.handOver(acq, d)
	for i := range d.nodes {
		if nd := &d.nodes[i]; nd.in && !nd.handed {
			d.send(i)
		}
	}
	d.all(ctx)
	return d.tally()
}

// tombstones makes the drop d send undo.lua instead of release.lua to
// each node whose call in acq, the acquire round of token, has not
// returned with the node's reply: that acquire may still be on its way
// (cut at its deadline while its bytes were out, or held by the network or
// a stopped node), and the tombstone undo.lua leaves, for one TTL, refuses
// it should it land after the delete. A node that answered ran the acquire
// already, and needs none; so does one whose call, still out now, returns
// with a reply before its delete is sent (see sendLate).
func (l *Lock) tombstones(d *round, token string, acq *round) {
	for i := range d.nodes {
		if !d.nodes[i].in || acq.answered(i) {
			continue
		}
		if d.undo == nil {
			call := luascripts.NewPrebuilt(luascripts.UndoBoxed, true, l.hd.Keys.UndoKeys(token), token, "0", l.cfg.ttlBox)
			d.undo = &call
		}
		d.nodes[i].undo = true
	}
}

// handOver makes Close wait for the deletes of the drop d, and hands each
// node's delete whose call in acq (if not nil) is still out to that call,
// which sends it when it returns (see round.do). Once Close has begun it
// does neither: d's deletes then go at once.
func (c *Client) handOver(acq, d *round) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	d.tracked = true
	c.dels.Add(d.count)
	if acq == nil {
		return
	}
	for i := range d.nodes {
		a := &acq.nodes[i]
		if !d.nodes[i].in || a.state.Load() != callOut {
			continue
		}
		a.drop = d
		if a.state.CompareAndSwap(callOut, callHanded) {
			d.nodes[i].handed = true
			acq.handed++
			c.handed[acq] = struct{}{}
		}
	}
}

// unhand notes that one delete handed to a call of acq was claimed.
func (c *Client) unhand(acq *round) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if acq.handed--; acq.handed == 0 {
		delete(c.handed, acq)
	}
}

// stopDrops runs as Close begins: it sends at once the deletes handed to
// acquire calls still out, and waits for every delete still out, up to
// lease.BackgroundWait (each is bounded by a node timeout).
func (c *Client) stopDrops() {
	c.mu.Lock()
	c.closing = true
	acqs := make([]*round, 0, len(c.handed))
	for acq := range c.handed {
		acqs = append(acqs, acq)
	}
	c.mu.Unlock()
	for _, acq := range acqs {
		for i := range acq.nodes {
			if nd := &acq.nodes[i]; nd.state.CompareAndSwap(callHanded, callClaimed) {
				c.unhand(acq)
				go nd.drop.sendLate(i, false) // the call is still out
			}
		}
	}
	lease.WaitFor(&c.dels, lease.BackgroundWait)
}

// dropDeadline is how long a release or undo of a hold acquired by acq
// waits for replies: a node timeout, counted from the acquire round's
// deadline while that is still ahead (a straggling acquire has to return
// before its node's delete is sent).
func (l *Lock) dropDeadline(acq *round) time.Time {
	now := time.Now()
	if acq != nil && acq.deadline.After(now) {
		return acq.deadline.Add(l.cfg.callTimeout)
	}
	return now.Add(l.cfg.callTimeout)
}

// tally is what one extend or release round found across the nodes.
type tally struct {
	n      int     // nodes
	ok     int     // nodes that confirmed (extended, released)
	gone   int     // nodes without the key
	stolen int     // nodes holding someone else's token
	errs   []error // by node; nil where the node confirmed (nil while every node did)
	failed int     // nodes that failed or did not answer
}

// add counts one node's reply: the script's code (1 done, 0 gone, -1
// someone else's), or the call's error.
func (t *tally) add(i int, code int64, err error) {
	if err == nil && code == 1 {
		t.ok++
		return
	}
	if t.errs == nil {
		t.errs = make([]error, t.n)
	}
	switch {
	case err != nil:
		t.errs[i] = err
		t.failed++
	case code == 0:
		t.gone++
		t.errs[i] = errNotOurs
	default:
		t.stolen++
		t.errs[i] = errHeldByOther
	}
}

// tally counts the replies all collected from the nodes of r.
func (r *round) tally() tally {
	t := tally{n: len(r.nodes)}
	for i := range r.nodes {
		if r.nodes[i].in {
			v, err := r.result(i)
			t.add(i, v, err)
		}
	}
	return t
}

// lost says how the nodes no longer have our hold: Stolen when one holds
// someone else's token.
func (t *tally) lost() lease.Status {
	if t.stolen > 0 {
		return lease.Stolen
	}
	return lease.Gone
}

// quorumError describes a round that fell short of quorum.
func (t *tally) quorumError(quorum int) *QuorumError {
	errs := t.errs
	if errs == nil {
		errs = make([]error, t.n)
	}
	return &QuorumError{Reached: t.ok, Needed: quorum, Errs: errs}
}

// Release gives the lock up on every node: it stops the hold's renewal,
// then deletes the key wherever it still holds our token, waking waiters.
// It returns nil when at least one node dropped our hold (a node that could
// not be reached keeps its copy until its TTL); an error wrapping
// [lock.ErrNotHeld] when no node held it and a quorum said so, or when the
// handle was never acquired (the hold is then reported lost, if it was not
// already); otherwise an error wrapping the [*QuorumError] of the round;
// [lock.ErrInvalid] for a Lock not made by [Client.NewLock].
//
// The deletes do not end with ctx: Release waits for the replies up to the
// node timeout, even when ctx is already done. Each delete is sent once,
// never resent. Release works after [Client.Close].
func (l *Lock) Release(ctx context.Context) error { return l.handle().Release(ctx, (*kind)(l)) }

// Release deletes h on every node.
func (k *kind) Release(_ context.Context, h *lease.Hold, _ bool) lease.Outcome {
	l := (*Lock)(k)
	acq := l.acq.Load()
	t := l.drop(context.Background(), h.Token(), nil, acq, l.dropDeadline(acq))
	switch {
	case t.ok > 0:
		return lease.Outcome{Status: lease.Confirmed}
	case t.failed == 0 || t.gone+t.stolen >= l.cfg.quorum:
		return lease.Outcome{Status: t.lost()}
	}
	return lease.Outcome{Err: t.quorumError(l.cfg.quorum)}
}

// extendRound resets the TTL of our hold to ttl on every node, each call
// ending by deadline, and counts the replies that arrive by then. settled
// closes once every node's call has returned.
func (l *Lock) extendRound(h *lease.Hold, ttl time.Duration, deadline time.Time) (t tally, settled <-chan struct{}) {
	ttlArg := l.cfg.ttlBox
	if ttl != l.cfg.ttl {
		ttlArg = ttl.Milliseconds()
	}
	c := l.cfg.c
	call := luascripts.NewPrebuilt(luascripts.ExtendBoxed, false, l.hd.Keys.LockKeys(), h.Token(), ttlArg, "0")
	r := c.newRound(context.Background(), call, deadline, l.cfg.callTimeout, nil, true)
	r.sendAll()
	r.all(context.Background())
	return r.tally(), r.settled()
}

// Extend sets the hold's TTL to ttl on every node, counted from now; later
// renewals keep it. It needs a quorum, and recomputes the validity from the
// round's start. A shorter ttl takes effect before the round is sent: a
// failed Extend to it leaves the hold valid only until that earlier end.
// After any failed or unanswered call, the validity never counts on a
// longer TTL than that call's. The round's calls do not end with ctx.
//
// It returns an error wrapping [lock.ErrNotHeld] when too many nodes no
// longer hold our token for a quorum to be possible, or when the validity
// ran out before the round ended (reporting the hold lost either way); the
// round's [*QuorumError] when failing nodes kept the quorum out of reach;
// [lock.ErrInvalid] for a ttl that leaves no validity; or [lock.ErrClosed]
// after Close. See docs/safety.md#the-algorithm-as-implemented and
// docs/safety.md#overlapping-calls-on-one-hold.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	return l.handle().Extend(ctx, (*kind)(l), ttl)
}

// CheckTTL refuses a TTL that leaves no validity on these nodes.
func (k *kind) CheckTTL(ttl time.Duration) error {
	cfg := k.cfg.config
	cfg.ttl = ttl
	return cfg.validate(len(k.cfg.c.nodes))
}

// Extend sends one extend round, bounded by the node timeout for ttl and
// by the hold's validity (already lowered to what ttl gives, if less).
func (k *kind) Extend(_ context.Context, h *lease.Hold, ttl time.Duration) (lease.Outcome, <-chan struct{}) {
	l := (*Lock)(k)
	now := time.Now()
	deadline := now.Add(min(nodeTimeoutFor(l.cfg.nodeTimeout, ttl), l.hd.Left()))
	t, settled := l.extendRound(h, ttl, deadline)
	switch {
	case t.ok >= l.cfg.quorum:
		// Nodes that failed or did not answer may still apply ttl later.
		return lease.Outcome{Status: lease.Confirmed, Unknown: t.failed > 0}, settled
	case t.gone+t.stolen > len(l.cfg.c.nodes)-l.cfg.quorum:
		return lease.Outcome{Status: t.lost()}, settled
	}
	return lease.Outcome{Err: t.quorumError(l.cfg.quorum)}, settled
}
