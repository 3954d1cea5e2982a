package redlock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// result is one node's reply to one call.
type result struct {
	node int
	code int64 // the script's reply, or the first element of acquire's
	val  int64 // acquire: the fence, or the holder's PTTL in ms
	err  error
}

// round is one call sent to several nodes in parallel. Every call shares one
// deadline and replies into ch, which is buffered for every node, so a
// caller that stops reading at quorum leaves no goroutine blocked.
type round struct {
	ch      chan result
	ctx     context.Context // carries the deadline of every call
	cancel  context.CancelFunc
	pending atomic.Int32
	n       int
	ended   []chan struct{} // by node: closed once its call has returned; nil for nodes not called
	done    chan struct{}   // closed once every call has returned
}

// fan sends fn to the nodes listed in which (every node when nil), each on
// its own goroutine (see run), with a deadline. The calls do not end when
// ctx is cancelled: a caller that gives up reads ctx itself and undoes what
// the calls may have done, which needs them to finish rather than
// half-happen.
func (c *Client) fan(ctx context.Context, deadline time.Time, which []int, fn func(ctx context.Context, i int, rdb redis.UniversalClient) result) *round {
	n := len(which)
	if which == nil {
		n = len(c.nodes)
	}
	r := &round{ch: make(chan result, n), n: n, ended: make([]chan struct{}, len(c.nodes)), done: make(chan struct{})}
	r.ctx, r.cancel = context.WithDeadline(context.WithoutCancel(ctx), deadline)
	r.pending.Store(int32(n))
	for k := range n {
		i := k
		if which != nil {
			i = which[k]
		}
		r.ended[i] = make(chan struct{})
		c.run(func() {
			res := fn(r.ctx, i, c.nodes[i])
			res.node = i
			close(r.ended[i])
			last := r.pending.Add(-1) == 0
			if last {
				close(r.done) // before the reply: a caller holding every reply finds it closed
			}
			r.ch <- res
			if last {
				r.cancel() // the last reply frees the deadline's timer
			}
		})
	}
	return r
}

// settled returns a channel closed once every call of the round has
// returned: no write of it can land later.
func (r *round) settled() <-chan struct{} { return r.done }

// callEnded reports whether node i's call has returned (true for a nil
// round or a node it did not call).
func (r *round) callEnded(i int) bool {
	if r == nil || r.ended[i] == nil {
		return true
	}
	select {
	case <-r.ended[i]:
		return true
	default:
		return false
	}
}

// waitCall blocks until node i's call has returned — not merely until the
// round's deadline: a call that go-redis has not given up on may still
// reach the node — or until bound has passed or stop is closed. It
// reports whether the call returned.
func (r *round) waitCall(i int, bound time.Duration, stop <-chan struct{}) bool {
	if r.callEnded(i) {
		return true
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-r.ended[i]:
		return true
	case <-t.C:
	case <-stop:
	}
	return r.callEnded(i)
}

// next returns the next reply, or false once the round's deadline has
// passed or ctx is done. Replies already in hand are returned first.
func (r *round) next(ctx context.Context) (result, bool) {
	select {
	case res := <-r.ch:
		return res, true
	default:
	}
	select {
	case res := <-r.ch:
		return res, true
	case <-r.ctx.Done():
	case <-ctx.Done():
	}
	select {
	case res := <-r.ch:
		return res, true
	default:
	}
	return result{}, false
}

// all collects every reply that arrives by the deadline, or until ctx is
// done, indexed by node; a node that did not answer gets errNodeTimeout, or
// context.Cause(ctx) when ctx ended the wait first.
func (r *round) all(ctx context.Context, nodes int, which []int) []result {
	out := make([]result, nodes)
	got := make([]bool, nodes)
	for range r.n {
		res, ok := r.next(ctx)
		if !ok {
			break
		}
		out[res.node], got[res.node] = res, true
	}
	missing := errNodeTimeout
	if d, _ := r.ctx.Deadline(); ctx.Err() != nil && time.Now().Before(d) {
		missing = context.Cause(ctx) // the wait ended before the deadline
	}
	mark := func(i int) {
		if !got[i] {
			out[i] = result{node: i, err: missing}
		}
	}
	if which == nil {
		for i := range nodes {
			mark(i)
		}
	} else {
		for _, i := range which {
			mark(i)
		}
	}
	return out
}

// workerIdle is how long an idle call goroutine waits for more work.
const workerIdle = time.Second

// run executes task on an idle call goroutine, or a new one. Reusing
// goroutines spares each call a fresh stack that go-redis's deep call path
// would grow, copying, several times.
func (c *Client) run(task func()) {
	select {
	case c.work <- task:
	default:
		go c.worker(task)
	}
}

// worker runs task, then waits for more until idle for workerIdle or the
// Client is closed.
func (c *Client) worker(task func()) {
	task()
	if c.eng.Closed() {
		return
	}
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case task := <-c.work:
			task()
			if c.eng.Closed() {
				return
			}
			t.Reset(workerIdle)
		case <-t.C:
			return
		case <-c.eng.Context().Done():
			return
		}
	}
}
