package lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// deadlineSlack is how late past its deadline a verb may return: the
// scheduling of a goroutine or two, on a loaded machine under -race.
const deadlineSlack = 150 * time.Millisecond

// unreachable returns a go-redis client (default options) to a Redis that
// does not answer: a closed port, or a real server stopped with SIGSTOP
// (connections are accepted, no reply comes) until the test's cleanup.
func unreachable(t *testing.T, how string) *redis.Client {
	t.Helper()
	if how == "closed port" {
		rdb := redis.NewClient(&redis.Options{Addr: kindtest.ClosedAddr(t)})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	must(t, "PING", rdb.Ping(context.Background()).Err())
	must(t, "Pause()", s.Pause())
	t.Cleanup(func() { s.Resume() })
	return rdb
}

// within fails the test unless call returned by want, give or take
// deadlineSlack, and returns its error.
func within(t *testing.T, what string, want time.Duration, call func() error) error {
	t.Helper()
	start := time.Now()
	err := call()
	if took := time.Since(start); took > want+deadlineSlack {
		t.Fatalf("%s returned after %v, want by %v (error %v)", what, took, want, err)
	}
	return err
}

// TestLock_Acquire_returnsByDeadlineWhenUnreachable: TryAcquire and Acquire
// return by the caller's deadline and by the wait timeout when Redis
// refuses connections or accepts them and never answers; what an attempt
// left unanswered is undone in the background. The error says why the wait
// ended, and carries the last Redis error when an attempt came back.
func TestLock_Acquire_returnsByDeadlineWhenUnreachable(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"closed port", "stopped server"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			rdb := unreachable(t, how)
			c := newClient(t, rdb)
			key := keyFor(t)

			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err := within(t, "TryAcquire(ctx 500ms)", 500*time.Millisecond, func() error {
				ok, err := c.NewLock(key).TryAcquire(ctx)
				if ok {
					t.Fatalf("TryAcquire() = true on an unreachable Redis")
				}
				return err
			})
			wantErr(t, "TryAcquire(ctx 500ms)", err, context.DeadlineExceeded)

			err = within(t, "Acquire(WithWaitTimeout(1s))", time.Second, func() error {
				return c.NewLock(key, lock.WithWaitTimeout(time.Second)).Acquire(context.Background())
			})
			wantErr(t, "Acquire(WithWaitTimeout(1s))", err, lock.ErrNotAcquired)

			// A go-redis call to a closed port gives up after about 1.7s
			// (dial and command retries): a 4s wait sees its dial error.
			d := 2 * time.Second
			if how == "closed port" {
				d = 4 * time.Second
			}
			ctx, cancel = context.WithTimeout(context.Background(), d)
			defer cancel()
			err = within(t, "Acquire(ctx)", d, func() error { return c.NewLock(key).Acquire(ctx) })
			wantErr(t, "Acquire(ctx)", err, lock.ErrNotAcquired)
			wantErr(t, "Acquire(ctx)", err, context.DeadlineExceeded)
			if how == "closed port" {
				wantErr(t, "Acquire(ctx 4s) on a closed port", err, syscall.ECONNREFUSED)
			}
		})
	}
}

// TestClient_Close_waitsForUndoOfUnansweredAttempt: a TryAcquire whose call
// is still unanswered at its deadline returns then; the call takes the lock
// when the server resumes, and the undo that follows runs before Close
// returns, leaving the key free.
func TestClient_Close_waitsForUndoOfUnansweredAttempt(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	ctx := context.Background()
	must(t, "PING", rdb.Ping(ctx).Err())
	c := lock.NewClient(rdb)
	t.Cleanup(func() { c.Close() })
	key := keyFor(t)

	must(t, "Pause()", s.Pause())
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			s.Resume()
		}
	})
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err := within(t, "TryAcquire(ctx 300ms)", 300*time.Millisecond, func() error {
		_, err := c.NewLock(key).TryAcquire(tctx)
		return err
	})
	wantErr(t, "TryAcquire(ctx 300ms) on a stopped server", err, context.DeadlineExceeded)
	must(t, "Resume()", s.Resume())
	resumed = true
	must(t, "Close()", c.Close())
	if n := s.Client(t).Exists(ctx, lockKey(key)).Val(); n != 0 {
		t.Fatalf("the lock key exists after Close: the unanswered attempt was not undone")
	}
}

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// levels returns the level of each record with message msg.
func (h *logRecorder) levels(msg string) []slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Level
	for _, r := range h.records {
		if r.Message == msg {
			out = append(out, r.Level)
		}
	}
	return out
}

