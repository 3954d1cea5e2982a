package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// onceResult is what one Once call returned.
type onceResult struct {
	v      []byte
	shared bool
	err    error
}

// goOnce runs c.Once in a goroutine and returns where its result arrives.
func goOnce(ctx context.Context, c *lock.Client, key string, fn func(context.Context) ([]byte, error), opts ...lock.Option) <-chan onceResult {
	out := make(chan onceResult, 1)
	go func() {
		v, shared, err := c.Once(ctx, key, fn, opts...)
		out <- onceResult{v, shared, err}
	}()
	return out
}

// storedFailure returns the error Once gives for a failure that
// WithErrorTTL stored under key: it matches ErrOnceFailed.
func storedFailure(t *testing.T, c *lock.Client, key string) error {
	t.Helper()
	ctx := context.Background()
	fail := func(context.Context) ([]byte, error) { return nil, errors.New("quota exceeded") }
	if _, _, err := c.Once(ctx, key, fail, lock.WithErrorTTL(time.Minute)); err == nil {
		t.Fatal("failing Once() error = nil")
	}
	_, shared, err := c.Once(ctx, key, fail, lock.WithErrorTTL(time.Minute))
	if !errors.Is(err, lock.ErrOnceFailed) || !shared {
		t.Fatalf("Once() of a stored failure = %v, %v; want ErrOnceFailed, shared", shared, err)
	}
	return err
}

// TestOnce_fnReturnsStoredFailure: fn returns the stored failure of another
// key's Once (it matches ErrOnceFailed). That is fn's own error: nothing is
// stored for this key, so the calls that followed the leader in this
// process do not get it; they go to Redis and one of them runs fn.
func TestOnce_fnReturnsStoredFailure(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.newRDB(t))
		upstream := storedFailure(t, c, key+":upstream")
		const followers = 3
		var runs atomic.Int64
		fn := func(context.Context) ([]byte, error) {
			if runs.Add(1) == 1 {
				if !waitFor(10*time.Second, func() bool { return lock.OnceFollowers(c, key) == followers }) {
					return nil, errors.New("followers never joined")
				}
				return nil, upstream
			}
			return []byte("ok"), nil
		}
		leader := goOnce(ctx, c, key, fn)
		if !waitFor(10*time.Second, func() bool { return lock.OnceFollowers(c, key) == 0 }) {
			t.Fatal("no call under way")
		}
		outs := make([]<-chan onceResult, followers)
		for i := range outs {
			outs[i] = goOnce(ctx, c, key, fn)
		}
		if r := <-leader; r.err != upstream || r.shared {
			t.Fatalf("leader's Once() = %v, %v; want fn's error, not shared", r.shared, r.err)
		}
		for _, out := range outs {
			if r := <-out; r.err != nil || string(r.v) != "ok" {
				t.Fatalf("follower's Once() = %q, %v, %v; want ok (fn run by a follower)", r.v, r.shared, r.err)
			}
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("fn ran %d times, want 2 (the leader, then one follower)", n)
		}
	})
}

// holdOnceRead is a go-redis hook that, once armed, holds the reply of the
// next Once acquire (sent alone or in a pipeline) after it has arrived,
// until release is closed: that call has read Redis, and its caller does
// not know yet.
type holdOnceRead struct {
	match   *scriptCounter
	armed   atomic.Bool
	held    chan struct{} // closed when a reply is held
	release chan struct{}
	once    sync.Once
}

// newHoldOnceRead returns the hook, added to rdb, for c (over rdb): the
// reply it holds is let go at cleanup before c is closed.
func newHoldOnceRead(t *testing.T, rdb *redis.Client, opts ...lock.Option) (*holdOnceRead, *lock.Client) {
	t.Helper()
	h := &holdOnceRead{match: onceAcquires(), held: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(h)
	c := newClient(t, rdb, opts...)
	t.Cleanup(h.let)
	return h, c
}

// let lets the held reply go.
func (h *holdOnceRead) let() { h.once.Do(func() { close(h.release) }) }

func (h *holdOnceRead) hold(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if h.match.is(c) && h.armed.CompareAndSwap(true, false) {
			close(h.held)
			<-h.release
			return
		}
	}
}

func (h *holdOnceRead) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdOnceRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.hold(cmd)
		return err
	}
}
func (h *holdOnceRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.hold(cmds...)
		return err
	}
}

