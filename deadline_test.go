package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// verbDeadline is the ctx deadline of every verb in the deadline tables.
const verbDeadline = 300 * time.Millisecond

// deadlineCase is one verb of one kind, made ready on a live server
// (setup) and called once the server is stopped (call).
type deadlineCase struct {
	kind, verb string
	// setup prepares the call on c (acquiring a hold for Release, say)
	// while Redis still answers, and returns the call.
	setup func(t *testing.T, c *lock.Client, key string) func(ctx context.Context) error
}

// held acquires l while Redis answers and returns a call of verb on it.
func held[L interface{ Acquire(context.Context) error }](t *testing.T, l L, verb func(L, context.Context) error) func(context.Context) error {
	t.Helper()
	must(t, "Acquire()", l.Acquire(context.Background()))
	return func(ctx context.Context) error { return verb(l, ctx) }
}

// handle is what the lock kinds with a TTL offer.
type handle interface {
	Acquire(context.Context) error
	TryAcquire(context.Context) (bool, error)
	Release(context.Context) error
	Extend(context.Context, time.Duration) error
	TTL(context.Context) (time.Duration, error)
}

// handleCases are the verbs of a kind whose handles newL makes.
func handleCases(kind string, newL func(c *lock.Client, key string) handle) []deadlineCase {
	return []deadlineCase{
		{kind, "Acquire", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return newL(c, key).Acquire
		}},
		{kind, "TryAcquire", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			l := newL(c, key)
			return func(ctx context.Context) error { _, err := l.TryAcquire(ctx); return err }
		}},
		{kind, "Release", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return held(t, newL(c, key), handle.Release)
		}},
		{kind, "Extend", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return held(t, newL(c, key), func(l handle, ctx context.Context) error { return l.Extend(ctx, time.Minute) })
		}},
		{kind, "TTL", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return held(t, newL(c, key), func(l handle, ctx context.Context) error { _, err := l.TTL(ctx); return err })
		}},
	}
}

// deadlineCases lists every verb of every kind.
func deadlineCases() []deadlineCase {
	var cs []deadlineCase
	cs = append(cs, handleCases("mutex", func(c *lock.Client, key string) handle { return c.NewLock(key) })...)
	cs = append(cs, handleCases("reentrant", func(c *lock.Client, key string) handle {
		return c.NewLock(key, lock.WithOwner("owner"))
	})...)
	cs = append(cs, handleCases("fallback", func(c *lock.Client, key string) handle {
		return c.NewLock(key, lock.WithFallback(lock.FallbackLocal))
	})...)
	cs = append(cs, handleCases("script-free", func(c *lock.Client, key string) handle {
		return c.NewLock(key, lock.WithReleaseMode(lock.ReleaseWatch))
	})...)
	cs = append(cs, handleCases("read", func(c *lock.Client, key string) handle { return c.NewRWLock(key).ReadLock() })...)
	cs = append(cs, handleCases("write", func(c *lock.Client, key string) handle { return c.NewRWLock(key).WriteLock() })...)
	cs = append(cs, handleCases("permit", func(c *lock.Client, key string) handle { return c.NewSemaphore(key, 2).Permit() })...)
	cs = append(cs, handleCases("fair", func(c *lock.Client, key string) handle {
		return c.NewLock(key, lock.WithFair(true))
	})...)
	for _, wh := range withHelpers() {
		cs = append(cs, deadlineCase{"with", wh.name, func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return func(ctx context.Context) error {
				return wh.run(ctx, c, key, func(context.Context) error { return nil })
			}
		}})
	}
	return append(cs, otherCases()...)
}