// TestLock_Acquire_reportsEachFailedAttempt: an Acquire that waits on an
// unreachable Redis reports every failed attempt to the Observer, with the
// caller's context and the attempt's number and error, and logs it: at
// debug level, then as a warning at the third failure in a row.
func TestLock_Acquire_reportsEachFailedAttempt(t *testing.T) {
	t.Parallel()
	// No retries inside go-redis: each attempt is one refused dial. A pool
	// larger than the attempts never starts go-redis's background dialer.
	rdb := redis.NewClient(&redis.Options{Addr: kindtest.ClosedAddr(t), MaxRetries: -1, DialerRetries: 1, PoolSize: 100000})
	t.Cleanup(func() { rdb.Close() })
	rec, logs := &kindtest.Recorder{}, &logRecorder{}
	c := newClient(t, rdb, lock.WithObserver(rec), lock.WithLogger(slog.New(logs)),
		lock.WithBackoff(time.Millisecond, 2*time.Millisecond), lock.WithWaitTimeout(300*time.Millisecond))
	ctx := kindtest.CallerCtx()
	err := c.NewLock(keyFor(t)).Acquire(ctx)
	wantErr(t, "Acquire() on a closed port", err, lock.ErrNotAcquired)
	wantErr(t, "Acquire() on a closed port", err, syscall.ECONNREFUSED)

	var failed []lock.Event
	for _, e := range rec.Events() {
		if e.Kind == lock.EventAttemptFailed {
			failed = append(failed, e)
		}
	}
	if len(failed) < 3 {
		t.Fatalf("%d EventAttemptFailed in 300ms of refused attempts, want at least 3", len(failed))
	}
	for i, e := range failed {
		// The last attempt may be cut short by the wait's end instead.
		refused := errors.Is(e.Err, syscall.ECONNREFUSED) || i == len(failed)-1
		if e.Attempts != i+1 || !refused || e.Ctx != ctx {
			t.Fatalf("EventAttemptFailed %d = {Attempts %d, Err %v, Ctx %v}, want attempt %d, the refused dial and the caller's ctx",
				i, e.Attempts, e.Err, e.Ctx, i+1)
		}
	}
	levels := logs.levels("lock acquire attempt failed")
	if len(levels) < 3 || levels[0] != slog.LevelDebug || levels[1] != slog.LevelDebug || levels[2] != slog.LevelWarn {
		t.Fatalf("log levels of the failed attempts = %v, want debug, debug, then a warning at the third", levels)
	}
}

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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestLock_Acquire_reentrantShorterTTLKeepsOuter: a nested hold with a
// shorter TTL does not cut the outer hold's key short: after the inner hold
// is released and Redis time passes the inner TTL, another owner gets the
// key only if the outer hold's Lost() has closed.
func TestLock_Acquire_reentrantShorterTTLKeepsOuter(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	outer := c.NewLock(key, lock.WithOwner("o"), lock.WithTTL(time.Minute))
	inner := c.NewLock(key, lock.WithOwner("o"), lock.WithTTL(time.Second))
	must(t, "outer Acquire()", outer.Acquire(ctx))
	must(t, "inner Acquire()", inner.Acquire(ctx))
	must(t, "inner Release()", inner.Release(ctx))
	tg.mr.FastForward(2 * time.Second) // Redis time only: the outer hold's own clock says 58s are left
	ok, err := c.NewLock(key, lock.WithOwner("p")).TryAcquire(ctx)
	if ok && !isClosed(outer.Lost()) {
		t.Fatal("another owner acquired the key while the outer hold's Lost() is open")
	}
	must(t, "TryAcquire()", err)
}

// TestLock_Acquire_ctxCauseAndErr: an Acquire ended by a ctx cancelled with
// a custom cause returns ErrNotAcquired wrapping both context.Cause(ctx) and
// ctx.Err().
func TestLock_Acquire_ctxCauseAndErr(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	must(t, "holder Acquire()", c.NewLock(key).Acquire(context.Background()))
	myCause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(myCause) })
	err := c.NewLock(key).Acquire(ctx)
	wantErr(t, "Acquire()", err, lock.ErrNotAcquired)
	wantErr(t, "Acquire()", err, myCause)
	wantErr(t, "Acquire()", err, context.Canceled)
}

