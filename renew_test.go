package lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// scriptPipeline reports whether cmds carry a script call (go-redis also
// pipelines a new connection's handshake).
func scriptPipeline(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if n := strings.ToLower(c.Name()); n == "evalsha" || n == "eval" {
			return true
		}
	}
	return false
}

// TestExtend_shorterDuringRenewal: a renewal (TTL 3s) reaches Redis and
// its reply is held; meanwhile Extend(600ms) is called. It waits for the
// renewal's answer, so that the renewal cannot land after it. If that
// answer never comes, the hold is lost at the renewal's safety deadline
// and the Extend, never sent, returns ErrNotHeld; if it comes late, the
// Extend goes out then and the hold lives on with the short TTL.
func TestExtend_shorterDuringRenewal(t *testing.T) {
	const ttl, short = 3 * time.Second, 600 * time.Millisecond
	ctx := context.Background()
	t.Run("renewal unanswered", func(t *testing.T) {
		l, g, _ := renewalHeld(t, ttl)
		sent := time.Now()
		wantErr(t, "Extend()", l.Extend(ctx, short), lock.ErrNotHeld)
		if !isClosed(l.Lost()) {
			t.Fatal("Extend() returned ErrNotHeld with Lost() open")
		}
		t.Logf("lost %v after Extend(%v) was called", time.Since(sent), short)
		var le *lock.LostError
		if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossUnanswered {
			t.Fatalf("LostErr() = %v, want unanswered", l.LostErr())
		}
		g.Release()
	})
	t.Run("renewal answered late", func(t *testing.T) {
		l, g, waiting := renewalHeld(t, ttl)
		done := make(chan error, 1)
		go func() { done <- l.Extend(ctx, short) }()
		select {
		case err := <-done:
			t.Fatalf("Extend() = %v with the renewal's reply held, want it to wait for that reply", err)
		case <-waiting:
		}
		g.Release()
		must(t, "Extend()", <-done)
		// Renewed with the short TTL, the hold lives on: watch it for
		// several of those TTLs.
		select {
		case <-l.Lost():
			t.Fatalf("Lost() closed: %v", l.LostErr())
		case <-time.After(5 * short):
		}
		d, err := l.TTL(ctx)
		must(t, "TTL()", err)
		if d > short {
			t.Fatalf("TTL() = %v after Extend(%v), want the short TTL kept by renewals", d, short)
		}
	})
}

// renewalHeld acquires a lock with ttl on a real server and returns once its
// first renewal has reached Redis with its reply held at the gate, which
// t.Cleanup opens before the Client closes. The channel closes when an
// Extend of the lock waits for that renewal's answer.
func renewalHeld(t *testing.T, ttl time.Duration) (*lock.Lock, *hooktest.Gate, <-chan struct{}) {
	t.Helper()
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	// The first script pipeline after Acquire is a renewal: one-shot calls
	// go alone.
	g := hooktest.New(t, hooktest.Config{On: hooktest.Pipelines, After: true, Match: hooktest.AnyScript, Nth: 1})
	rdb.AddHook(g)
	c := newClient(t, rdb)
	waiting, signal := waitSignal()
	lock.OnExtendWaits(c, signal)
	l := c.NewLock(keyFor(t), lock.WithTTL(ttl))
	t.Cleanup(g.Release) // before the Client closes: it waits for the renewal held
	must(t, "Acquire()", l.Acquire(context.Background()))
	g.Arm()
	select {
	case <-g.Held():
	case <-time.After(ttl):
		t.Fatalf("no renewal within the TTL %v", ttl)
	}
	return l, g, waiting
}

// A renewal whose reply is held back past the hold's safety deadline (the
// server is up and ran it; only the reply waits) is reported lost as
// unanswered, not unreachable: no connection failed. A server that is gone
// makes it unreachable (TestLost_serverKilled).
func TestRenewal_unansweredLossReason(t *testing.T) {
	t.Parallel()
	const ttl = 600 * time.Millisecond
	l, g, _ := renewalHeld(t, ttl)
	waitClosed(t, l.Lost(), 5*time.Second, "Lost()")
	var le *lock.LostError
	if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossUnanswered {
		t.Fatalf("LostErr() with the renewal's reply held = %v, want reason unanswered", l.LostErr())
	}
	if !errors.Is(l.LostErr(), lock.ErrLockLost) {
		t.Fatalf("LostErr() = %v, want it to match ErrLockLost", l.LostErr())
	}
	if !strings.Contains(l.LostErr().Error(), "(unanswered)") {
		t.Fatalf("LostErr() = %q, want it to say unanswered", l.LostErr())
	}
	g.Release()
}

