package lock

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
)

// coalescer sends the one-shot script calls of a Client (acquire, release,
// extend, TTL, handoff). While fewer than limit sends are out, a call goes
// at once, on its own, exactly as go-redis would send it. Calls that arrive
// while limit sends are out wait in a queue, and when a send comes back the
// whole queue goes out together as one pipeline, led by the first caller in
// it. A lone caller never waits; under load many calls share one round trip
// and one write and one read on each side, which is where a server and a
// client spend most of their time on calls this small.
//
// A queued call whose ctx ends before it is sent leaves the queue with
// ctx's error. A call that rides a shared pipeline and may leave (acquire,
// release, TTL) returns at the end of its own ctx too, with an error that
// says it was sent and its outcome is unknown, while the pipeline finishes
// in the background: the pipeline runs without any one caller's
// cancellation, and go-redis would otherwise hold each rider until the
// shared reply or its ReadTimeout. Extend and handoff wait for their reply:
// the renewal loop and a waiter rely on knowing when such a write can no
// longer land. A call sent alone waits for its reply like any go-redis
// call (a cancelled ctx stops it only with ContextTimeoutEnabled). The
// verbs return by their deadline all the same: a coalescing lock's calls
// run bounded (lease.Policy.Bounded, see keepsDeadlines), so such a wait
// is on a goroutine of the engine's.
//
// go-redis resends a pipeline whole after a connection error, calls whose
// replies had arrived included, unless one of its commands forbids it (see
// luascripts.OnceCmd). A pipeline carrying a release or handoff is therefore sent once:
// when its connection breaks, every call in it gets the error, and each
// caller treats its outcome as unknown, as for a call sent alone.
type coalescer struct {
	rdb   scripter
	limit int          // sends out at once before calls queue up
	lg    *slog.Logger // the Client's: a pipeline that panics in the background is logged

	mu    sync.Mutex
	out   int       // sends out: single calls and pipelines
	queue []*queued // calls waiting for a send to come back
	spare []*queued // an emptied queue, kept for its capacity
}

// queued is one call waiting in the queue. ready receives the batch this
// call leads (queue order, itself first), or nil once another leader has
// sent it and its reply is in.
type queued struct {
	cmd   redis.Cmder
	ready chan []*queued
}

// maxBatch caps a pipeline: the rest of a longer queue goes in the next.
const maxBatch = 256

func newCoalescer(rdb scripter, lg *slog.Logger) *coalescer {
	return &coalescer{rdb: rdb, limit: max(2, runtime.GOMAXPROCS(0)), lg: lg}
}

var queuedPool = sync.Pool{New: func() any { return &queued{ready: make(chan []*queued, 1)} }}

// do sends cmd and returns nil once cmd holds its reply (or error). When
// ctx ends first it returns an error instead and leaves cmd alone: an
// unsentError if cmd was still queued (it is never sent), or, if leave is
// set and cmd is in a pipeline, an unansweredError, whose settled channel
// closes when that pipeline is done (cmd then holds a reply nobody reads).
// Without leave, a call in a pipeline sees it through.
func (c *coalescer) do(ctx context.Context, cmd redis.Cmder, leave bool) error {
	c.mu.Lock()
	if c.out < c.limit {
		c.out++
		c.mu.Unlock()
		c.direct(ctx, cmd)
		return nil
	}
	q := queuedPool.Get().(*queued)
	q.cmd = cmd
	c.queue = append(c.queue, q)
	c.mu.Unlock()

	var batch []*queued
	select {
	case batch = <-q.ready:
	case <-ctx.Done():
		c.mu.Lock()
		if i := slices.Index(c.queue, q); i >= 0 {
			c.queue = slices.Delete(c.queue, i, i+1)
			c.mu.Unlock()
			c.put(q)
			return unsentError{context.Cause(ctx)}
		}
		c.mu.Unlock()
		// Taken into a batch: its leader sends it, or we are that leader
		// and are about to be handed it.
		if leave {
			settled := make(chan struct{})
			go func() {
				defer close(settled)
				if batch := <-q.ready; batch != nil {
					c.sendBackground(ctx, batch) // lead it: the others ride on it
				}
				c.put(q)
			}()
			return unansweredError{cause: context.Cause(ctx), settled: settled}
		}
		batch = <-q.ready
	}
	if batch == nil { // another leader sent it, and the reply is in
		c.put(q)
		return nil
	}
	if !leave || ctx.Done() == nil {
		c.send(ctx, batch)
		c.put(q)
		return nil
	}
	// We lead, and may leave before the reply: the pipeline runs in the
	// background so that the calls riding on it get theirs.
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		c.sendBackground(ctx, batch)
	}()
	select {
	case <-settled:
		c.put(q)
		return nil
	case <-ctx.Done():
		return unansweredError{cause: context.Cause(ctx), settled: settled}
	}
}

