package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/kindtest"
)

// gateCalls adds to rdb a Gate that holds every command sent alone until
// its Release, so a test can pile calls up behind the coalescer's sends,
// and a PipeLog that records how they go out. (go-redis sends a new
// connection's handshake as a pipeline; EVAL replays after NOSCRIPT are not
// counted either.)
func gateCalls(t *testing.T, rdb redis.UniversalClient) (*hooktest.Gate, *hooktest.PipeLog) {
	t.Helper()
	g, log := hooktest.New(t, hooktest.Config{On: hooktest.Calls, Armed: true}), &hooktest.PipeLog{}
	rdb.AddHook(log)
	rdb.AddHook(g)
	return g, log
}

// waitLoad waits until the Client's coalescers have n calls out or queued,
// and returns the lengths of the queues that are not empty.
func waitLoad(t *testing.T, c *lock.Client, n int) (out int, queues []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, queued, queues := lock.CoalescerLoad(c)
		if out+queued == n {
			return out, queues
		}
		if time.Now().After(deadline) {
			t.Fatalf("coalescer has %d out and %d queued, want %d in all", out, queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCoalescing piles acquires up behind the coalescer's sends and checks
// that every queued call goes out in one pipeline (two past maxBatch), that
// each gets its own correct reply, and that pipelined EVALSHA calls meeting
// an emptied script cache are replayed by EVAL.
func TestCoalescing(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		for _, n := range []int{24, 300} {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				rdb, c := warmClient(t, tg)
				// Empty the script cache: the pipelined EVALSHAs below meet
				// NOSCRIPT.
				must(t, "SCRIPT FLUSH", rdb.ScriptFlush(context.Background()).Err())
				pileUp(t, rdb, c, n)
			})
		}
	})
}

// TestClusterCoalescing: on a real 3-master Redis Cluster a pipeline of
// queued calls is split by node (each new to the script after the first,
// so replayed by EVAL) and every call gets its own reply.
func TestClusterCoalescing(t *testing.T) {
	t.Parallel()
	rdb := sharedCluster(t).Client(t)
	rec := &kindtest.Recorder{Renewals: true}
	c := newClient(t, rdb, lock.WithObserver(rec))
	warmUp(t, c, rec)
	log, queues := pileUp(t, rdb, c, 48)
	if len(queues) != 3 {
		t.Fatalf("queues %v: want one per master", queues)
	}
	for i, keys := range log.Keys() {
		nodes := map[string]bool{}
		for _, k := range keys {
			node, err := rdb.MasterForKey(context.Background(), k)
			must(t, "MasterForKey()", err)
			nodes[node.Options().Addr] = true
		}
		if len(nodes) != 1 {
			t.Fatalf("pipeline %d went to %d masters, want 1", i, len(nodes))
		}
	}
}

// pileUp starts n TryAcquires on distinct keys while every single call is
// held at a gate, opens it once all n are out or queued, and checks that
// the queue went out in pipelines of at most 256 and that each lock holds
// its own token. It returns the hook and the queues' lengths.
func pileUp(t *testing.T, rdb redis.UniversalClient, c *lock.Client, n int) (*hooktest.PipeLog, []int) {
	t.Helper()
	ctx := context.Background()
	g, log := gateCalls(t, rdb)
	locks := make([]*lock.Lock, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		locks[i] = c.NewLock(fmt.Sprintf("%s:%d", keyFor(t), i))
		wg.Go(func() { errs[i] = tryOK(ctx, locks[i]) })
	}
	out, queues := waitLoad(t, c, n)
	g.Release()
	wg.Wait()
	for i, err := range errs {
		must(t, fmt.Sprintf("TryAcquire(%d)", i), err)
	}
	// Each queue (one per node on a cluster) goes out when the first send
	// of its lane returns, in chunks of at most 256; each call meeting
	// NOSCRIPT is then replayed by EVAL.
	var want []int
	for _, q := range queues {
		for left := q; left > 0; left -= min(left, 256) {
			want = append(want, min(left, 256))
		}
	}
	pipes := log.Sizes()
	slices.Sort(pipes)
	slices.Sort(want)
	if !slices.Equal(pipes, want) {
		t.Fatalf("%d out, queues %v: pipelines %v, want %v", out, queues, pipes, want)
	}
	for i, l := range locks {
		got, err := rdb.Get(ctx, lockKey(l.Key())).Result()
		if err != nil || got != l.Token() {
			t.Fatalf("lock %d holds %q, %v; want its token %q", i, got, err, l.Token())
		}
		must(t, fmt.Sprintf("Release(%d)", i), l.Release(ctx))
	}
	return log, queues
}

