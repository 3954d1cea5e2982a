package lock_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
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
	rdb, held := heldUndoClient(t, tg.srv.Addr())
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
	lateUndoLands(t, tg.rdb, held, l, "attempt 1", "attempt 2")
}

// heldUndoClient returns a redis client for addr whose calls time out
// after 300ms, and whose first release script call, once held is armed,
// stays on the wire until held delivers it.
func heldUndoClient(t *testing.T, addr string) (*redis.Client, *heldWrite) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	held := newHeldWrite(luascripts.Release.Hash(), "-- release.lua")
	rdb.AddHook(held)
	return rdb, held
}

// lateUndoLands lets the held undo of an earlier attempt reach Redis after
// l's Acquire returned nil (undid names that attempt, took the one whose
// hold l has), then has another Client over obs try the key: it must not
// get it while l's Lost() is open.
func lateUndoLands(t *testing.T, obs *redis.Client, held *heldWrite, l *lock.Lock, undid, took string) {
	t.Helper()
	ctx := context.Background()
	key := l.Key()
	reentrant := obs.Type(ctx, lockKey(key)).Val() == "hash" // WithOwner's layout
	var before any = obs.Get(ctx, lockKey(key)).Val()
	if reentrant {
		before = obs.HGetAll(ctx, lockKey(key)).Val()
	} else {
		wantHeldBy(t, obs, l, "after Acquire")
	}

	reply := held.deliver(t) // the undo reaches Redis now
	t.Logf("%s's undo, delivered late, replied %q", undid, reply)
	other := newClient(t, obs).NewLock(key, lock.WithOwner("another"))
	ok, err := other.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		defer other.Release(ctx)
	}
	if lost := l.LostErr(); ok && lost == nil {
		t.Fatalf("another Client's TryAcquire() = true while the handle whose Acquire returned nil "+
			"still holds (LostErr nil): %s's late undo (reply %q) deleted %s's hold (%v)",
			undid, reply, took, before)
	}
	if !reentrant {
		wantHeldBy(t, obs, l, "after "+undid+"'s late undo")
	}
}

// TestLock_Acquire_lateUndoOfHandoffSparesLaterAttempt: the same with a
// hold a release hands to a waiting Acquire of the same Client under the
// waiter's token. The waiter installs it only after its safety deadline,
// undoes it with a release of that token which stays on the wire, and
// tries again at once: if that attempt carried the handed-over token, the
// late undo would delete its hold.
func TestLock_Acquire_lateUndoOfHandoffSparesLaterAttempt(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	const ttl = 2 * time.Second
	rdb, held := heldUndoClient(t, tg.srv.Addr())
	c := newClient(t, rdb, lock.WithTTL(ttl), lock.WithWatchdog(false), lock.WithBackoff(time.Minute, time.Minute))
	// The waiter installs the handed-over hold past its safety deadline
	// (TTL less a tenth and 2ms, counted from the handoff's send).
	var slow sync.Once
	lock.OnGiftTaken(c, func() { slow.Do(func() { time.Sleep(ttl - ttl/20) }) })
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	waiter := c.NewLock(key)
	waited := startAcquire(t, c, waiter, 1)
	held.arm()
	must(t, "holder Release()", holder.Release(ctx))
	must(t, "waiter Acquire()", <-waited)
	defer waiter.Release(ctx)
	lateUndoLands(t, tg.rdb, held, waiter, "the handed-over hold", "the next attempt")
}

// TestLock_Acquire_lateAckUndoSparesLaterAttempt: the same with
// WithReplicaAck. Attempt 1 takes the lock, but its WAIT fails, so it is
// undone with a release of its token that stays on the wire, and Acquire
// retries: if attempt 2 carried the same token, the late undo would delete
// its hold.
func TestLock_Acquire_lateAckUndoSparesLaterAttempt(t *testing.T) {
	ctx := context.Background()
	master := redistest.Start(t, redistest.Config{})
	_, port, _ := net.SplitHostPort(master.Addr())
	replica := redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	rc := replica.Client(t)
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s never linked to %s", replica.Addr(), master.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	rdb, held := heldUndoClient(t, master.Addr())
	rdb.AddHook(&failFirstWait{})
	c := newClient(t, rdb, lock.WithTTL(2*time.Second), lock.WithWatchdog(false),
		lock.WithBackoff(10*time.Millisecond, 20*time.Millisecond), lock.WithNotify(false),
		lock.WithReplicaAck(1, time.Second))
	l := c.NewLock(keyFor(t))
	held.arm()
	must(t, "Acquire()", l.Acquire(ctx))
	defer l.Release(ctx)
	lateUndoLands(t, master.Client(t), held, l, "attempt 1", "attempt 2")
}

// failFirstWait is a go-redis hook that fails the first WAIT with a
// connection reset before it is sent.
type failFirstWait struct{ done atomic.Bool }

func (h *failFirstWait) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failFirstWait) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "wait") && h.done.CompareAndSwap(false, true) {
			cmd.SetErr(syscall.ECONNRESET)
			return syscall.ECONNRESET
		}
		return next(ctx, cmd)
	}
}

func (h *failFirstWait) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
