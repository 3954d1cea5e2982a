package redlock

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// The states of one node's call in a round (node.state).
const (
	callOut      int32 = iota // sent, not returned yet
	callReturned              // returned (or not part of the round)
	callHanded                // still out, and a drop asked it to send its node's delete when it returns
	callClaimed               // handed, and the delete is sent
)

// node is one node's call in a round.
type node struct {
	cmd   *redis.IntCmd // the command, with its reply once the node's number came on replies
	state atomic.Int32  // callOut, …
	drop  *round        // the drop whose delete the call sends when it returns (callHanded)

	// The reading caller's bookkeeping; the call goroutines never touch it.
	in     bool  // the round calls this node
	undo   bool  // a drop: the node gets round.undo instead of round.call
	handed bool  // a drop: the node's delete was handed to its acquire call
	got    bool  // the node's reply was read
	st     uint8 // Try: what the node said (statePending, …)
	val    int64 // Try: the node's fence, when granted
}

// round is one script call sent to several nodes at once, each node's
// command on a call goroutine of the Client (see run), every command bounded
// by one deadline. The calls do not end when the caller gives up: a caller
// that gives up undoes what they may have done, which needs them to finish
// rather than half-happen. Each call, once returned, puts its node's number
// on replies, which has room for every node, so a caller that stops reading
// at quorum leaves no call blocked. Per-node state is in nodes, not in a
// channel per node.
type round struct {
	c        *Client
	call     luascripts.Prebuilt
	undo     *luascripts.Prebuilt // a drop's call for the nodes marked undo; nil when none is
	ctx      context.Context      // carries the deadline of every call
	cancel   context.CancelFunc
	deadline time.Time
	timeout  time.Duration // the node timeout (see sendLate)
	nodes    []node        // by node
	count    int           // nodes called
	replies  chan int
	pending  atomic.Int32  // calls that have not returned
	done     chan struct{} // closed once every call has returned; nil unless asked for
	tracked  bool          // a drop whose calls Close waits for (Client.dels)
	handed   int           // nodes whose delete a drop handed to this round's calls, unclaimed; under Client.mu
	missing  error         // all: the error of a node without a reply
}

// newRound prepares call to the nodes listed in which (every node when
// nil), each bounded by deadline; ctx passes its values, not its end, to
// the calls. timeout is the node timeout. With settle, settled reports
// when every call has returned. Nothing is sent until send.
func (c *Client) newRound(ctx context.Context, call luascripts.Prebuilt, deadline time.Time, timeout time.Duration, which []int, settle bool) *round {
	r := &round{c: c, call: call, deadline: deadline, timeout: timeout, nodes: make([]node, len(c.nodes))}
	if which == nil {
		r.count = len(c.nodes)
		for i := range r.nodes {
			r.nodes[i].in = true
		}
	} else {
		r.count = len(which)
		for i := range r.nodes {
			r.nodes[i].state.Store(callReturned)
		}
		for _, i := range which {
			r.nodes[i].in = true
			r.nodes[i].state.Store(callOut)
		}
	}
	if ctx != context.Background() {
		ctx = context.WithoutCancel(ctx)
	}
	r.ctx, r.cancel = context.WithDeadline(ctx, deadline)
	r.replies = make(chan int, r.count)
	r.pending.Store(int32(r.count))
	if settle {
		r.done = make(chan struct{})
	}
	return r
}

// send sends node i's call on a call goroutine.
func (r *round) send(i int) { r.c.run(task{r: r, i: i}) }

// sendAll sends the call to every node of the round.
func (r *round) sendAll() {
	for i := range r.nodes {
		if r.nodes[i].in {
			r.send(i)
		}
	}
}

// do makes node i's call on ctx and reports its return; then, if a drop
// handed it that node's delete meanwhile, it sends the delete: only now can
// the delete not overtake the call.
func (r *round) do(ctx context.Context, i int) {
	nd := &r.nodes[i]
	nd.cmd = r.sendTo(ctx, i)
	handed := !nd.state.CompareAndSwap(callOut, callReturned)
	last := r.pending.Add(-1) == 0
	if last && r.done != nil {
		close(r.done) // before the reply: a caller holding every reply finds it closed
	}
	r.replies <- i
	if r.tracked {
		r.c.dels.Done()
	}
	if last {
		r.cancel() // the last reply frees the deadline's timer
	}
	if handed && nd.state.CompareAndSwap(callHanded, callClaimed) { // else Close sent it
		r.c.unhand(r)
		nd.drop.sendLate(i, nd.cmd.Err() == nil)
	}
}