// warmClient returns a new go-redis client and a lock Client over it that
// has acquired and released once (warmUp): the scripts have been sent
// whole, the force channel is subscribed, and no hold is left for the
// renewal loop.
func warmClient(t *testing.T, tg *target, opts ...lock.Option) (*redis.Client, *lock.Client) {
	t.Helper()
	rdb := tg.newRDB(t)
	rec := &kindtest.Recorder{Renewals: true}
	c := newClient(t, rdb, append([]lock.Option{lock.WithObserver(rec)}, opts...)...)
	warmUp(t, c, rec)
	return rdb, c
}

// warmUp acquires and releases a lock of c, whose Observer is rec. A
// Client's first hold is asked about in Redis once its force channel's
// subscription is confirmed (a force-release before then went unheard): a
// renewal in the background, which warmUp lets pass before the release, so
// that it counts in none of the test's calls. The holds after it are not
// asked about: the channel was confirmed before their acquires were sent.
func warmUp(t *testing.T, c *lock.Client, rec *kindtest.Recorder) {
	t.Helper()
	ctx := context.Background()
	warm := c.NewLock(keyFor(t) + ":warm")
	must(t, "warm-up TryAcquire()", tryOK(ctx, warm))
	waitUntil(t, "the warm-up hold's check", func() bool { return slices.Contains(rec.Kinds(), lock.EventRenewed) })
	must(t, "warm-up Release()", warm.Release(ctx))
}

// tryOK is TryAcquire that counts a lock held by someone else as an error.
func tryOK(ctx context.Context, l *lock.Lock) error {
	ok, err := l.TryAcquire(ctx)
	if err == nil && !ok {
		err = errors.New("not acquired")
	}
	return err
}

// TestCoalescingOff: with WithCoalescing(false), on the Client or on one
// lock, every call goes out on its own at once, however many are out.
func TestCoalescingOff(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		for _, perLock := range []bool{false, true} {
			t.Run(fmt.Sprintf("perLock=%v", perLock), func(t *testing.T) {
				ctx := context.Background()
				var rdb *redis.Client
				var c *lock.Client
				var opts []lock.Option
				if perLock {
					rdb, c = warmClient(t, tg)
					opts = append(opts, lock.WithCoalescing(false))
				} else {
					rdb, c = warmClient(t, tg, lock.WithCoalescing(false))
				}
				g, log := gateCalls(t, rdb)
				const n = 16
				var wg sync.WaitGroup
				errs := make([]error, n)
				for i := range n {
					l := c.NewLock(fmt.Sprintf("%s:%d", keyFor(t), i), opts...)
					wg.Go(func() { errs[i] = tryOK(ctx, l) })
				}
				deadline := time.Now().Add(10 * time.Second)
				for {
					waiting := g.Waiting()
					if waiting == n {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d calls at the gate, want all %d sent at once", waiting, n)
					}
					time.Sleep(time.Millisecond)
				}
				g.Release()
				wg.Wait()
				for i, err := range errs {
					must(t, fmt.Sprintf("TryAcquire(%d)", i), err)
				}
				if pipes := log.Sizes(); len(pipes) != 0 {
					t.Fatalf("pipelines %v, want none", pipes)
				}
			})
		}
	})
}

