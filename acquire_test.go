package lock_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// heldWrite is a go-redis hook that keeps one command on the wire: the
// first write carrying one of its markers is not passed on, as a TCP
// segment waiting for its retransmit. go-redis reads no reply, gives the
// call up at its read timeout and closes the connection; the bytes stay in
// flight (a closed socket still delivers what it had sent) until deliver
// passes them on, and only then does the connection close.
type heldWrite struct {
	markers [][]byte

	mu      sync.Mutex
	armed   bool
	conn    net.Conn // the underlying connection of the held write
	data    []byte
	closed  bool          // go-redis closed the connection meanwhile
	written chan struct{} // closed once the write is held
}

func newHeldWrite(markers ...string) *heldWrite {
	h := &heldWrite{written: make(chan struct{})}
	for _, m := range markers {
		h.markers = append(h.markers, []byte(m))
	}
	return h
}

func (h *heldWrite) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = true
}

// deliver passes the held write on to the server, reads its reply and
// closes the connection if go-redis has. It returns the reply's bytes.
func (h *heldWrite) deliver(t *testing.T) string {
	t.Helper()
	select {
	case <-h.written:
	case <-time.After(10 * time.Second):
		t.Fatal("no write was held")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.conn.SetDeadline(time.Time{}) // go-redis's own deadlines have passed
	if _, err := h.conn.Write(h.data); err != nil {
		t.Fatalf("deliver the held write: %v", err)
	}
	_ = h.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := h.conn.Read(buf)
	if err != nil {
		t.Fatalf("read the held write's reply: %v", err)
	}
	if h.closed {
		h.conn.Close()
	}
	return string(buf[:n])
}

func (h *heldWrite) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &heldConn{Conn: conn, h: h}, nil
	}
}

func (h *heldWrite) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *heldWrite) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// heldConn is one connection dialled through a heldWrite hook.
type heldConn struct {
	net.Conn
	h    *heldWrite
	held bool // this connection's write is the held one
}

func (c *heldConn) Write(p []byte) (int, error) {
	h := c.h
	h.mu.Lock()
	if h.armed {
		for _, m := range h.markers {
			if bytes.Contains(p, m) {
				h.armed, c.held = false, true
				h.conn, h.data = c.Conn, append([]byte(nil), p...)
				close(h.written)
				h.mu.Unlock()
				return len(p), nil
			}
		}
	}
	h.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *heldConn) Close() error {
	if c.held {
		h := c.h
		h.mu.Lock()
		defer h.mu.Unlock()
		h.closed = true
		return nil // the socket closes once deliver has passed its bytes on
	}
	return c.Conn.Close()
}

// slowFirstAcquire is a go-redis hook that hands the reply of the first
// acquire script call to the library only after delay: the reply itself
// came back at once, so Redis took the lock then.
type slowFirstAcquire struct {
	delay time.Duration
	mu    sync.Mutex
	done  bool
}

func (h *slowFirstAcquire) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowFirstAcquire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) > 1 {
			s := fmt.Sprint(args[1])
			if s == luascripts.Acquire.Hash() || s == luascripts.Sources[0] {
				h.mu.Lock()
				first := !h.done
				h.done = true
				h.mu.Unlock()
				if first {
					time.Sleep(h.delay)
				}
			}
		}
		return err
	}
}

func (h *slowFirstAcquire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLock_Acquire_lateUndoSparesLaterAttempt: every attempt of one Acquire
// carries the same token. Attempt 1 takes the lock, but its reply comes
// after the hold's safety deadline, so install undoes it with a release of
// that token; the release stays on the wire past go-redis's read timeout
// (one slow TCP retransmit), the undo call returns, and attempt 2 takes
// the lock again with the same token and Acquire returns nil. When
// attempt 1's undo then reaches Redis, it matches attempt 2's hold and
// deletes it: another Client acquires while the first handle's Lost() is
// open. (redlock gives each attempt a token of its own for this reason.)
func TestLock_Acquire_lateUndoSparesLaterAttempt(t *testing.T) {
	for _, owner := range []string{"", "o"} {
		t.Run("owner="+owner, func(t *testing.T) { lateUndo(t, owner) })
	}
}

func lateUndo(t *testing.T, owner string) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	const ttl = 2 * time.Second
	rdb := redis.NewClient(&redis.Options{Addr: tg.srv.Addr(), ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	held := newHeldWrite(luascripts.Release.Hash(), "-- release.lua")
	rdb.AddHook(held)
	// The first acquire's reply reaches the library past the hold's safety
	// deadline (TTL less a tenth and 2ms): install undoes the attempt.
	rdb.AddHook(&slowFirstAcquire{delay: ttl - ttl/20})
	opts := []lock.Option{lock.WithTTL(ttl), lock.WithWatchdog(false),
		lock.WithBackoff(time.Millisecond, 2*time.Millisecond), lock.WithNotify(false)}
	if owner != "" {
		opts = append(opts, lock.WithOwner(owner))
	}
	c := newClient(t, rdb, opts...)
	l := c.NewLock(key)
	held.arm()
	must(t, "Acquire()", l.Acquire(ctx))
	defer l.Release(ctx)
	var before any = tg.rdb.Get(ctx, lockKey(key)).Val()
	if owner != "" {
		before = tg.rdb.HGetAll(ctx, lockKey(key)).Val()
	}
	if owner == "" {
		wantHeldBy(t, tg.rdb, l, "after Acquire")
	}

	reply := held.deliver(t) // attempt 1's undo reaches Redis now
	t.Logf("attempt 1's undo, delivered late, replied %q", reply)
	other := newClient(t, tg.rdb).NewLock(key, lock.WithOwner("another"))
	ok, err := other.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		defer other.Release(ctx)
	}
	if lost := l.LostErr(); ok && lost == nil {
		t.Fatalf("another Client's TryAcquire() = true while the handle whose Acquire returned nil "+
			"still holds (LostErr nil): attempt 1's late undo (reply %q) deleted attempt 2's hold (%v)",
			reply, before)
	}
	if owner == "" {
		wantHeldBy(t, tg.rdb, l, "after attempt 1's late undo")
	}
}