// TestLock_Acquire_waitTimeoutVersusCtx: of the ctx deadline and the wait
// timeout, whichever ends first names the error.
func TestLock_Acquire_waitTimeoutVersusCtx(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	must(t, "holder Acquire()", c.NewLock(key).Acquire(ctx))

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := c.NewLock(key, lock.WithWaitTimeout(time.Minute)).Acquire(short)
	wantErr(t, "Acquire() with the earlier ctx deadline", err, lock.ErrNotAcquired)
	wantErr(t, "Acquire() with the earlier ctx deadline", err, context.DeadlineExceeded)

	long, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	err = c.NewLock(key, lock.WithWaitTimeout(100*time.Millisecond)).Acquire(long)
	wantErr(t, "Acquire() with the earlier wait timeout", err, lock.ErrNotAcquired)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire() ended by the wait timeout = %v, must not match the ctx's DeadlineExceeded", err)
	}
}

// dropReply is a go-redis hook that lets every single call matching match
// reach Redis and run there, then replaces its reply with an error, as a
// connection that broke after the write would.
type dropReply struct{ match func(redis.Cmder) bool }

func (h dropReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h dropReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.match(cmd) {
			err = errors.New("reply dropped")
			cmd.SetErr(err)
		}
		return err
	}
}

func (h dropReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestTryAcquire_panickingAfterSendIsUndone: an attempt whose call panics
// on the caller's goroutine after it was sent (a go-redis hook that
// panics once the reply is in; a ctx without deadline runs the call
// there) hands the panic to the caller, and what the attempt took in Redis
// is undone in the background, as for any attempt of unknown outcome,
// rather than held by nobody for its TTL (a minute here). So too with a
// ctx that has a deadline: the call then runs on a goroutine of the
// engine's, which hands the panic back to the caller.
func TestTryAcquire_panickingAfterSendIsUndone(t *testing.T) {
	t.Parallel()
	eachCtx(t, testTryAcquirePanickingAfterSendIsUndone)
}

func testTryAcquirePanickingAfterSendIsUndone(t *testing.T, ctx context.Context) {
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	rdb.AddHook(panicAfter{match: isAcquire})
	l := newClient(t, rdb).NewLock(keyFor(t), lock.WithTTL(time.Minute))
	mustPanic(t, "TryAcquire()", "the hook's panic", func() {
		_, _ = l.TryAcquire(ctx)
	})
	wantUndone(t, rdb, l, "the attempt undone")
}

// eachCtx runs fn as a subtest with a ctx without deadline, whose calls
// run on the caller's goroutine, and with one that has a deadline, whose
// calls run on a goroutine of the engine's until it ends.
func eachCtx(t *testing.T, fn func(t *testing.T, ctx context.Context)) {
	t.Run("no deadline", func(t *testing.T) { fn(t, context.Background()) })
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		fn(t, ctx)
	})
}

// wantUndone waits until l's key is gone (what: the undo awaited), then
// takes the lock with l again and releases it.
func wantUndone(t *testing.T, rdb redis.Cmdable, l *lock.Lock, what string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, what+" (key gone)", func() bool {
		return rdb.Exists(ctx, lockKey(l.Key())).Val() == 0
	})
	ok, err := l.TryAcquire(ctx)
	if !ok || err != nil {
		t.Fatalf("TryAcquire() after the panic = %v, %v; want the lock, free again", ok, err)
	}
	must(t, "Release()", l.Release(ctx))
}

// panicAfter is a go-redis hook that lets a single call matching match run
// in Redis and get its reply, then panics, once.
type panicAfter struct{ match func(redis.Cmder) bool }

func (h panicAfter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h panicAfter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	var once sync.Once
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.match(cmd) {
			once.Do(func() { panic("hook panicked") })
		}
		return err
	}
}

func (h panicAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestTryAcquire_panickingUndoIsLoggedInsteadOfCrashing: when the undo of
// an attempt of unknown outcome panics in a go-redis hook (on a goroutine
// of the engine's, where no caller could recover it), the process goes on:
// TryAcquire returns the attempt's error, the undo's panic is logged at
// Error level as its failure, and the key is left to expire with its TTL.
func TestTryAcquire_panickingUndoIsLoggedInsteadOfCrashing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	rdb.AddHook(dropReply{match: isAcquire})
	undo := &kindtest.PanicWhen{Match: func(cmds []redis.Cmder) bool {
		return slices.ContainsFunc(cmds, isScriptCall) && !slices.ContainsFunc(cmds, isAcquire)
	}}
	rdb.AddHook(undo)
	undo.Armed.Store(true)
	logs := &logRecorder{}
	l := newClient(t, rdb, lock.WithLogger(slog.New(logs))).NewLock(keyFor(t))
	ok, err := l.TryAcquire(ctx)
	if ok || err == nil {
		t.Fatalf("TryAcquire() with its reply dropped = %v, %v; want false and the call's error", ok, err)
	}
	wantPanicLogged(t, logs, "undo panicked")
	undo.Armed.Store(false)
	if n := rdb.Exists(ctx, lockKey(l.Key())).Val(); n != 1 {
		t.Fatalf("the key exists %d times after an undo that panicked, want 1 (left to its TTL)", n)
	}
}