// TestCoalescingQueuedCancel: a call whose ctx ends while it waits in the
// queue returns at once with ctx's cause, and is never sent.
func TestCoalescingQueuedCancel(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb, c := warmClient(t, tg)
		g, log := gateCalls(t, rdb)

		// Fill every send slot with calls held at the gate, and queue one.
		var wg sync.WaitGroup
		out := 0
		for n := 0; ; n++ {
			wg.Go(func() { _ = tryOK(ctx, c.NewLock(fmt.Sprintf("%s:%d", keyFor(t), n))) })
			o, q := waitLoad(t, c, n+1)
			if len(q) > 0 {
				out = o
				break
			}
		}

		cause := errors.New("caller gave up")
		cctx, cancel := context.WithCancelCause(ctx)
		l := c.NewLock(keyFor(t) + ":cancelled")
		done := make(chan error, 1)
		go func() {
			ok, err := l.TryAcquire(cctx)
			if ok {
				err = errors.New("acquired")
			}
			done <- err
		}()
		waitLoad(t, c, out+2)
		cancel(cause)
		var err error
		select {
		case err = <-done:
		case <-time.After(3 * time.Second):
			// An undo of the unsent call would wait in the queue for its
			// own timeout (5s): nothing must be sent for a call never sent.
			t.Fatal("TryAcquire did not return within 3s of its ctx's end while every send was held")
		}
		if !errors.Is(err, cause) {
			t.Fatalf("TryAcquire with a cancelled ctx = %v, want %v", err, cause)
		}
		if _, q, _ := lock.CoalescerLoad(c); q != 1 {
			t.Fatalf("%d calls queued after the cancelled one left, want 1", q)
		}
		g.Release()
		wg.Wait()
		// Only the other queued call went out: the cancelled one was not
		// sent, nor was an undo of it.
		if pipes := log.Sizes(); !slices.Equal(pipes, []int{1}) {
			t.Fatalf("pipelines %v, want [1]", pipes)
		}
		if n, err := rdb.Exists(ctx, lockKey(l.Key())).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS of the cancelled lock = %d, %v; want 0", n, err)
		}
	})
}

// scriptGates holds a Client's script calls: those sent alone until
// single is released, those in a pipeline until pipes is.
type scriptGates struct {
	single, pipes *hooktest.Gate
}

// addScriptGates adds scriptGates to rdb; its gates open at cleanup, also
// when the test fails.
func addScriptGates(t *testing.T, rdb *redis.Client) scriptGates {
	g := scriptGates{
		single: hooktest.New(t, hooktest.Config{On: hooktest.Calls, Match: hooktest.AnyScript, Armed: true}),
		pipes:  hooktest.New(t, hooktest.Config{On: hooktest.Pipelines, Match: hooktest.AnyScript, Armed: true}),
	}
	rdb.AddHook(g.single)
	rdb.AddHook(g.pipes)
	return g
}

// eventually fails the test unless cond holds within 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func isScriptCall(cmd redis.Cmder) bool { return hooktest.AnyScript(cmd) }

// ridePipeline starts calls while every send slot of c is held at g's
// single gate, so that they queue up; then it lets the slots go, and
// returns once the queued calls are out in one pipeline, held at g's
// pipeline gate. The fillers' locks are released at cleanup.
func ridePipeline(t *testing.T, c *lock.Client, g scriptGates, calls ...func()) {
	t.Helper()
	ctx := context.Background()
	var fillers []*lock.Lock
	var wg sync.WaitGroup
	for i := range lock.CoalescerLimit() {
		l := c.NewLock(fmt.Sprintf("%s:filler:%d", keyFor(t), i))
		fillers = append(fillers, l)
		wg.Go(func() { _ = tryOK(ctx, l) })
	}
	waitLoad(t, c, len(fillers))
	for _, call := range calls {
		go call()
	}
	waitLoad(t, c, len(fillers)+len(calls))
	g.single.Release()
	wg.Wait()
	eventually(t, "the queued calls go out as a pipeline", func() bool { return g.pipes.Matched() > 0 })
	t.Cleanup(func() {
		for _, l := range fillers {
			_ = l.Release(ctx)
		}
	})
}

// TestCoalescing_sentCallLeavesAtItsCtxEnd: a TTL and a Release riding a
// shared pipeline that gets no reply return when their own ctx ends, with
// ctx's error, not when the pipeline does; the pipeline still finishes in
// the background (the release takes effect once it goes through).
func TestCoalescing_sentCallLeavesAtItsCtxEnd(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb, c := warmClient(t, tg)
		held := c.NewLock(keyFor(t) + ":ttl")
		must(t, "Acquire()", held.Acquire(ctx))
		released := c.NewLock(keyFor(t) + ":release")
		must(t, "Acquire()", released.Acquire(ctx))
		g := addScriptGates(t, rdb)
		ttlCtx, endTTL := context.WithCancel(ctx)
		relCtx, endRel := context.WithCancel(ctx)
		ttlErr, relErr := make(chan error, 1), make(chan error, 1)
		ridePipeline(t, c, g,
			func() { _, err := held.TTL(ttlCtx); ttlErr <- err },
			func() { relErr <- released.Release(relCtx) })
		endTTL()
		endRel()
		for name, ch := range map[string]chan error{"TTL()": ttlErr, "Release()": relErr} {
			select {
			case err := <-ch:
				wantErr(t, name+" riding a held pipeline", err, context.Canceled)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s did not return within 5s of its ctx's end while its pipeline was held", name)
			}
		}
		if n := g.pipes.Matched(); n != 1 {
			t.Fatalf("%d pipelines held, want the one the calls rode", n)
		}
		g.pipes.Release()
		eventually(t, "the release that left its pipeline takes effect once the pipeline goes through",
			func() bool { return tg.rdb.Exists(ctx, lockKey(released.Key())).Val() == 0 })
		d, err := held.TTL(ctx)
		if err != nil || d <= 0 {
			t.Fatalf("TTL() once the pipeline is through = %v, %v; want the time left", d, err)
		}
		must(t, "Release()", held.Release(ctx))
	})
}

