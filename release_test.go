package lock_test

import (
	"context"
	"errors"
	"fmt"
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

// TestReleaseModes runs the lock's life cycle in both release modes, on both
// targets: one table, both modes.
func TestReleaseModes(t *testing.T) {
	for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
		t.Run(mode.String(), func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg *target) {
				ctx := context.Background()
				c := newWarmClient(t, tg.rdb, lock.WithReleaseMode(mode))
				key := keyFor(t)

				a := c.NewLock(key, lock.WithTTL(5*time.Second))
				must(t, "Acquire()", a.Acquire(ctx))
				if a.Fence() < 1 {
					t.Fatalf("Fence() = %d, want >= 1", a.Fence())
				}
				b := c.NewLock(key)
				if ok, err := b.TryAcquire(ctx); ok || err != nil {
					t.Fatalf("TryAcquire() on a held key = %v, %v, want false, nil", ok, err)
				}
				must(t, "Extend()", a.Extend(ctx, time.Minute))
				d, err := a.TTL(ctx)
				must(t, "TTL()", err)
				if d <= 5*time.Second || d > time.Minute {
					t.Fatalf("TTL() after Extend(1m) = %v, want in (5s, 1m]", d)
				}

				// A waiter with a long backoff is woken by the release's publish.
				done := make(chan error, 1)
				go func() { done <- b.Acquire(ctx) }()
				time.Sleep(50 * time.Millisecond)
				must(t, "Release()", a.Release(ctx))
				select {
				case err := <-done:
					must(t, "waiter Acquire()", err)
				case <-time.After(10 * time.Second):
					t.Fatal("waiter not woken")
				}
				if b.Fence() <= a.Fence() {
					t.Fatalf("fence %d after %d, want larger", b.Fence(), a.Fence())
				}
				wantErr(t, "stale Release()", a.Release(ctx), lock.ErrNotHeld)
				wantErr(t, "stale Extend()", a.Extend(ctx, time.Second), lock.ErrNotHeld)
				_, err = a.TTL(ctx)
				wantErr(t, "stale TTL()", err, lock.ErrNotHeld)
				if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != b.Token() {
					t.Fatalf("stale calls touched the holder's key: %q, want %q", got, b.Token())
				}

				tg.expire(t, key)
				wantErr(t, "Release() after expiry", b.Release(ctx), lock.ErrNotHeld)
				if !isClosed(b.Lost()) {
					t.Fatal("Lost() open after Release found the hold gone")
				}
			})
		})
	}
}

func TestLock_reentrant(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		outer := c.NewLock(key, lock.WithOwner("job-7"))
		inner := c.NewLock(key, lock.WithOwner("job-7"))
		stranger := c.NewLock(key, lock.WithOwner("job-8"))
		plain := c.NewLock(key)
		must(t, "outer Acquire()", outer.Acquire(ctx))
		must(t, "inner Acquire()", inner.Acquire(ctx))
		if inner.Fence() != outer.Fence() || inner.Token() != "job-7" {
			t.Fatalf("inner hold: fence %d token %q, want the outer's fence %d and token job-7", inner.Fence(), inner.Token(), outer.Fence())
		}
		for name, l := range map[string]*lock.Lock{"other owner": stranger, "plain lock": plain} {
			if ok, err := l.TryAcquire(ctx); ok || err != nil {
				t.Fatalf("%s TryAcquire() = %v, %v, want false, nil", name, ok, err)
			}
		}
		must(t, "inner Release()", inner.Release(ctx))
		if ok, _ := stranger.TryAcquire(ctx); ok {
			t.Fatal("lock free while the outer hold remains")
		}
		if isClosed(outer.Lost()) {
			t.Fatal("inner release closed the outer hold's Lost()")
		}
		must(t, "outer Extend()", outer.Extend(ctx, time.Minute))
		must(t, "outer Release()", outer.Release(ctx))
		if tg.rdb.Exists(ctx, lockKey(key)).Val() != 0 {
			t.Fatal("key left after every re-entrant hold was released")
		}
		if ok, err := plain.TryAcquire(ctx); !ok || err != nil {
			t.Fatalf("plain TryAcquire() after the owner let go = %v, %v, want true, nil", ok, err)
		}
		// A re-entrant lock does not take a plain lock's key.
		if ok, err := stranger.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("owner TryAcquire() on a plain hold = %v, %v, want false, nil", ok, err)
		}
		must(t, "plain Release()", plain.Release(ctx))
	})
}