// TestOnce_forgetCutsFlight: a call that read the stored result before
// Forget, and has not returned yet, is no flight for calls that start
// after Forget returned: such a call goes to Redis, finds nothing stored,
// and runs fn. The early reader itself returns what it read.
func TestOnce_forgetCutsFlight(t *testing.T) {
	t.Parallel()
	for _, co := range []bool{true, false} {
		t.Run(map[bool]string{true: "coalescing", false: "direct"}[co], func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg *target) {
				ctx := context.Background()
				key := keyFor(t)
				rdb := tg.newRDB(t)
				hold, c := newHoldOnceRead(t, rdb, lock.WithCoalescing(co))
				value := func(s string) func(context.Context) ([]byte, error) {
					return func(context.Context) ([]byte, error) { return []byte(s), nil }
				}
				if _, _, err := c.Once(ctx, key, value("old")); err != nil {
					t.Fatalf("first Once() error = %v", err)
				}
				hold.armed.Store(true)
				early := goOnce(ctx, c, key, value("early"))
				waitClosed(t, hold.held, 10*time.Second, "the early call's read")
				must(t, "Forget()", c.Forget(ctx, key))
				late := goOnce(ctx, c, key, value("new"))
				// The late call either joins the early one (the early read
				// is let go: the late one then gets what it read) or goes
				// to Redis on its own and returns while the early one is
				// still held.
				var r onceResult
				if !waitFor(10*time.Second, func() bool {
					select {
					case r = <-late:
						return true
					default:
						return lock.OnceFollowers(c, key) > 0
					}
				}) {
					t.Fatal("the late call neither returned nor joined the early one")
				}
				hold.let()
				if r.v == nil && r.err == nil {
					r = <-late
				}
				if r.err != nil || string(r.v) != "new" || r.shared {
					t.Fatalf("Once() after Forget = %q, %v, %v; want new, not shared (fn run again)", r.v, r.shared, r.err)
				}
				if e := <-early; e.err != nil || string(e.v) != "old" || !e.shared {
					t.Fatalf("early Once() = %q, %v, %v; want old, shared (read before Forget)", e.v, e.shared, e.err)
				}
			})
		})
	}
}

// TestOnce_holderInfo: Once's hold writes holder info as a mutex hold
// does (WithMetadata, WithHolderInfo, as a Once option or a Client
// default): Inspect shows its host, pid, since, fence and metadata while
// fn runs, and the info goes with the hold, whether the release stores a
// result or fn failed.
func TestOnce_holderInfo(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		client   []lock.Option
		once     []lock.Option
		metadata string
		fail     bool
	}{
		{name: "metadata", once: []lock.Option{lock.WithMetadata("req-7 trace=x")}, metadata: "req-7 trace=x"},
		{name: "clientDefault", client: []lock.Option{lock.WithHolderInfo(true)}},
		{name: "fnFails", once: []lock.Option{lock.WithMetadata("m")}, metadata: "m", fail: true},
		{name: "fnFailsStored", once: []lock.Option{lock.WithMetadata("m"), lock.WithErrorTTL(time.Minute)}, metadata: "m", fail: true},
		{name: "audit", once: []lock.Option{lock.WithMetadata("m"), lock.WithAudit("audit", 100)}, metadata: "m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg *target) {
				ctx := context.Background()
				key := keyFor(t)
				c := newClient(t, tg.rdb, tc.client...)
				before := time.Now().Add(-2 * time.Second) // server and test share a clock, in ms
				inFn, proceed := make(chan int64, 1), make(chan struct{})
				boom := errors.New("boom")
				done := goOnce(ctx, c, key, func(ctx context.Context) ([]byte, error) {
					inFn <- lock.OnceFence(ctx)
					<-proceed
					if tc.fail {
						return nil, boom
					}
					return []byte("v"), nil
				}, tc.once...)
				var fence int64
				select {
				case fence = <-inFn:
				case r := <-done:
					t.Fatalf("Once() = %v before fn ran", r.err)
				}
				info, err := c.Inspect(ctx, key)
				close(proceed)
				must(t, "Inspect()", err)
				wantOnceHolder(t, info, fence, tc.metadata, before)
				r := <-done
				if tc.fail != errors.Is(r.err, boom) || (!tc.fail && r.err != nil) {
					t.Fatalf("Once() = %q, %v; want fn's outcome", r.v, r.err)
				}
				if n := tg.rdb.Exists(ctx, lockKey(key), lockKey(key)+":holders").Val(); n != 0 {
					t.Fatalf("%d of the lock and its holder info left after Once returned, want none", n)
				}
			})
		})
	}
}

