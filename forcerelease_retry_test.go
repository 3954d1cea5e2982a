package lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// retryWithToken is a go-redis hook on the script calls naming one Redis
// key: the first one runs and its reply is reported lost (the acquire
// took the key and does not know it), and before the second one is sent
// the test's between runs, in the hook: the acquire's retry, with the same
// token, has read its clock and is about to go out; after runs once the
// retry took the key, its reply held back meanwhile.
type retryWithToken struct {
	key     string
	between func()
	after   func()
	mu      sync.Mutex
	calls   int
}

// nth reports which call naming the key cmds are (1, 2, ...), 0 for none.
func (h *retryWithToken) nth(cmds ...redis.Cmder) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cmd := range cmds {
		if slices.Contains(kindtest.ScriptKeys(cmd), h.key) {
			h.calls++
			return h.calls
		}
	}
	return 0
}

// around runs f, if set, for the want-th call.
func (h *retryWithToken) around(n, want int, f func()) {
	if n == want && f != nil {
		f()
	}
}

func (h *retryWithToken) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *retryWithToken) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		n := h.nth(cmd)
		h.around(n, 2, h.between)
		err := next(ctx, cmd)
		h.around(n, 2, h.after)
		if n == 1 && err == nil {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func (h *retryWithToken) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := h.nth(cmds...)
		h.around(n, 2, h.between)
		err := next(ctx, cmds)
		h.around(n, 2, h.after)
		if n == 1 && err == nil {
			for _, cmd := range cmds {
				cmd.SetErr(io.ErrUnexpectedEOF)
			}
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

// TestClient_ForceRelease_ofAnEarlierAttempt: an Acquire's first attempt
// takes the key but its reply is lost, and an operator force-releases that
// hold; the retry, with the same token, takes the key afresh. The force
// message is heard after the retry was sent (here: while it waits to go
// out) and before it is installed: it is for the first attempt's hold,
// gone before the retry landed, so the new hold, which Redis has, is not
// reported lost, with coalescing on and off.
func TestClient_ForceRelease_ofAnEarlierAttempt(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	for _, coalesce := range []bool{true, false} {
		name := "coalesced"
		if !coalesce {
			name = "uncoalesced"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			key := keyFor(t)
			op := newClient(t, tg.newRDB(t))
			rdb := tg.newRDB(t)
			var warm *lock.Lock
			rdb.AddHook(&retryWithToken{key: lockKey(key), between: func() {
				must(t, "ForceRelease() of the first attempt's hold", op.ForceRelease(ctx, key))
				must(t, "ForceRelease() warm", op.ForceRelease(ctx, key+":warm"))
				waitClosed(t, warm.Lost(), 10*time.Second, "warm.Lost(): the force messages heard")
			}})
			c := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithCoalescing(coalesce),
				lock.WithBackoff(time.Millisecond, time.Millisecond))
			warm = c.NewLock(key + ":warm")
			must(t, "Acquire() warm", warm.Acquire(ctx))
			waitUntil(t, "the force channel's subscription", func() bool { return lock.InboxReady(c) })

			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			select {
			case <-l.Lost():
				t.Errorf("Lost() closed (%v) right after Acquire(), which holds the key", l.LostErr())
			default:
			}
			wantTaken(t, op, key)
			must(t, "Release()", l.Release(ctx))
		})
	}
}

// TestClient_ForceRelease_ofARetry: as TestClient_ForceRelease_ofAnEarlierAttempt,
// but the operator force-releases the hold the retry took, its reply held
// back, and another Client takes the key: the message, heard before the
// install, may be for either hold, and the hold, asked about in Redis at
// once, is reported lost, force-released, long before its first renewal
// (the TTL is a minute), with the watchdog on and off.
func TestClient_ForceRelease_ofARetry(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	for _, watchdog := range []bool{true, false} {
		t.Run(fmt.Sprintf("watchdog=%v", watchdog), func(t *testing.T) {
			ctx := context.Background()
			key := keyFor(t)
			op := newClient(t, tg.newRDB(t))
			rdb := tg.newRDB(t)
			var warm *lock.Lock
			rdb.AddHook(&retryWithToken{key: lockKey(key), after: func() {
				must(t, "ForceRelease() of the retry's hold", op.ForceRelease(ctx, key))
				must(t, "another Client's Acquire()", op.NewLock(key).Acquire(ctx))
				must(t, "ForceRelease() warm", op.ForceRelease(ctx, key+":warm"))
				waitClosed(t, warm.Lost(), 10*time.Second, "warm.Lost(): the force messages heard")
			}})
			c := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithWatchdog(watchdog),
				lock.WithBackoff(time.Millisecond, time.Millisecond))
			warm = c.NewLock(key + ":warm")
			must(t, "Acquire() warm", warm.Acquire(ctx))
			waitUntil(t, "the force channel's subscription", func() bool { return lock.InboxReady(c) })

			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			waitClosed(t, l.Lost(), 5*time.Second, "Lost() of the retry's hold, force-released before its install")
			var le *lock.LostError
			if err := l.LostErr(); !errors.As(err, &le) || le.Reason != lock.LossForceReleased {
				t.Fatalf("LostErr() = %v, want a *LostError with reason force-released", err)
			}
		})
	}
}