// direct sends cmd on its own, in a send slot taken for it, and passes the
// slot on even if the client panics (a user's hook, say): the panic goes on
// to the caller, and the slot is not lost with it.
func (c *coalescer) direct(ctx context.Context, cmd redis.Cmder) {
	defer c.next()
	_ = c.rdb.Process(ctx, cmd) // the error is in cmd
}

// errPipelinePanicked is the error of the calls that rode a shared
// pipeline whose client panicked; the panic itself goes to its leader.
// It matches [ErrPanicked].
var errPipelinePanicked error = pipelinePanicked{}

type pipelinePanicked struct{}

func (pipelinePanicked) Error() string {
	return "lock: the go-redis client panicked while sending a shared pipeline"
}
func (pipelinePanicked) Unwrap() error { return ErrPanicked }

// unsentError is the error of a call that left the queue unsent: Redis
// never saw it, so there is nothing to undo.
type unsentError struct{ cause error }

func (e unsentError) Error() string { return "lock: call not sent: " + e.cause.Error() }
func (e unsentError) Unwrap() error { return e.cause }

// sent reports whether a call that failed with err may have reached Redis.
func sent(err error) bool {
	var u unsentError
	return !errors.As(err, &u)
}

func (c *coalescer) put(q *queued) {
	q.cmd = nil
	queuedPool.Put(q)
}

// send pipelines batch, wakes its followers and passes the send slot on.
// The pipeline runs without the leader's cancellation: the followers'
// calls ride on it.
// If the client panics (a user's hook, say), every call of batch gets
// errPipelinePanicked, the followers are woken all the same and the slot is
// passed on; the panic goes on to the leader's caller.
func (c *coalescer) send(ctx context.Context, batch []*queued) {
	done := false
	defer func() {
		if !done {
			for _, q := range batch {
				q.cmd.SetErr(errPipelinePanicked)
			}
		}
		for _, q := range batch[1:] {
			q.ready <- nil
		}
		c.mu.Lock()
		c.spare = batch[:0]
		c.mu.Unlock()
		c.next()
	}()
	ctx = context.WithoutCancel(ctx)
	pipe := c.rdb.Pipeline()
	for _, q := range batch {
		_ = pipe.Process(ctx, q.cmd)
	}
	_, _ = pipe.Exec(ctx) // every command carries its own reply or error
	done = true
}

// sendBackground is send for a pipeline led from a goroutine of the
// coalescer's, whose leader has left or may leave: there is no caller for
// a panic of the client to go on to, so it is recovered and logged once
// send has given every call of batch errPipelinePanicked and passed the
// slot on.
func (c *coalescer) sendBackground(ctx context.Context, batch []*queued) {
	defer func() {
		if v := recover(); v != nil {
			lease.Recovered(c.lg, "shared pipeline", v)
		}
	}()
	c.send(ctx, batch)
}

// next ends one send. When calls are queued, the slot goes straight to the
// first of them, which leads the queue (up to maxBatch calls) as the next
// send; otherwise it is freed.
func (c *coalescer) next() {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.out--
		c.mu.Unlock()
		return
	}
	batch := c.queue
	if len(batch) > maxBatch {
		batch = batch[:maxBatch:maxBatch]
		c.queue = append(c.spare, c.queue[maxBatch:]...)
	} else {
		c.queue = c.spare
	}
	c.spare = nil
	c.mu.Unlock()
	batch[0].ready <- batch
}