// TestCoalescing_undoWaitsForAnUnansweredAcquire: an acquire that left its
// shared pipeline at its ctx's end has an unknown outcome, and its undo
// waits for that pipeline: when the acquire lands late, the undo still
// comes after it and the key is left free.
func TestCoalescing_undoWaitsForAnUnansweredAcquire(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb, c := warmClient(t, tg)
		g := addScriptGates(t, rdb)
		l := c.NewLock(keyFor(t))
		acqCtx, endAcq := context.WithCancel(ctx)
		type result struct {
			ok  bool
			err error
		}
		done := make(chan result, 1)
		ridePipeline(t, c, g, func() {
			ok, err := l.TryAcquire(acqCtx)
			done <- result{ok, err}
		})
		endAcq()
		eventually(t, "the acquire leaves its held pipeline at its ctx's end",
			func() bool { return lock.UnansweredAcquires(c) > 0 })
		g.pipes.Release() // the acquire lands now, after its caller left
		var r result
		select {
		case r = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("TryAcquire did not return once the pipeline went through")
		}
		if r.ok {
			t.Fatal("TryAcquire() = true after its ctx ended before the reply, want false")
		}
		wantErr(t, "TryAcquire()", r.err, context.Canceled)
		// Once the pipeline is done, the late acquire has landed: the undo
		// must have come after it.
		eventually(t, "the pipeline with the acquire finishes", func() bool { return lock.UnansweredAcquires(c) == 0 })
		tg.wantFree(t, l.Key(), "after an acquire of unknown outcome was undone")
	})
}

// panicHook panics in every acquire while armed, single or pipelined, as
// a user's broken hook would. (Only acquires: the undo the engine then
// sends in the background must go through, or the panic would take the
// test binary down from a goroutine no test can recover.)
type panicHook struct{ armed atomic.Bool }

// isAcquire reports whether cmd is an acquire script call: the only one
// whose keys include the fence counter.
func isAcquire(cmd redis.Cmder) bool {
	return isScriptCall(cmd) && slices.ContainsFunc(cmd.Args(), func(a any) bool {
		s, ok := a.(string)
		return ok && strings.HasSuffix(s, ":fence")
	})
}

func (h *panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() && isAcquire(cmd) {
			panic("hook panicked")
		}
		return next(ctx, cmd)
	}
}

func (h *panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.armed.Load() && slices.ContainsFunc(cmds, isAcquire) {
			panic("hook panicked")
		}
		return next(ctx, cmds)
	}
}

// tryRecover runs TryAcquire of l and reports its error, or the panic it
// passed on as an error.
func tryRecover(ctx context.Context, l *lock.Lock) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return tryOK(ctx, l)
}