// TestAcquire_panickingObserverAfterUnknownAttemptUndoesIt: an Acquire
// whose first attempt ran in Redis but lost its reply (outcome unknown,
// the key taken with the Acquire's token) tells the Observer of the failed
// attempt on the caller's goroutine. When the Observer panics there, the
// panic goes on to the caller, and what the attempt took is undone, as
// when the wait ends, rather than held by nobody for its TTL (a minute).
func TestAcquire_panickingObserverAfterUnknownAttemptUndoesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	var dropped atomic.Bool
	rdb.AddHook(dropReply{match: func(cmd redis.Cmder) bool { return isAcquire(cmd) && dropped.CompareAndSwap(false, true) }})
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAttemptFailed {
			panic("observer panicked")
		}
	})
	l := newClient(t, rdb, lock.WithObserver(obs)).NewLock(keyFor(t), lock.WithTTL(time.Minute))
	mustPanic(t, "Acquire()", "the Observer's panic", func() {
		_ = l.Acquire(ctx)
	})
	eventually(t, "the unknown attempt undone (key gone)", func() bool {
		return rdb.Exists(ctx, lockKey(l.Key())).Val() == 0
	})
}

// TestAcquire_panickingObserverOnAcquireUndoesTheHold: an Observer that
// panics when told of the acquisition (on the caller's goroutine, once
// the hold is installed) hands its panic to the caller, who never learnt
// that it holds the lock and so will not release it. The hold is undone,
// as an attempt of unknown outcome is, rather than renewed until Close;
// the Lock can acquire again.
func TestAcquire_panickingObserverOnAcquireUndoesTheHold(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"Acquire", "TryAcquire"} {
		t.Run(verb, func(t *testing.T) {
			ctx := context.Background()
			rdb := redistest.Start(t, redistest.Config{}).Client(t)
			var armed atomic.Bool
			obs := lock.ObserverFunc(func(e lock.Event) {
				if e.Kind == lock.EventAcquire && e.Err == nil && armed.CompareAndSwap(true, false) {
					panic("observer panicked")
				}
			})
			l := newClient(t, rdb, lock.WithObserver(obs)).NewLock(keyFor(t))
			armed.Store(true)
			mustPanic(t, verb+"()", "the Observer's panic", func() {
				if verb == "Acquire" {
					_ = l.Acquire(ctx)
				} else {
					_, _ = l.TryAcquire(ctx)
				}
			})
			wantUndone(t, rdb, l, "the hold undone")
		})
	}
}

// TestAcquire_panickingAttemptAfterWakeUpLeavesNothing: a waiter woken by
// a release (in another Client) whose attempt then takes the key and
// panics on the caller's goroutine hands the panic to its caller, and
// leaves nothing behind: the key is undone, the waiter is gone from its
// Client's Notifier, and the Lock, not left busy, can wait again and be
// woken by the next release.
func TestAcquire_panickingAttemptAfterWakeUpLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Config{})
	key := keyFor(t)
	holders := newClient(t, srv.Client(t))
	holder := holders.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	rdb := srv.Client(t)
	var armed atomic.Bool
	rdb.AddHook(panicAfter{match: func(cmd redis.Cmder) bool { return isAcquire(cmd) && armed.Load() }})
	wc := newClient(t, rdb)
	w := wc.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = w.Acquire(ctx)
	}()
	waitIdle(t, wc, key, 1) // its first attempt failed; it listens
	armed.Store(true)
	must(t, "holder Release()", holder.Release(ctx))
	if v := recv(t, panicked, "the waiter's Acquire"); v == nil {
		t.Fatal("waiter's Acquire() returned; want the hook's panic")
	}
	armed.Store(false)
	eventually(t, "the panicked attempt undone (key gone)", func() bool {
		return rdb.Exists(ctx, lockKey(key)).Val() == 0
	})
	if n := lock.IdleWaiters(wc, key); n != 0 {
		t.Fatalf("%d idle waiters left after the Acquire panicked, want 0", n)
	}
	must(t, "holder Acquire() again", holder.Acquire(ctx))
	done := startAcquire(t, wc, w, 1)
	must(t, "holder Release() again", holder.Release(ctx))
	must(t, "waiter Acquire() after the panic", recv(t, done, "waiter Acquire after the next release"))
	must(t, "waiter Release()", w.Release(ctx))
}
