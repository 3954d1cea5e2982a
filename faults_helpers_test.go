package lock_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// dropReplies is a go-redis hook that lets the first drop script calls
// (EVAL or EVALSHA) that succeed reach Redis, then reports them failed as a
// lost reply would.
type dropReplies struct {
	drop    int32
	dropped atomic.Int32
}

func (h *dropReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *dropReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		name := strings.ToLower(cmd.Name())
		if err == nil && (name == "eval" || name == "evalsha") && h.dropped.Load() < h.drop {
			h.dropped.Add(1)
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func (h *dropReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// roundTrips is a go-redis hook counting round trips: one per command sent
// alone, one per pipeline (or MULTI/EXEC block).
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// failReleases is a go-redis hook that, once armed, fails the next release
// script call (KEYS[2] is the notify channel) before it is written: Redis
// never sees it, as when a connection breaks under a write.
type failReleases struct{ armed atomic.Bool }

func (h *failReleases) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failReleases) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name, args := strings.ToLower(cmd.Name()), cmd.Args()
		if (name == "eval" || name == "evalsha") && len(args) > 4 &&
			strings.HasSuffix(fmt.Sprint(args[4]), ":notify") && h.armed.CompareAndSwap(true, false) {
			cmd.SetErr(syscall.ECONNRESET)
			return syscall.ECONNRESET
		}
		return next(ctx, cmd)
	}
}

func (h *failReleases) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// lateSegments is a go-redis dial hook whose connections can hold back the
// bytes of one write, as TCP does with a segment it has to retransmit: the
// write succeeds at once, the bytes reach Redis only when the test calls
// deliver. go-redis meanwhile times the call out and closes the connection;
// like close(2) with data still queued, that close waits for the bytes and
// does not drop them.
type lateSegments struct {
	mu        sync.Mutex
	match     func([]byte) bool // holds back the next write it accepts; nil: none
	delivered chan struct{}     // closed by deliver
	once      sync.Once
	wg        sync.WaitGroup
	// Script pipelines (renewals) out now, and answered so far.
	out, answered atomic.Int64
}

// newLateSegments returns a lateSegments whose held bytes are delivered at
// t.Cleanup at the latest.
func newLateSegments(t *testing.T) *lateSegments {
	t.Helper()
	ls := &lateSegments{delivered: make(chan struct{})}
	t.Cleanup(func() { ls.deliver(); ls.wg.Wait() })
	return ls
}

// holdNext makes the next write that match accepts the one held back.
func (ls *lateSegments) holdNext(match func([]byte) bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.match = match
}

// deliver lets the held bytes, if any, reach Redis.
func (ls *lateSegments) deliver() { ls.once.Do(func() { close(ls.delivered) }) }

func (ls *lateSegments) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lateConn{Conn: c, ls: ls}, nil
	}
}

func (ls *lateSegments) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (ls *lateSegments) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !scriptPipeline(cmds) {
			return next(ctx, cmds)
		}
		ls.out.Add(1)
		defer ls.out.Add(-1)
		err := next(ctx, cmds)
		ls.answered.Add(1)
		return err
	}
}

// lateConn is one connection of a lateSegments.
type lateConn struct {
	net.Conn
	ls      *lateSegments
	mu      sync.Mutex
	queued  []byte // written by go-redis, not yet sent
	late    bool   // a write is held back: later ones queue behind it
	closing bool   // go-redis closed the connection meanwhile
}

func (c *lateConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.late {
		c.queued = append(c.queued, p...)
		return len(p), nil
	}
	c.ls.mu.Lock()
	hold := c.ls.match != nil && c.ls.match(p)
	if hold {
		c.ls.match = nil
	}
	c.ls.mu.Unlock()
	if !hold {
		return c.Conn.Write(p)
	}
	c.late, c.queued = true, append([]byte(nil), p...)
	c.ls.wg.Add(1)
	go c.sendLate()
	return len(p), nil
}

// sendLate sends the held bytes once the test delivers them. If go-redis
// has closed the connection meanwhile, it waits for Redis's reply before
// closing: a socket closed with unread data resets the connection, and
// Redis might drop the bytes unread, which would not model a late segment.
func (c *lateConn) sendLate() {
	defer c.ls.wg.Done()
	<-c.ls.delivered
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.Conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Conn.Write(c.queued)
	c.late, c.queued = false, nil
	if c.closing {
		if err == nil {
			_, _ = c.Conn.Read(make([]byte, 64)) // the reply: Redis ran the command
		}
		_ = c.Conn.Close()
	}
}

func (c *lateConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.late {
		c.closing = true
		return nil
	}
	return c.Conn.Close()
}