// TestLock_TTL_keyGone: TTL on a hold whose key is gone asks Redis, returns
// an error matching ErrNotHeld, and reports the hold lost, in both modes.
func TestLock_TTL_keyGone(t *testing.T) {
	t.Parallel()
	for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
		t.Run(mode.String(), func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg *target) {
				ctx := context.Background()
				c := newClient(t, tg.rdb, lock.WithReleaseMode(mode))
				key := keyFor(t)
				l := c.NewLock(key)
				must(t, "Acquire()", l.Acquire(ctx))
				tg.expire(t, key)

				_, err := l.TTL(ctx)
				wantErr(t, "TTL() on a deleted key", err, lock.ErrNotHeld)
				waitClosed(t, l.Lost(), time.Second, "Lost() after TTL() found the key gone")
				var lost *lock.LostError
				if !errors.As(l.LostErr(), &lost) || lost.Reason != lock.LossVanished {
					t.Fatalf("LostErr() = %v, want reason %v", l.LostErr(), lock.LossVanished)
				}
			})
		})
	}
}

// scriptCalls counts the calls (EVAL or EVALSHA, alone or in a pipeline) of
// one script, seen by a kindtest.SeeCommands hook.
type scriptCalls struct {
	script *redis.Script
	src    string
	n      atomic.Int32
}

func (h *scriptCalls) count(cmd redis.Cmder) {
	if args := cmd.Args(); len(args) > 1 {
		if s := fmt.Sprint(args[1]); s == h.script.Hash() || s == h.src {
			h.n.Add(1)
		}
	}
}

// TestRelease_endedHoldHandsNothingOver: a Release of a hold this handle
// already released asks Redis with a plain release: it hands nothing to the
// waiter of the same Client that now waits on the key (someone else's hold),
// and that waiter gets the lock when the real holder lets go.
func TestRelease_endedHoldHandsNothingOver(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	rdb := tg.newRDB(t)
	handoffs := &scriptCalls{script: luascripts.Handoff, src: luascripts.Sources[4]}
	rdb.AddHook(kindtest.SeeCommands(handoffs.count))
	c := newClient(t, rdb)
	a := c.NewLock(key)
	must(t, "Acquire()", a.Acquire(ctx))
	must(t, "Release()", a.Release(ctx))
	b := newClient(t, tg.rdb).NewLock(key)
	must(t, "other Client's Acquire()", b.Acquire(ctx))
	w := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
	done := startAcquire(t, c, w, 1)

	wantErr(t, "second Release()", a.Release(ctx), lock.ErrNotHeld)
	if n := handoffs.n.Load(); n != 0 {
		t.Fatalf("second Release() sent %d handoff calls, want 0: a released hold has nothing to hand over", n)
	}
	wantHeldBy(t, tg.rdb, b, "after the second Release, the holder's hold")
	must(t, "other Client's Release()", b.Release(ctx))
	must(t, "waiter Acquire()", recv(t, done, "waiter Acquire"))
	must(t, "waiter Release()", w.Release(ctx))
}

// TestRelease_cutReplyIsNotResent cuts the connection in the middle of a
// release's reply, after Redis has run it: alone, and inside a coalesced
// pipeline where the next call's reply is the one cut. go-redis would resend
// the call (or the whole pipeline); a release run twice frees a re-entrant
// owner's outer hold, and a plain release or handoff run twice reports our
// own release as a loss. The release must run once, its outcome reported as
// unknown (the Redis error), no loss reported, and a second Release must say
// ErrNotHeld without reporting one either.
func TestRelease_cutReplyIsNotResent(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"plain", "reentrant", "handoff", "watch"} {
		for _, shared := range []bool{false, true} {
			if kind == "watch" && shared {
				continue // script-free calls are not coalesced
			}
			name := kind + "/alone"
			if shared {
				name = kind + "/pipeline"
			}
			t.Run(name, func(t *testing.T) { cutRelease(t, kind, shared) })
		}
	}
}