// otherCases are the verbs of the kinds without a handle of *Lock's shape,
// and the reads.
func otherCases() []deadlineCase {
	multi := func(c *lock.Client, key string) *lock.MultiLock {
		return c.NewMultiLock([]string{key + ":a", key + ":b"})
	}
	return []deadlineCase{
		{"multi", "Acquire", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return multi(c, key).Acquire
		}},
		{"multi", "TryAcquire", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			m := multi(c, key)
			return func(ctx context.Context) error { _, err := m.TryAcquire(ctx); return err }
		}},
		{"multi", "Release", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return held(t, multi(c, key), (*lock.MultiLock).Release)
		}},
		{"multi", "Extend", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return held(t, multi(c, key), func(m *lock.MultiLock, ctx context.Context) error { return m.Extend(ctx, time.Minute) })
		}},
		{"once", "Forget", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return func(ctx context.Context) error { return c.Forget(ctx, key) }
		}},
		{"permit", "Available", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			s := c.NewSemaphore(key, 2)
			return func(ctx context.Context) error { _, err := s.Available(ctx); return err }
		}},
		{"fair", "Waiters", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			l := c.NewLock(key, lock.WithFair(true))
			return func(ctx context.Context) error { _, err := l.Waiters(ctx); return err }
		}},
		{"ops", "Inspect", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return func(ctx context.Context) error { _, err := c.Inspect(ctx, key); return err }
		}},
		{"ops", "ForceRelease", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return held(t, c.NewLock(key), func(_ *lock.Lock, ctx context.Context) error { return c.ForceRelease(ctx, key) })
		}},
		{"ops", "List", func(t *testing.T, c *lock.Client, key string) func(context.Context) error {
			return func(ctx context.Context) error {
				for _, err := range c.List(ctx, key+"*") {
					if err != nil {
						return err
					}
				}
				return nil
			}
		}},
	}
}

// slotFiller holds a Client's coalescer send slots: its hook keeps every
// single call on a key with "filler" in it until open, then fails it
// without sending it, so the calls queued meanwhile go out together as a
// pipeline.
type slotFiller struct{ open chan struct{} }

func isFiller(cmd redis.Cmder) bool {
	return slices.ContainsFunc(cmd.Args(), func(a any) bool {
		s, ok := a.(string)
		return ok && strings.Contains(s, "filler")
	})
}

func (f *slotFiller) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *slotFiller) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isFiller(cmd) {
			return next(ctx, cmd)
		}
		<-f.open
		cmd.SetErr(errors.New("filler failed, not sent"))
		return cmd.Err()
	}
}
func (f *slotFiller) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// deadlineRun is one case ready to run: its Client, its call and, with
// coalescing, the hook that holds the Client's send slots.
type deadlineRun struct {
	name   string
	c      *lock.Client
	call   func(ctx context.Context) error
	filler *slotFiller // nil without coalescing
}

// prepare makes a Client for dc over srv, with ContextTimeoutEnabled as
// cte and coalescing as co, and sets dc up on it.
func prepare(t *testing.T, srv *redistest.Server, dc deadlineCase, cte, co bool) *deadlineRun {
	t.Helper()
	name := fmt.Sprintf("%s/%s/cte=%v/coalesce=%v", dc.kind, dc.verb, cte, co)
	opts := srv.Options()
	opts.ContextTimeoutEnabled = cte
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	// An idle connection to reuse once the server stops: a dial to it
	// would not get as far as a command.
	must(t, "PING", rdb.Ping(context.Background()).Err())
	r := &deadlineRun{name: name}
	if co {
		r.filler = &slotFiller{open: make(chan struct{})}
		rdb.AddHook(r.filler)
		t.Cleanup(r.openFiller)
	}
	r.c = newClient(t, rdb, lock.WithCoalescing(co), lock.WithLogger(nil))
	r.call = dc.setup(t, r.c, keyFor(t)+":"+strings.ReplaceAll(name, "/", ":"))
	return r
}

// errSlotsNotFilled is the error of a case whose Client's send slots could
// not be held: the case did not run.
var errSlotsNotFilled = errors.New("send slots not filled within 5s")

func (r *deadlineRun) openFiller() {
	select {
	case <-r.filler.open:
	default:
		close(r.filler.open)
	}
}