// A renewal that comes back with a connection error (the server is gone,
// and go-redis retries neither the call nor the dial) is reported lost as unreachable, with that
// error.
func TestRenewal_refusedLossReason(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	o := srv.Options()
	o.MaxRetries, o.DialerRetries = -1, 1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	l := newClient(t, rdb).NewLock(keyFor(t), lock.WithTTL(600*time.Millisecond))
	must(t, "Acquire()", l.Acquire(context.Background()))
	srv.Kill()
	waitClosed(t, l.Lost(), 5*time.Second, "Lost()")
	var le *lock.LostError
	if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossUnreachable || le.Err == nil {
		t.Fatalf("LostErr() with the server gone = %v, want reason unreachable and the renewal's error", l.LostErr())
	}
}

// lateExtend is a go-redis hook modelling an Extend call cut at its
// deadline (as with ContextTimeoutEnabled) while its bytes are still on the
// wire: the first Extend call waits until its ctx ends and fails with a
// timeout without reaching Redis, and land sends a copy of it later. The
// first renewal pipeline after that goes through (closing renewed); later
// ones wait until the gate opens.
type lateExtend struct {
	renewed chan struct{}
	gate    chan struct{}
	once    sync.Once

	mu       sync.Mutex
	late     func() // sends the cut call's copy; nil before the cut
	renewals int
}

func (h *lateExtend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateExtend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScript(cmd, luascripts.Extend, luascripts.Sources[2]) {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		if h.late != nil {
			h.mu.Unlock()
			return next(ctx, cmd)
		}
		copied := redis.NewCmd(context.Background(), cmd.Args()...)
		h.late = func() { _ = next(context.Background(), copied) }
		h.mu.Unlock()
		<-ctx.Done()
		err := fmt.Errorf("read tcp: i/o timeout: %w", os.ErrDeadlineExceeded)
		cmd.SetErr(err)
		return err
	}
}

func (h *lateExtend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !scriptPipeline(cmds) {
			return next(ctx, cmds)
		}
		h.mu.Lock()
		cut := h.late != nil
		if cut {
			h.renewals++
		}
		n := h.renewals
		h.mu.Unlock()
		switch {
		case !cut:
			return next(ctx, cmds)
		case n == 1:
			err := next(ctx, cmds)
			close(h.renewed)
			return err
		}
		<-h.gate
		return next(ctx, cmds)
	}
}

// land sends the cut Extend's copy to Redis and waits for its reply.
func (h *lateExtend) land(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	fn := h.late
	h.mu.Unlock()
	if fn == nil {
		t.Fatalf("no Extend call was cut")
	}
	fn()
}

func (h *lateExtend) open() { h.once.Do(func() { close(h.gate) }) }