// pubsubGate is a go-redis dial hook whose pub/sub connections (those that
// sent a SUBSCRIBE) can be held shut: once armed, what such a connection
// reads is held back, not handed to go-redis, until the test opens it.
type pubsubGate struct {
	mu   sync.Mutex
	shut chan struct{} // not nil while armed; closed by open
}

// arm holds back every pub/sub read from now on.
func (g *pubsubGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = make(chan struct{})
}

// open lets the held reads go on.
func (g *pubsubGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.shut)
	g.shut = nil
}

func (g *pubsubGate) wait() {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		<-shut
	}
}

func (g *pubsubGate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: cn, g: g}, nil
	}
}

func (g *pubsubGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (g *pubsubGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// gatedConn is one connection dialled through a pubsubGate.
type gatedConn struct {
	net.Conn
	g      *pubsubGate
	pubsub atomic.Bool
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(p), []byte("subscribe")) {
		c.pubsub.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *gatedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.pubsub.Load() {
		c.g.wait()
	}
	return n, err
}

// TestClient_ForceRelease_ofAnEarlierAttemptHeardLate: as
// TestClient_ForceRelease_ofAnEarlierAttempt, but the force message of the
// first attempt's hold is heard only after the retry's hold is installed
// (the holder's pub/sub reads held back): it does not kill that hold either.
func TestClient_ForceRelease_ofAnEarlierAttemptHeardLate(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	op := newClient(t, tg.newRDB(t))
	rdb := tg.newRDB(t)
	gate := &pubsubGate{}
	rdb.AddHook(gate)
	rdb.AddHook(&retryWithToken{key: lockKey(key), between: func() {
		gate.arm()
		must(t, "ForceRelease() of the first attempt's hold", op.ForceRelease(ctx, key))
	}})
	c := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithBackoff(time.Millisecond, time.Millisecond))
	warm := c.NewLock(key + ":warm")
	must(t, "Acquire() warm", warm.Acquire(ctx))
	waitUntil(t, "the force channel's subscription", func() bool { return lock.InboxReady(c) })

	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "ForceRelease() warm", op.ForceRelease(ctx, key+":warm"))
	gate.open()
	waitClosed(t, warm.Lost(), 10*time.Second, "warm.Lost(): the force messages heard")
	select {
	case <-l.Lost():
		t.Errorf("Lost() closed (%v) by the first attempt's force message, heard late; the retry holds the key", l.LostErr())
	default:
	}
	wantTaken(t, op, key)
	must(t, "Release()", l.Release(ctx))
}

// TestLock_owedCheckLandsAfterExtend: a Client's first hold is asked about
// in Redis by a renewal once its force channel is confirmed; that renewal
// carries the acquire's TTL. Held before it is sent while an Extend to a
// longer TTL is called, it goes first: the Extend waits for it (one write
// per hold at a time) and then sets its own TTL, which the key keeps, for
// a mutex and a multi-lock, the watchdog off.
func TestLock_owedCheckLandsAfterExtend(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	type holder interface {
		Acquire(context.Context) error
		Extend(context.Context, time.Duration) error
		Release(context.Context) error
	}
	cases := map[string]func(c *lock.Client, key string) holder{
		"mutex": func(c *lock.Client, key string) holder { return c.NewLock(key) },
		"multi": func(c *lock.Client, key string) holder { return c.NewMultiLock([]string{key, key + ":b"}) },
	}
	for name, newHolder := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			key := keyFor(t)
			rdb := tg.newRDB(t)
			gate, send := &pubsubGate{}, &keyReplyHold{early: true}
			rdb.AddHook(gate)
			rdb.AddHook(send)
			c := newClient(t, rdb, lock.WithTTL(3*time.Second), lock.WithWatchdog(false))
			waiting, signal := waitSignal()
			lock.OnExtendWaits(c, signal)
			gate.arm() // the subscription's confirmation waits
			l := newHolder(c, key)
			must(t, "Acquire()", l.Acquire(ctx))
			send.arm(lockKey(key))
			gate.open()
			waitClosed(t, send.held, 10*time.Second, "the owed check held before it is sent")
			ext := make(chan error, 1)
			go func() { ext <- l.Extend(ctx, time.Minute) }()
			waitClosed(t, waiting, 10*time.Second, "the Extend waiting for the check")
			close(send.free)
			must(t, "Extend()", <-ext)
			if ttl := tg.rdb.PTTL(ctx, lockKey(key)).Val(); ttl < 30*time.Second {
				t.Fatalf("PTTL after the Extend = %v, want the Extend's minute", ttl)
			}
			must(t, "Release()", l.Release(ctx))
		})
	}
}