func cutRelease(t *testing.T, kind string, shared bool) {
	ctx := context.Background()
	tg := realTarget(t)
	rdb := tg.newRDB(t)
	// g holds every command sent alone once armed, so a test can keep the
	// coalescer's sends out and queue calls behind them.
	cut, g := &cutReplies{}, hooktest.New(t, hooktest.Config{On: hooktest.Calls})
	rdb.AddHook(cut)
	rdb.AddHook(g)
	rec := &kindtest.Recorder{Renewals: true}
	c := newClient(t, rdb, lock.WithObserver(rec))
	warmUp(t, c, rec) // the first hold's check counts in no call below
	key := keyFor(t)

	var opts []lock.Option
	switch kind {
	case "reentrant":
		// An owner id no other call's write carries: the cut's marker.
		opts = append(opts, lock.WithOwner("owner-7f3a9c"))
	case "watch":
		opts = append(opts, lock.WithReleaseMode(lock.ReleaseWatch))
	}
	l := c.NewLock(key, opts...)
	must(t, "Acquire()", l.Acquire(ctx))
	var outer, waiter *lock.Lock
	waited := make(chan error, 1)
	switch kind {
	case "reentrant":
		outer = l
		l = c.NewLock(key, opts...)
		must(t, "inner Acquire()", l.Acquire(ctx))
	case "handoff":
		// A waiter of the same Client that only a release can wake. It
		// tries, subscribes, tries once more now that it listens, then
		// sleeps: wait for both attempts to have run on the server and the
		// waiter to be idle, so that no attempt of its own is out later.
		waiter = c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		before := tg.scriptCalls(t)
		go func() { waited <- waiter.Acquire(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for tg.scriptCalls(t)-before < 2 || lock.IdleWaiters(c, key) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("waiter not idle after two attempts: %d scripts run, %d idle waiters",
					tg.scriptCalls(t)-before, lock.IdleWaiters(c, key))
			}
			time.Sleep(time.Millisecond)
		}
	}

	// The release's write carries the token (the owner id in a
	// re-entrant hold's) or, in a transaction, the release's publish.
	marker := l.Token()
	if kind == "watch" {
		marker = "released"
	}
	const replyLen = 4 // ":1\r\n", ":2\r\n" (one re-entrant level), a one-digit fence
	n := 2             // alone: cut inside the release's own reply
	if kind == "watch" {
		n = len("+OK\r\n+QUEUED\r\n+QUEUED\r\n*2") // inside EXEC's reply
	}
	calls := 1
	var other *lock.Lock
	var otherDone chan error
	settle := func() {}
	if shared {
		// Hold every send slot with a call at the gate, queue the release
		// and then another lock's TTL behind them: they go out as one
		// pipeline, and the cut falls inside the second reply.
		other = c.NewLock(key + ":other")
		must(t, "other Acquire()", other.Acquire(ctx))
		filler := c.NewLock(key + ":filler")
		must(t, "filler Acquire()", filler.Acquire(ctx))
		g.Arm()
		defer g.Release() // also when the test fails: calls at the gate must end
		limit := lock.CoalescerLimit()
		fillers := make(chan error, limit)
		for range limit {
			go func() {
				_, err := filler.TTL(ctx)
				fillers <- err
			}()
		}
		waitLoad(t, c, limit)
		// The fillers' calls run once the gate opens; count them too.
		n, calls = replyLen+2, 2+limit
		otherDone = make(chan error, 1)
		settle = func() {
			<-otherDone
			for range limit {
				must(t, "filler TTL()", <-fillers)
			}
		}
	}

	before := tg.scriptCalls(t)
	cut.arm(marker, n)
	released := make(chan error, 1)
	go func() { released <- l.Release(ctx) }()
	if shared {
		waitLoad(t, c, lock.CoalescerLimit()+1)
		go func() {
			_, err := other.TTL(ctx)
			otherDone <- err
		}()
		waitLoad(t, c, lock.CoalescerLimit()+2)
		g.Release()
	}
	err := <-released
	settle()
	if cut.cut() != 1 {
		t.Fatalf("%d connections cut, want 1", cut.cut())
	}
	if kind != "handoff" && kind != "watch" {
		if got := tg.scriptCalls(t) - before; got != calls {
			t.Errorf("Redis ran %d scripts for a send of %d: the send was repeated", got, calls)
		}
	}
	t.Logf("Release() with its reply cut = %v", err)
	if err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release() with its reply cut = %v, want the connection's error (outcome unknown)", err)
	}
	if lost := l.LostErr(); lost != nil {
		t.Errorf("LostErr() = %v after our own release, want nil", lost)
	}

	switch kind {
	case "reentrant":
		wantTaken(t, c, key)
		if lost := outer.LostErr(); lost != nil {
			t.Fatalf("outer LostErr() = %v, want nil", lost)
		}
		must(t, "outer Release()", outer.Release(ctx))
	case "handoff":
		must(t, "waiter Acquire()", <-waited)
		if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != waiter.Token() {
			t.Fatalf("key holds %q, want the waiter's token %q", got, waiter.Token())
		}
		defer waiter.Release(ctx)
	}
	if kind != "handoff" {
		tg.wantFree(t, key, "after every hold was released")
	}
	wantErr(t, "second Release()", l.Release(ctx), lock.ErrNotHeld)
	if lost := l.LostErr(); lost != nil {
		t.Errorf("LostErr() = %v after a second Release, want nil", lost)
	}
}