// TestRenewal_doesNotOutlastFailedShorterExtend: an Extend to a shorter TTL
// fails at its deadline while its call is still on the wire, and the
// renewal sent after the failure (with the old, longer TTL) is confirmed.
// The Extend's call then lands, and Redis lets the key go after the short
// TTL. With no later renewal answered, Lost() must close before the key is
// gone: the renewal's confirmation must not count on the longer TTL while
// a call with the shorter one may still land.
func TestRenewal_doesNotOutlastFailedShorterExtend(t *testing.T) {
	t.Parallel()
	const short = 3 * time.Second // the lock's TTL is the default 30s
	ctx := context.Background()
	tg := realTarget(t)
	must(t, "SCRIPT LOAD", luascripts.Extend.Load(ctx, tg.rdb).Err()) // renewals need no EVAL
	rdb := tg.newRDB(t)
	hook := &lateExtend{renewed: make(chan struct{}), gate: make(chan struct{})}
	rdb.AddHook(hook)
	key := keyFor(t)
	l := newClient(t, rdb).NewLock(key)
	t.Cleanup(hook.open) // before the Client closes: it waits for the renewal held
	must(t, "Acquire()", l.Acquire(ctx))

	ectx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := l.Extend(ectx, short); err == nil {
		t.Fatalf("Extend(%v) with its call cut = nil, want an error", short)
	}
	recv(t, hook.renewed, "the renewal after the failed Extend")
	hook.land(t) // the short Extend lands now, after the renewal
	if d := tg.rdb.PTTL(ctx, lockKey(key)).Val(); d > short {
		t.Fatalf("PTTL after the late Extend = %v, want at most %v", d, short)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !isClosed(l.Lost()) {
		if tg.rdb.Exists(ctx, lockKey(key)).Val() == 0 {
			t.Fatalf("Redis let the key go (the late Extend(%v)) while Lost() is open: another client can take it", short)
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lost() still open 10s after the late Extend(%v)", short)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("LostErr() = %v", l.LostErr())
}

// TestRenewal_clusterStalledMasterSparesOthers: on a 3-master cluster one
// master is stopped with SIGSTOP (its connections stay open, nothing
// answers). Its holds are reported lost by their deadline; the holds on the
// other masters are renewed on their own and stay held, in Lost() and in
// Redis, for several renewal periods past that. Every renewal pipeline goes
// to one master.
func TestRenewal_clusterStalledMasterSparesOthers(t *testing.T) {
	t.Parallel()
	const ttl = 1500 * time.Millisecond
	ctx := context.Background()
	// Without full coverage the healthy masters keep serving their slots
	// once the cluster marks the stopped one failed.
	cl := redistest.StartCluster(t, 3, 0, "--cluster-require-full-coverage", "no")
	opt := cl.ClusterOptions()
	// A call to the stopped master hangs for the whole test (until SIGCONT
	// at cleanup) rather than time out and be retried: only the renewal
	// loop's own watch ends it.
	opt.ReadTimeout, opt.MaxRedirects = time.Minute, -1
	rdb := redis.NewClusterClient(opt)
	t.Cleanup(func() { rdb.Close() })
	pipes := &hooktest.PipeLog{} // records the keys of each renewal pipeline
	rdb.AddHook(pipes)
	c := newClient(t, rdb)

	// Three holds on each master.
	locks := holdsPerMaster(t, cl, c, 3, ttl)
	master := map[string]*redistest.Server{} // by lock key
	for srv, ls := range locks {
		for _, l := range ls {
			master[lockKey(l.Key())] = srv
		}
	}

	var stalled *redistest.Server
	for srv := range locks {
		stalled = srv
		break
	}
	must(t, "SIGSTOP", stalled.Pause())
	stoppedAt := time.Now()
	t.Cleanup(func() { _ = stalled.Resume() }) // before Close, which waits for the hung calls

	// The stalled master's holds: lost by their deadline, at most a TTL
	// after their last renewal was sent, before the stop.
	for _, l := range locks[stalled] {
		select {
		case <-l.Lost():
		case <-time.After(time.Until(stoppedAt.Add(ttl))):
			t.Fatalf("hold on the stopped master: Lost() still open %v after SIGSTOP (TTL %v)", time.Since(stoppedAt), ttl)
		}
		var le *lock.LostError
		if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossUnanswered {
			t.Fatalf("hold on the stopped master: LostErr() = %v, want unanswered", l.LostErr())
		}
	}
	// The healthy masters' holds: still held, in Lost() and in Redis, three
	// TTLs after the stop.
	over := make(chan struct{})
	time.AfterFunc(time.Until(stoppedAt.Add(3*ttl)), func() { close(over) })
	for srv, ls := range locks {
		for _, l := range ls {
			if srv == stalled {
				continue
			}
			select {
			case <-l.Lost():
			case <-over:
			}
			if isClosed(l.Lost()) {
				t.Fatalf("hold on healthy master %s lost %v after another master stopped: %v", srv.Addr(), time.Since(stoppedAt), l.LostErr())
			}
			got, err := rdb.Get(ctx, lockKey(l.Key())).Result()
			if err != nil || got != l.Token() {
				t.Fatalf("GET %s = %q, %v; want our token %q", lockKey(l.Key()), got, err, l.Token())
			}
		}
	}
	for i, keys := range pipes.Keys() {
		to := map[*redistest.Server]bool{}
		for _, k := range keys {
			to[master[k]] = true
		}
		if len(to) != 1 {
			t.Fatalf("renewal pipeline %d went to %d masters, want 1: %v", i, len(to), keys)
		}
	}
}

// TestRenewal_failedShorterWriteLandingLate: the renewal rules take a write
// (Extend or renewal) whose call failed to have landed, if at all, before
// the failure was reported, so that a write sent afterwards overrides it.
// TCP does not promise that across connections: a segment still being
// retransmitted when go-redis times the call out (and closes the
// connection) reaches Redis all the same, possibly after the next call made
// on a fresh connection. Here the failed write sets the shorter TTL and
// lands after a confirmed write with the longer one; once the short TTL
// runs out and another client takes the key, the first handle's Lost() must
// already be closed.
func TestRenewal_failedShorterWriteLandingLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sha := []byte(luascripts.Extend.Hash())
	src := []byte("extend.lua")
	extendScript := func(p []byte) bool { return bytes.Contains(p, sha) || bytes.Contains(p, src) }

	// start returns a Client whose calls time out after 200ms and are not
	// resent by go-redis, its writes open to ls, and a client to the same
	// server for the test's own calls.
	start := func(t *testing.T, opts ...lock.Option) (*lock.Client, *lateSegments, *redis.Client) {
		t.Helper()
		srv := redistest.Start(t, redistest.Config{})
		opt := srv.Options()
		opt.ReadTimeout, opt.MaxRetries = 200*time.Millisecond, -1
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { rdb.Close() })
		ls := newLateSegments(t)
		rdb.AddHook(ls)
		obs := srv.Client(t)
		// Loaded: a held EVALSHA must not meet NOSCRIPT when it lands.
		must(t, "SCRIPT LOAD", luascripts.Extend.Load(ctx, obs).Err())
		return newClient(t, rdb, opts...), ls, obs
	}
	// landLate waits until no renewal is out, lets the held write land,
	// and has another client try the key once its short TTL has run out.
	landLate := func(t *testing.T, l *lock.Lock, ls *lateSegments, obs *redis.Client, short time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ls.out.Load() > 0; {
			if time.Now().After(deadline) {
				t.Fatal("a renewal is still out after 5s")
			}
			time.Sleep(time.Millisecond)
		}
		ls.deliver()
		takeOver(t, newClient(t, obs), obs, l, short+2*time.Second,
			fmt.Sprintf("the failed write (TTL %v) landed late", short))
	}

	t.Run("extend", func(t *testing.T) {
		// TTL 30s. Extend(1s) fails on its read timeout while its bytes
		// are still on the wire; the renewal sent at once after the
		// failure (TTL 30s) is answered; then the Extend lands.
		const short = time.Second
		c, ls, obs := start(t)
		l := c.NewLock(keyFor(t), lock.WithTTL(30*time.Second))
		must(t, "Acquire()", l.Acquire(ctx))
		ls.holdNext(extendScript)
		before := ls.answered.Load()
		if err := l.Extend(ctx, short); err == nil {
			t.Fatal("Extend() = nil, want its read timeout")
		}
		for deadline := time.Now().Add(5 * time.Second); ls.answered.Load() == before; {
			if time.Now().After(deadline) {
				t.Fatal("no renewal after the failed Extend")
			}
			time.Sleep(time.Millisecond)
		}
		landLate(t, l, ls, obs, short)
	})

	t.Run("renewal", func(t *testing.T) {
		// TTL 3s. The renewal at 1s fails on its read timeout while its
		// bytes are still on the wire; Extend(30s) is sent at once (the
		// retry is due 250ms later) and confirmed; then the renewal lands.
		const ttl = 3 * time.Second
		failed := make(chan struct{}, 1)
		c, ls, obs := start(t, lock.WithObserver(lock.ObserverFunc(func(e lock.Event) {
			if e.Kind == lock.EventRenewalFailed {
				select {
				case failed <- struct{}{}:
				default:
				}
			}
		})))
		l := c.NewLock(keyFor(t), lock.WithTTL(ttl))
		ls.holdNext(extendScript)
		must(t, "Acquire()", l.Acquire(ctx))
		select {
		case <-failed:
		case <-time.After(ttl):
			t.Fatal("no failed renewal within the TTL")
		}
		must(t, "Extend()", l.Extend(ctx, 30*time.Second))
		landLate(t, l, ls, obs, ttl)
	})
}

// TestRenewal_panickingHookLosesHoldInsteadOfCrashing: a go-redis hook that
// panics in every renewal call (on the renewal loop's goroutines, where no
// caller could recover it) does not take the process down: each call fails
// and is retried, the panic is logged at Error level with its stack, and
// the hold is lost at its safety deadline with an error that says the call
// panicked.
func TestRenewal_panickingHookLosesHoldInsteadOfCrashing(t *testing.T) {
	t.Parallel()
	const ttl = 600 * time.Millisecond
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	h := &kindtest.PanicWhen{Match: scriptPipeline}
	rdb.AddHook(h)
	logs := &logRecorder{}
	l := newClient(t, rdb, lock.WithLogger(slog.New(logs))).NewLock(keyFor(t), lock.WithTTL(ttl))
	must(t, "Acquire()", l.Acquire(context.Background()))
	h.Armed.Store(true) // renewals go as pipelines; the acquire went alone
	waitClosed(t, l.Lost(), 5*time.Second, "Lost()")
	h.Armed.Store(false)
	err := l.LostErr()
	if !errors.Is(err, lock.ErrLockLost) || !errors.Is(err, lock.ErrPanicked) || !strings.Contains(err.Error(), "hook panicked") {
		t.Fatalf("LostErr() = %v, want a loss matching ErrLockLost and ErrPanicked that names the panic", err)
	}
	wantPanicLogged(t, logs, "renewal call panicked")
}

// TestExtend_panickingHookKeepsRenewalWorking: an Extend whose call panics
// on the caller's goroutine (a go-redis hook; a ctx without deadline runs
// the call there) hands the panic to the caller, and the hold, which Redis
// still has, goes on being renewed: the Extend counts as a write of
// unknown outcome, not as one still out, which would keep every renewal
// from moving the hold's deadline until the hold was lost. So too with a
// ctx that has a deadline (see eachCtx).
func TestExtend_panickingHookKeepsRenewalWorking(t *testing.T) {
	t.Parallel()
	eachCtx(t, testExtendPanickingHookKeepsRenewalWorking)
}

func testExtendPanickingHookKeepsRenewalWorking(t *testing.T, ctx context.Context) {
	const ttl = 300 * time.Millisecond
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	h := &kindtest.PanicWhen{Match: func(cmds []redis.Cmder) bool {
		return len(cmds) == 1 && strings.Contains(fmt.Sprint(cmds[0].Args()), " 777 ") // the Extend's TTL
	}}
	rdb.AddHook(h)
	var scripts atomic.Int64
	rdb.AddHook(kindtest.SeeCommands(func(cmd redis.Cmder) {
		if kindtest.ScriptKeys(cmd) != nil {
			scripts.Add(1)
		}
	}))
	l := newClient(t, rdb).NewLock(keyFor(t), lock.WithTTL(ttl))
	must(t, "Acquire()", l.Acquire(ctx))
	h.Armed.Store(true)
	mustPanic(t, "Extend()", "the hook's panic", func() {
		_ = l.Extend(ctx, 777*time.Millisecond)
	})
	h.Armed.Store(false)
	// Twelve renewals (one every TTL/3 at most) take 1.2s at least: past
	// the deadline the Extend itself would have set, which the renewals
	// may not move the hold's past while the Extend counts as out.
	renewals := scripts.Load() + 12
	for deadline := time.Now().Add(10 * time.Second); scripts.Load() < renewals; {
		select {
		case <-l.Lost():
			t.Fatalf("hold lost after the Extend panicked: %v; want it renewed as before", l.LostErr())
		case <-time.After(5 * time.Millisecond): // polls a count; opens no window
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals in 10s after the Extend panicked, want 12", scripts.Load()-renewals+12)
		}
	}
	must(t, "Release()", l.Release(ctx))
}

// TestRenewal_panickingObserverStillReportsLoss: an Observer that panics
// when told of a loss the renewal loop found (on its goroutine, where no
// caller could recover it) does not take the process down, nor keep the
// loss from Lost(): the panic is logged at Error level with its stack.
func TestRenewal_panickingObserverStillReportsLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	logs := &logRecorder{}
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventLost {
			panic("hook panicked")
		}
	})
	c := newClient(t, rdb, lock.WithLogger(slog.New(logs)), lock.WithObserver(obs))
	l := c.NewLock(keyFor(t), lock.WithTTL(600*time.Millisecond))
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "DEL", rdb.Del(ctx, lockKey(l.Key())).Err()) // the next renewal finds the key gone
	waitClosed(t, l.Lost(), 5*time.Second, "Lost()")
	var le *lock.LostError
	if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossVanished {
		t.Fatalf("LostErr() = %v, want reason vanished", l.LostErr())
	}
	eventually(t, "the Observer's panic is logged", func() bool {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		return slices.ContainsFunc(logs.records, func(r slog.Record) bool { return r.Level == slog.LevelError })
	})
	wantPanicLogged(t, logs, "loss report panicked")
}
