package lock_test

import (
	"bytes"
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

	"github.com/agentlock/lock"
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

// pubsubSetup reports a command of a new connection's greeting (HELLO,
// CLIENT SETINFO) or a subscription: the Client's pub/sub connection, set
// up in the background on its first hold (the inbox of force-releases) or
// wait, is no call's round trip.
func pubsubSetup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "subscribe", "unsubscribe":
		return true
	}
	return false
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !pubsubSetup(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !pubsubSetup(cmds[0]) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// cutReplies is a go-redis hook that wraps every connection it dials so a
// test can cut one connection in the middle of a reply. Once armed with a
// marker, the first write that carries the marker arms its connection: the
// connection passes on the first n bytes of the server's reply (it waits for
// at least one, proof that the server ran the command), then closes as a
// dropped connection does. go-redis sees a broken connection after the
// command took effect, as after a network fault, and is free to resend it.
// Later connections, including go-redis's redial, are left alone.
type cutReplies struct {
	mu     sync.Mutex
	marker []byte // nil when not armed
	n      int
	cuts   int
}

// arm makes the next write that contains marker lose its reply after n bytes.
func (h *cutReplies) arm(marker string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.marker, h.n = []byte(marker), n
}

// cut reports how many connections have been cut.
func (h *cutReplies) cut() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cuts
}

func (h *cutReplies) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cutConn{Conn: conn, h: h}, nil
	}
}

func (h *cutReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *cutReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// cutConn is one connection dialled through a cutReplies hook.
type cutConn struct {
	net.Conn
	h *cutReplies

	mu    sync.Mutex
	armed bool
	n     int  // reply bytes to pass on before the cut
	dead  bool // cut: every later read fails
}

func (c *cutConn) Write(p []byte) (int, error) {
	c.h.mu.Lock()
	if c.h.marker != nil && bytes.Contains(p, c.h.marker) {
		c.mu.Lock()
		c.armed, c.n = true, c.h.n
		c.mu.Unlock()
		c.h.marker = nil
	}
	c.h.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *cutConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.dead:
		return 0, io.EOF
	case !c.armed:
		return c.Conn.Read(p)
	}
	// Wait for the reply's first n bytes, at least one, then drop the
	// connection and pass on exactly n.
	_ = c.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	buf := make([]byte, 512)
	for len(got) < max(c.n, 1) {
		k, err := c.Conn.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			break
		}
	}
	c.Conn.Close()
	c.armed, c.dead = false, true
	c.h.mu.Lock()
	c.h.cuts++
	c.h.mu.Unlock()
	k := copy(p, got[:min(c.n, len(got))])
	if k == 0 {
		return 0, io.EOF
	}
	return k, nil
}

// scriptCalls returns how many EVAL and EVALSHA commands the target's
// server has run.
func (tg *target) scriptCalls(t *testing.T) int {
	t.Helper()
	n, err := tg.srv.CommandCalls(context.Background(), "eval", "evalsha")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantFree fails the test if the lock's key is still in Redis.
func (tg *target) wantFree(t *testing.T, key, what string) {
	t.Helper()
	if n := tg.rdb.Exists(context.Background(), lockKey(key)).Val(); n != 0 {
		t.Fatalf("key left %s: %v", what, tg.rdb.HGetAll(context.Background(), lockKey(key)).Val())
	}
}

// wantTaken fails the test if another owner can take key from c.
func wantTaken(t *testing.T, c *lock.Client, key string) {
	t.Helper()
	if ok, err := c.NewLock(key, lock.WithOwner("another")).TryAcquire(context.Background()); ok || err != nil {
		t.Fatalf("another owner's TryAcquire() = %v, %v while the key is held, want false, nil", ok, err)
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