// TestExtend_afterFailedReleaseNeverOutlivesKey: a Release whose call fails
// (here before it reaches Redis) takes the hold out of renewal and ends it,
// while Redis still has the key. An Extend on the handle then reaches Redis
// and is confirmed. If it returns nil, the hold is live again with the new
// TTL, so its Lost() must close before that TTL runs out: when another
// client takes the key, the first handle must not still look held. The
// same when the Extend is already out while the Release fails: Redis
// applies it at once, and a hook holds its reply until the Release has
// returned.
func TestExtend_afterFailedReleaseNeverOutlivesKey(t *testing.T) {
	t.Parallel()
	for _, inFlight := range []bool{false, true} {
		t.Run(fmt.Sprintf("inFlight=%v", inFlight), func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t, redistest.Config{})
			rdb := srv.Client(t)
			fail := &failReleases{}
			rdb.AddHook(fail)
			slow := &slowExtendReply{in: make(chan struct{}), open: make(chan struct{})}
			rdb.AddHook(slow)
			defer slow.release()
			l := newClient(t, rdb).NewLock(keyFor(t), lock.WithTTL(3*time.Second))
			must(t, "Acquire()", l.Acquire(ctx))
			const short = 600 * time.Millisecond
			extended := make(chan error, 1)
			what := fmt.Sprintf("Extend(%v) returned nil after a failed Release", short)
			if inFlight {
				what = fmt.Sprintf("Extend(%v), out while a Release failed, returned nil", short)
				slow.armed.Store(true)
				go func() { extended <- l.Extend(ctx, short) }()
				select {
				case <-slow.in: // applied in Redis; the reply is held
				case <-time.After(10 * time.Second):
					t.Fatal("Extend() never reached Redis")
				}
			}
			fail.armed.Store(true)
			if err := l.Release(ctx); err == nil {
				t.Fatal("Release() = nil, want the injected connection reset")
			}
			// The key is still ours in Redis, but the hold was given up.
			if d, err := l.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Errorf("TTL() after a failed Release = %v, %v, want ErrNotHeld", d, err)
			}
			if inFlight {
				slow.release()
			} else {
				go func() { extended <- l.Extend(ctx, short) }()
			}
			switch err := <-extended; {
			case errors.Is(err, lock.ErrNotHeld):
				return // refused: the hold was given up
			case err != nil:
				t.Fatalf("Extend() with a failed Release: %v, want nil or ErrNotHeld", err)
			}
			takeOver(t, newClient(t, srv.Client(t)), rdb, l, short+2*time.Second, what)
		})
	}
}

// slowExtendReply is a go-redis hook that, once armed, sends the next
// Extend call at once and holds its reply back until release: Redis has
// applied it, the caller does not know yet.
type slowExtendReply struct {
	armed atomic.Bool
	in    chan struct{} // closed when the held call's reply is in
	open  chan struct{}
	once  sync.Once
}

func (h *slowExtendReply) release() { h.once.Do(func() { close(h.open) }) }

func (h *slowExtendReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowExtendReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScript(cmd, luascripts.Extend, luascripts.Sources[2]) || !h.armed.CompareAndSwap(true, false) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		close(h.in)
		<-h.open
		return err
	}
}