// run calls r's verb with a verbDeadline ctx and returns how long it took,
// and how long a goroutine that slept verbDeadline from the same start
// took to run again: the scheduling delay of the moment, which the verb
// cannot beat. With coalescing, the Client's send slots are held first, so
// that the call queues and then rides a shared pipeline to the stopped
// server; otherwise it goes to the stopped server on its own.
func (r *deadlineRun) run(ctx context.Context) (took, sleeper time.Duration, err error) {
	var fillers sync.WaitGroup
	defer fillers.Wait()
	if r.filler != nil {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for i := range lock.CoalescerLimit() {
			l := r.c.NewLock(fmt.Sprintf("filler:%s:%d", r.name, i))
			fillers.Go(func() { _, _ = l.TryAcquire(fctx) })
		}
		if !waitFor(5*time.Second, func() bool { out, _, _ := lock.CoalescerLoad(r.c); return out == lock.CoalescerLimit() }) {
			return 0, 0, errSlotsNotFilled
		}
		defer r.openFiller()
	}
	vctx, cancel := context.WithTimeout(ctx, verbDeadline)
	defer cancel()
	start := time.Now()
	slept := make(chan time.Duration, 1)
	go func() {
		time.Sleep(verbDeadline)
		slept <- time.Since(start)
	}()
	defer func() { sleeper = <-slept }()
	done := make(chan error, 1)
	go func() { done <- r.call(vctx) }()
	if r.filler != nil {
		// Queued, or not a coalesced call (it returns on its own): then
		// the slots go, and what queued rides one pipeline.
		var err error
		queued := func() bool { _, q, _ := lock.CoalescerLoad(r.c); return q > 0 }
		returned := false
		for !returned && !queued() {
			select {
			case err = <-done:
				returned = true
			case <-time.After(time.Millisecond):
			}
		}
		r.openFiller()
		if returned {
			return time.Since(start), 0, err
		}
	}
	err = <-done
	return time.Since(start), 0, err
}

// TestDeadline_everyVerbOfEveryKind: every verb of every kind returns by
// its ctx's deadline plus deadlineSlack against a SIGSTOPped server
// (connections open, no reply), with coalescing on and off (on: the call
// rides a shared pipeline that gets no reply) and with go-redis's
// ContextTimeoutEnabled on and off. The cases of one combination run at
// once, on a server of their own.
func TestDeadline_everyVerbOfEveryKind(t *testing.T) {
	t.Parallel()
	for _, cte := range []bool{false, true} {
		for _, co := range []bool{false, true} {
			t.Run(fmt.Sprintf("cte=%v/coalesce=%v", cte, co), func(t *testing.T) {
				srv := redistest.Start(t, redistest.Config{})
				var runs []*deadlineRun
				for _, dc := range deadlineCases() {
					runs = append(runs, prepare(t, srv, dc, cte, co))
				}
				must(t, "Pause()", srv.Pause())
				t.Cleanup(func() { srv.Resume() }) // before the Clients close
				runAll(t, runs)
			})
		}
	}
}

// runAll runs every case of runs at once and fails t for each that
// returned later than deadlineSlack past its deadline, or past the moment
// a goroutine sleeping until then ran again when the machine was slower.
func runAll(t *testing.T, runs []*deadlineRun) {
	t.Helper()
	type result struct {
		took, sleeper time.Duration
		err           error
	}
	results := make([]result, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() {
			took, sleeper, err := r.run(context.Background())
			results[i] = result{took, sleeper, err}
		})
	}
	wg.Wait()
	for i, r := range runs {
		res := results[i]
		if errors.Is(res.err, errSlotsNotFilled) {
			t.Errorf("%s: %v", r.name, res.err)
			continue
		}
		if want := max(verbDeadline, res.sleeper) + deadlineSlack; res.took > want {
			t.Errorf("%s with a %v ctx returned after %v, want by %v (a sleeper woke after %v; error %v)",
				r.name, verbDeadline, res.took, want, res.sleeper, res.err)
		}
	}
}