// TestCoalescing_panickingClient: a go-redis hook that panics reaches the
// caller whose call it was sent for, and costs nothing more: the send slot
// goes back (after as many panics as there are slots, calls still go out),
// and a call riding a pipeline whose client panicked gets an error instead
// of waiting forever or reading an empty reply as an answer.
func TestCoalescing_panickingClient(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb, c := warmClient(t, tg)
		h := &panicHook{}
		rdb.AddHook(h)
		h.armed.Store(true)
		for i := range lock.CoalescerLimit() + 1 {
			err := tryRecover(ctx, c.NewLock(fmt.Sprintf("%s:single:%d", keyFor(t), i)))
			if err == nil || !strings.Contains(err.Error(), "hook panicked") {
				t.Fatalf("single call %d with a panicking hook: %v, want the panic", i, err)
			}
		}
		h.armed.Store(false)
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		after := c.NewLock(keyFor(t) + ":after")
		must(t, "TryAcquire() after the panics", tryOK(tctx, after))
		must(t, "Release()", after.Release(ctx))

		// A pipeline: hold every slot at a gate, queue two calls, arm the
		// hook, let the slots go; the queue goes out as one pipeline. On a
		// Client of its own: each panicked call above has its attempt undone
		// in the background, and those undos, still going out through c's
		// coalescer, would count in its load.
		c = newClient(t, rdb)
		g := addScriptGates(t, rdb)
		g.pipes.Release()
		errs := make(chan error, 2)
		var fillers []*lock.Lock
		var wg sync.WaitGroup
		for i := range lock.CoalescerLimit() {
			l := c.NewLock(fmt.Sprintf("%s:filler:%d", keyFor(t), i))
			fillers = append(fillers, l)
			wg.Go(func() { _ = tryOK(ctx, l) })
		}
		waitLoad(t, c, len(fillers))
		for i := range 2 {
			l := c.NewLock(fmt.Sprintf("%s:queued:%d", keyFor(t), i))
			go func() { errs <- tryRecover(ctx, l) }()
		}
		waitLoad(t, c, len(fillers)+2)
		h.armed.Store(true)
		g.single.Release()
		var panicked, failed int
		for range 2 {
			select {
			case err := <-errs:
				switch {
				case err == nil:
					t.Fatal("a call on a pipeline whose client panicked succeeded")
				case strings.Contains(err.Error(), "hook panicked"):
					panicked++
				default:
					failed++
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a call queued on a pipeline whose client panicked did not return within 5s")
			}
		}
		if panicked != 1 || failed != 1 {
			t.Fatalf("pipeline of 2: %d got the panic, %d an error; want the leader and the follower one each", panicked, failed)
		}
		h.armed.Store(false)
		wg.Wait()
		for _, l := range fillers {
			_ = l.Release(ctx)
		}
		must(t, "TryAcquire() after the pipeline's panic", tryOK(tctx, c.NewLock(keyFor(t)+":after2")))
	})
}

// TestCoalescing_panickingPipelineLedFromBackground: a shared pipeline led
// from a goroutine of the coalescer's (its leader may leave at the end of
// its ctx), whose client panics, gives every call riding it an error
// matching ErrPanicked, logs the panic once at Error level, and passes the
// send slot on; the process goes on.
func TestCoalescing_panickingPipelineLedFromBackground(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := realTarget(t).newRDB(t)
	logs := &logRecorder{}
	c := newClient(t, rdb, lock.WithLogger(slog.New(logs)))
	warm := c.NewLock(keyFor(t) + ":warm")
	must(t, "warm-up TryAcquire()", tryOK(ctx, warm))
	must(t, "warm-up Release()", warm.Release(ctx))
	g := addScriptGates(t, rdb)
	g.pipes.Release()
	h := &kindtest.PanicWhen{Match: func(cmds []redis.Cmder) bool { return len(cmds) > 1 && slices.ContainsFunc(cmds, isAcquire) }}
	rdb.AddHook(h)
	h.Armed.Store(true)
	// With a deadline, the pipeline's leader may leave: it is sent from
	// the coalescer's own goroutine.
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	errs := make(chan error, 2)
	call := func(i int) func() {
		l := c.NewLock(fmt.Sprintf("%s:queued:%d", keyFor(t), i))
		return func() { errs <- tryOK(tctx, l) }
	}
	ridePipeline(t, c, g, call(0), call(1))
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, lock.ErrPanicked) {
				t.Fatalf("TryAcquire() on a pipeline whose client panicked = %v, want an error matching ErrPanicked", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a call on a pipeline whose client panicked did not return within 5s")
		}
	}
	h.Armed.Store(false)
	wantPanicLogged(t, logs, "shared pipeline panicked")
	must(t, "TryAcquire() after the pipeline's panic", tryOK(tctx, c.NewLock(keyFor(t)+":after")))
}

// newWarmClient is newClient whose first hold's check (see warmUp) is
// over before it returns, for tests that cut or time a call of their own
// hold and must not meet that background renewal instead.
func newWarmClient(t *testing.T, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	rec := &kindtest.Recorder{Renewals: true}
	c := newClient(t, rdb, append(opts, lock.WithObserver(rec))...)
	warmUp(t, c, rec)
	return c
}