func (h *slowExtendReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLock_Release_reentrantSecondRelease: a second Release of a re-entrant
// hold returns ErrNotHeld and leaves the other handle of the same owner its
// level: Extend and TTL on the released handle say ErrNotHeld, and the key
// stays held by the other handle.
func TestLock_Release_reentrantSecondRelease(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		a := c.NewLock(key, lock.WithOwner("o"))
		b := c.NewLock(key, lock.WithOwner("o"))
		must(t, "a.Acquire()", a.Acquire(ctx))
		must(t, "b.Acquire()", b.Acquire(ctx))
		must(t, "a.Release()", a.Release(ctx))
		if err := a.Extend(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Extend() on a released re-entrant handle = %v, want ErrNotHeld", err)
		}
		if _, err := a.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("TTL() on a released re-entrant handle = %v, want ErrNotHeld", err)
		}
		if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("second Release() = %v, want ErrNotHeld", err)
		}
		if ok, err := c.NewLock(key).TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() while b holds = %v, %v, want false, nil", ok, err)
		}
	})
}

// TestLock_TTL_stolenReason: TTL() that finds another holder's token
// reports the loss with reason LossStolen, in both release modes.
func TestLock_TTL_stolenReason(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
			c := newClient(t, tg.rdb, lock.WithReleaseMode(mode))
			key := keyFor(t) + mode.String()
			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			tg.rdb.Set(ctx, lockKey(key), "intruder", time.Minute)
			_, err := l.TTL(ctx)
			wantErr(t, "TTL()", err, lock.ErrNotHeld)
			var le *lock.LostError
			if !errors.As(l.LostErr(), &le) || le.Reason != lock.LossStolen {
				t.Fatalf("%v: LostErr() = %v, want reason stolen", mode, l.LostErr())
			}
		}
	})
}

// TestRelease_wakesOwnClientsNextReentrantWaiter: two re-entrant owners of
// one Client wait (no handoff between re-entrant holds); another Client's
// release wakes the longest, a; a's release must then wake b, with no
// attempt of b's in between. The waiters' backoff is a minute, so only a
// message wakes b in time.
func TestRelease_wakesOwnClientsNextReentrantWaiter(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder := newClient(t, tg.rdb)
	waiters := newClient(t, tg.rdb, lock.WithBackoff(time.Minute, time.Minute))
	h := holder.NewLock(key)
	must(t, "holder Acquire()", h.Acquire(ctx))

	a := waiters.NewLock(key, lock.WithOwner("a"))
	b := waiters.NewLock(key, lock.WithOwner("b"))
	got := make(chan string, 2)
	wait := func(name string, l *lock.Lock) {
		if err := l.Acquire(ctx); err != nil {
			got <- name + ": " + err.Error()
			return
		}
		got <- name
	}
	go wait("a", a)
	waitIdle(t, waiters, key, 1)
	go wait("b", b)
	waitIdle(t, waiters, key, 2)

	must(t, "holder Release()", h.Release(ctx)) // the mark is there: it publishes
	if w := recv(t, got, "first waiter"); w != "a" {
		t.Fatalf("first waiter to acquire = %q, want a", w)
	}
	must(t, "a.Release()", a.Release(ctx))
	if w := recv(t, got, "b woken by a's release"); w != "b" {
		t.Fatalf("second waiter = %q, want b", w)
	}
	must(t, "b.Release()", b.Release(ctx))
}

// TestRelease_panickingAfterSendEndsTheHold: a Release whose call panics
// on the caller's goroutine after it ran in Redis hands the panic to the
// caller and ends the hold, as a Release of unknown outcome does: the same
// Lock can acquire again, rather than being refused as still holding. So
// too with a ctx that has a deadline (see eachCtx).
func TestRelease_panickingAfterSendEndsTheHold(t *testing.T) {
	t.Parallel()
	eachCtx(t, testReleasePanickingAfterSendEndsTheHold)
}

func testReleasePanickingAfterSendEndsTheHold(t *testing.T, ctx context.Context) {
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	rdb.AddHook(panicAfter{match: func(cmd redis.Cmder) bool { return isScriptCall(cmd) && !isAcquire(cmd) }})
	l := newClient(t, rdb).NewLock(keyFor(t))
	must(t, "Acquire()", l.Acquire(ctx))
	mustPanic(t, "Release()", "the hook's panic", func() {
		_ = l.Release(ctx)
	})
	ok, err := l.TryAcquire(ctx)
	if !ok || err != nil {
		t.Fatalf("TryAcquire() on the Lock after its Release panicked = %v, %v; want the lock, which that Release freed", ok, err)
	}
	must(t, "Release()", l.Release(ctx))
}