// TestOnce_cutFlightEndsAlone: a call cut off by Forget that ends later
// leaves alone the call that took its place: a third call still shares the
// latter's call to Redis.
func TestOnce_cutFlightEndsAlone(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		rdb := tg.newRDB(t)
		sent := onceAcquires()
		rdb.AddHook(sent)
		hold, c := newHoldOnceRead(t, rdb)
		if _, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("old"), nil }); err != nil {
			t.Fatalf("first Once() error = %v", err)
		}
		hold.armed.Store(true)
		early := goOnce(ctx, c, key, func(context.Context) ([]byte, error) { return []byte("early"), nil })
		waitClosed(t, hold.held, 10*time.Second, "the early call's read")
		must(t, "Forget()", c.Forget(ctx, key))
		inFn, proceed := make(chan struct{}), make(chan struct{})
		letLate := sync.OnceFunc(func() { close(proceed) })
		t.Cleanup(letLate)
		late := goOnce(ctx, c, key, func(context.Context) ([]byte, error) {
			close(inFn)
			<-proceed
			return []byte("new"), nil
		})
		waitClosed(t, inFn, 10*time.Second, "the late call's fn")
		hold.let()
		if e := <-early; e.err != nil || string(e.v) != "old" {
			t.Fatalf("early Once() = %q, %v; want old", e.v, e.err)
		}
		n := sent.n.Load()
		third := goOnce(ctx, c, key, func(context.Context) ([]byte, error) { return []byte("third"), nil })
		if !waitFor(10*time.Second, func() bool { return lock.OnceFollowers(c, key) == 1 || sent.n.Load() > n }) {
			t.Fatal("the third call neither joined the late one nor went to Redis")
		}
		joined := lock.OnceFollowers(c, key) == 1
		letLate()
		if r := <-late; r.err != nil || string(r.v) != "new" {
			t.Fatalf("late Once() = %q, %v; want new", r.v, r.err)
		}
		if r := <-third; r.err != nil || string(r.v) != "new" || !r.shared {
			t.Fatalf("third Once() = %q, %v, %v; want new, shared", r.v, r.shared, r.err)
		}
		if !joined {
			t.Fatal("the third call went to Redis itself: the early call's end dropped the late one's flight")
		}
	})
}

// TestOnce_holderInfoRenewed: the watchdog's renewals keep a Once hold's
// holder info alive with the hold, past the TTL it was written with.
func TestOnce_holderInfoRenewed(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, tg.rdb)
	const ttl = time.Second
	holders := lockKey(key) + ":holders"
	checked := make(chan error, 1)
	_, _, err := c.Once(ctx, key, func(ctx context.Context) ([]byte, error) {
		start := time.Now()
		waitFor(ttl+ttl/2, func() bool { return ctx.Err() != nil })
		switch d := tg.rdb.PTTL(ctx, holders).Val(); {
		case ctx.Err() != nil:
			checked <- fmt.Errorf("hold lost after %v: %w", time.Since(start), context.Cause(ctx))
		case d <= 0:
			checked <- fmt.Errorf("holder info PTTL = %v %v after the hold began (TTL %v), want > 0", d, time.Since(start), ttl)
		default:
			checked <- nil
		}
		return []byte("v"), nil
	}, lock.WithTTL(ttl), lock.WithMetadata("m"))
	must(t, "Once()", err)
	must(t, "holder info check", <-checked)
	if n := tg.rdb.Exists(ctx, holders).Val(); n != 0 {
		t.Fatal("holder info left after the store")
	}
}

// wantOnceHolder fails the test unless info shows one mutex holder with
// fence, this process's host and pid, metadata, and a Since after before.
func wantOnceHolder(t *testing.T, info lock.Info, fence int64, metadata string, before time.Time) {
	t.Helper()
	if info.Kind != "mutex" || len(info.Holders) != 1 || info.Fence != fence {
		t.Fatalf("Inspect() while fn runs = %+v, want kind mutex, one holder, fence %d", info, fence)
	}
	h := info.Holders[0]
	host, _ := os.Hostname()
	if h.Token == "" || h.Fence != fence || h.Host != host || h.PID != os.Getpid() || h.Metadata != metadata || h.Owner != "" {
		t.Fatalf("holder = %+v, want fence %d, host %q, pid %d, metadata %q", h, fence, host, os.Getpid(), metadata)
	}
	if h.Since.Before(before) || h.Since.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("holder since %v, want about now", h.Since)
	}
}