// sendTo sends node i's call and returns it with its reply. A call that
// panics (a go-redis hook, say) fails with an error matching
// lock.ErrPanicked, logged once, like a call that failed: the call
// goroutine goes on serving, and the caller tallies the node as failed.
func (r *round) sendTo(ctx context.Context, i int) (cmd *redis.IntCmd) {
	defer func() {
		if v := recover(); v != nil {
			cmd = redis.NewIntCmd(ctx)
			cmd.SetErr(lease.Recovered(r.c.eng.Logger, "redlock node call", v, slog.Int("node", i)))
		}
	}()
	if r.nodes[i].undo {
		return r.undo.Send(ctx, r.c.nodes[i])
	}
	return r.call.Send(ctx, r.c.nodes[i])
}

// answered reports whether node i's call of r has returned with the node's
// reply: the script ran there, and nothing of the call is still on its way.
// False for a nil r.
func (r *round) answered(i int) bool {
	if r == nil {
		return false
	}
	nd := &r.nodes[i]
	// The call goroutine sets cmd before it marks the call returned.
	return nd.in && nd.state.Load() == callReturned && nd.cmd.Err() == nil
}

// sendLate sends node i's call of the drop d from a goroutine other than
// its caller's, once the acquire call it waited for has returned, or at
// Close: on d's deadline while a node timeout of it is left, else (the call
// returned late) bounded by a node timeout of its own. answered says the
// acquire call returned with the node's reply: nothing of it can land
// later, and the node gets a plain delete, not a tombstone.
func (d *round) sendLate(i int, answered bool) {
	if answered {
		d.nodes[i].undo = false
	}
	if time.Until(d.deadline) >= d.timeout {
		d.do(d.ctx, i)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	d.do(ctx, i)
}

// settled returns a channel closed once every call of the round has
// returned: no write of it can land later. Only for a round made with
// settle.
func (r *round) settled() <-chan struct{} { return r.done }

// next returns the number of the next node to reply, or false once the
// round's deadline has passed or ctx is done. Replies already in hand are
// returned first.
func (r *round) next(ctx context.Context) (int, bool) {
	select {
	case i := <-r.replies:
		return i, true
	default:
	}
	select {
	case i := <-r.replies:
		return i, true
	case <-r.ctx.Done():
	case <-ctx.Done():
	}
	select {
	case i := <-r.replies:
		return i, true
	default:
	}
	return -1, false
}

// all collects every reply that arrives by the deadline, or until ctx is
// done; result then reports each node's.
func (r *round) all(ctx context.Context) {
	for range r.count {
		i, ok := r.next(ctx)
		if !ok {
			break
		}
		r.nodes[i].got = true
	}
	r.missing = errNodeTimeout
	if ctx.Err() != nil && time.Now().Before(r.deadline) {
		r.missing = context.Cause(ctx) // the wait ended before the deadline
	}
}

// result returns node i's reply as all collected it: a node that did not
// answer gets errNodeTimeout, or context.Cause(ctx) when ctx ended the wait
// first.
func (r *round) result(i int) (int64, error) {
	if !r.nodes[i].got {
		return 0, r.missing
	}
	return r.nodes[i].cmd.Result()
}

// task is one job for a call goroutine: node i's call of round r, or fn.
type task struct {
	r  *round
	i  int
	fn func()
}

func (t task) run() {
	if t.fn != nil {
		t.fn()
		return
	}
	t.r.do(t.r.ctx, t.i)
}

// serve runs t; a panic that escapes it is logged and ends t alone, and
// the call goroutine goes on serving (the calls themselves turn a panic
// into their error: see sendTo).
func (c *Client) serve(t task) {
	defer c.eng.Survive("redlock call")
	t.run()
}

// workerIdle is how long an idle call goroutine waits for more work.
const workerIdle = time.Second

// run executes t on an idle call goroutine, or a new one. Reusing
// goroutines spares each call a fresh stack that go-redis's deep call path
// would grow, copying, several times.
func (c *Client) run(t task) {
	select {
	case c.work <- t:
	default:
		go c.worker(t)
	}
}

// worker runs t, then waits for more until idle for workerIdle or the
// Client is closed.
func (c *Client) worker(t task) {
	c.serve(t)
	if c.eng.Closed() {
		return
	}
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		select {
		case t := <-c.work:
			c.serve(t)
			if c.eng.Closed() {
				return
			}
			idle.Reset(workerIdle)
		case <-idle.C:
			return
		case <-c.eng.Context().Done():
			return
		}
	}
}
