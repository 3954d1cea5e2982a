package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
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
