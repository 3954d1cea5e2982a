package lock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// TestLock_Acquire_wokenByPublish: a waiter in another Client (as in another
// process) is woken by the release's publish, long before its backoff.
func TestLock_Acquire_wokenByPublish(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		holder := newClient(t, tg.rdb).NewLock(key)
		must(t, "Acquire()", holder.Acquire(ctx))
		wc := newClient(t, tg.newRDB(t))
		waiter := wc.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		done := make(chan error, 1)
		go func() { done <- waiter.Acquire(ctx) }()
		waitIdle(t, wc, key, 1) // the waiter failed once and listens
		released := time.Now()
		must(t, "Release()", holder.Release(ctx))
		select {
		case err := <-done:
			must(t, "waiter Acquire()", err)
			t.Logf("waiter held the lock %v after the release returned", time.Since(released).Round(time.Microsecond))
		case <-time.After(10 * time.Second):
			t.Fatal("waiter in another Client not woken by the release")
		}
		must(t, "Release()", waiter.Release(ctx))
	})
}

// TestLock_handoff: a release with a waiter of the same Client hands the
// hold over in its own round trip: the waiter holds the lock with a new
// token and a larger fence, nobody is woken by a publish, and after
// maxHandoffs (16) handoffs in a row one release frees the key for all.
func TestLock_handoff(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		sub := tg.newRDB(t).Subscribe(ctx, lockKey(key)+":notify")
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil { // the subscribe confirmation
			t.Fatal(err)
		}
		c := newClient(t, tg.rdb)
		cur := c.NewLock(key)
		must(t, "Acquire()", cur.Acquire(ctx))
		for i := range 20 {
			next := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
			passTo(t, c, key, cur, next)
			if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != next.Token() || next.Fence() <= cur.Fence() {
				t.Fatalf("round %d: key %q fence %d after %d, want the waiter's token %q and a larger fence", i, got, next.Fence(), cur.Fence(), next.Token())
			}
			cur = next
		}
		must(t, "Release()", cur.Release(ctx))
		// 20 handoff rounds: 16 handed over, the 17th released (publish), 3
		// more handed over; then the final release publishes.
		msgs := 0
		for {
			rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := sub.ReceiveMessage(rctx)
			cancel()
			if err != nil {
				break
			}
			msgs++
		}
		if msgs != 2 {
			t.Fatalf("%d release messages published over 20 handoff rounds and a final release, want 2", msgs)
		}
	})
}

// TestLock_handoffChurn: waiters of one Client that give up at random while
// releases hand the lock over. Every hold is exclusive, and when all is done
// no key is left behind.
func TestLock_handoffChurn(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.rdb, lock.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
		var (
			inside, overlaps, held, gaveUp atomic.Int32
			wg                             sync.WaitGroup
			errs                           = make(chan error, 64)
		)
		for g := range 8 {
			wg.Go(func() {
				for i := range 25 {
					wait := time.Duration(1+(g*7+i*3)%9) * time.Millisecond
					if i%5 == 0 {
						// Some waits long enough to be served even on a
						// loaded machine, so holds and give-ups both occur.
						wait = time.Second
					}
					l := c.NewLock(key, lock.WithWaitTimeout(wait))
					err := l.Acquire(ctx)
					if errors.Is(err, lock.ErrNotAcquired) {
						gaveUp.Add(1)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					held.Add(1)
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("worker error = %v", err)
		}
		t.Logf("%d holds, %d waits given up", held.Load(), gaveUp.Load())
		if overlaps.Load() != 0 {
			t.Fatalf("%d overlapping holds", overlaps.Load())
		}
		if held.Load() == 0 || gaveUp.Load() == 0 {
			t.Fatalf("%d holds and %d give-ups: the test did not exercise both", held.Load(), gaveUp.Load())
		}
		// A waiter that left while a hold was being handed to it must not
		// strand the key. Its undo may still be running in the background
		// (a loaded machine delays it), so the key must be free within 5s
		// — a stranded hold would stay for its whole TTL, 30s.
		for end := time.Now().Add(5 * time.Second); tg.rdb.Exists(ctx, lockKey(key)).Val() == 1 && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		ok, err := c.NewLock(key).TryAcquire(ctx)
		if !ok || err != nil {
			t.Fatalf("TryAcquire() after the churn = %v, %v, want true: a handed-over hold was stranded (key holds %q)",
				ok, err, tg.rdb.Get(ctx, lockKey(key)).Val())
		}
	})
}

// waitIdle waits until n waiters of c on key sit between attempts.
// passTo has next, a lock of c on key, wait for it while cur holds it,
// then releases cur (a release that can hand the hold over), and returns
// once next holds it.
func passTo(t *testing.T, c *lock.Client, key string, cur, next *lock.Lock) {
	t.Helper()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- next.Acquire(ctx) }()
	waitIdle(t, c, key, 1) // a release now hands over
	must(t, "Release()", cur.Release(ctx))
	select {
	case err := <-done:
		must(t, "waiter Acquire()", err)
	case <-time.After(10 * time.Second):
		t.Fatal("waiter did not get the lock")
	}
}

func waitIdle(t *testing.T, c *lock.Client, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for lock.IdleWaiters(c, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle waiters on %q, want %d", lock.IdleWaiters(c, key), key, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// newGiftWindowClient returns a Client over rdb whose first waiter to take
// a handed-over hold stops before installing it, until release is called;
// taken closes once a waiter is stopped there.
func newGiftWindowClient(t *testing.T, rdb redis.UniversalClient) (c *lock.Client, taken <-chan struct{}, release func()) {
	t.Helper()
	c = newClient(t, rdb)
	tk, proceed := make(chan struct{}), make(chan struct{})
	var first, done sync.Once
	lock.OnGiftTaken(c, func() {
		first.Do(func() {
			close(tk)
			<-proceed
		})
	})
	release = func() { done.Do(func() { close(proceed) }) }
	t.Cleanup(release)
	return c, tk, release
}

// startAcquire runs l.Acquire on its own goroutine and waits until c has n
// idle waiters on key.
func startAcquire(t *testing.T, c *lock.Client, l *lock.Lock, n int) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.Acquire(context.Background()) }()
	waitIdle(t, c, l.Key(), n)
	return done
}

// recv returns what ch delivers within 10s, failing the test otherwise.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10s", what)
		panic("unreachable")
	}
}

// wantHeldBy fails the test unless Redis (rdb) holds l's key with l's token.
func wantHeldBy(t *testing.T, rdb redis.Cmdable, l *lock.Lock, when string) {
	t.Helper()
	if got := rdb.Get(context.Background(), lockKey(l.Key())).Val(); got != l.Token() {
		t.Fatalf("%s: key holds %q, want %q", when, got, l.Token())
	}
}

// TestRelease_secondReleaseKeepsHandedOverHold: the common
// "defer l.Release(ctx)" after an early explicit Release, with a waiter of
// the same Client. The first Release hands the hold to the waiter; the
// second, arriving while the waiter installs it, must leave it alone: Redis
// keeps the waiter's token and its Lost() stays open.
func TestRelease_secondReleaseKeepsHandedOverHold(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c, taken, proceed := newGiftWindowClient(t, tg.rdb)
	a := c.NewLock(key)
	must(t, "Acquire()", a.Acquire(ctx))
	w := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
	done := startAcquire(t, c, w, 1)

	must(t, "first Release()", a.Release(ctx))
	recv(t, taken, "waiter taking the handed-over hold")
	wantErr(t, "second Release()", a.Release(ctx), lock.ErrNotHeld)
	proceed()
	must(t, "waiter Acquire()", recv(t, done, "waiter Acquire"))

	wantHeldBy(t, tg.rdb, w, "after the second Release, the waiter's hold")
	if isClosed(w.Lost()) {
		t.Fatalf("waiter's Lost() closed: %v", w.LostErr())
	}
	must(t, "waiter Release()", w.Release(ctx))
}

// TestRelease_staleHandleLetsNoWaiterInBesideHolder: a handle whose hold
// was deleted behind its back, releasing again and again while the current
// holder's hold is being handed to a waiter of the same Client, must not
// undo that hold nor let the next waiter in beside it.
func TestRelease_staleHandleLetsNoWaiterInBesideHolder(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c, taken, proceed := newGiftWindowClient(t, tg.rdb)
	stale := c.NewLock(key)
	must(t, "stale Acquire()", stale.Acquire(ctx))
	tg.expire(t, key) // unknown to stale: its renewal is 10s away
	a := c.NewLock(key)
	must(t, "Acquire()", a.Acquire(ctx))
	w1 := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
	done1 := startAcquire(t, c, w1, 1)
	w2 := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
	done2 := startAcquire(t, c, w2, 2)

	must(t, "Release()", a.Release(ctx)) // handed to w1, the longest waiting
	recv(t, taken, "w1 taking the handed-over hold")
	for i := range 5 {
		wantErr(t, fmt.Sprintf("stale Release() #%d", i+1), stale.Release(ctx), lock.ErrNotHeld)
	}
	proceed()
	must(t, "w1 Acquire()", recv(t, done1, "w1 Acquire"))

	wantHeldBy(t, tg.rdb, w1, "after the stale Releases, w1's hold")
	if ok, err := newClient(t, tg.newRDB(t)).NewLock(key).TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() beside w1 = %v, %v, want false, nil", ok, err)
	}
	select {
	case err := <-done2:
		t.Fatalf("w2 Acquire() = %v while w1 holds the lock, want it still waiting", err)
	default:
	}
	must(t, "w1 Release()", w1.Release(ctx)) // hands over to w2
	must(t, "w2 Acquire()", recv(t, done2, "w2 Acquire"))
	wantHeldBy(t, tg.rdb, w2, "after w1's Release, w2's hold")
	must(t, "w2 Release()", w2.Release(ctx))
}

// cutHandoff is a go-redis hook: the first handoff call reaches Redis, then
// runs onCut and is reported failed, as a reply lost on the wire would be;
// it records the waiter's token the call carried. Acquire calls on keys
// containing ":filler" (alone or in a pipeline) wait until gate closes.
type cutHandoff struct {
	onCut func()
	gate  chan struct{}

	mu     sync.Mutex
	cut    bool
	waiter string // the waiter's token in the cut handoff call
}

func isScript(cmd redis.Cmder, s *redis.Script, src string) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	v := fmt.Sprint(args[1])
	return v == s.Hash() || v == src
}

func (h *cutHandoff) filler(cmd redis.Cmder) bool {
	args := cmd.Args()
	return isScript(cmd, luascripts.Acquire, luascripts.Sources[0]) && len(args) > 3 &&
		strings.Contains(fmt.Sprint(args[3]), ":filler")
}

func (h *cutHandoff) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cutHandoff) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.filler(cmd) {
			<-h.gate
			return next(ctx, cmd)
		}
		if !isScript(cmd, luascripts.Handoff, luascripts.Sources[4]) {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		first := !h.cut
		h.cut = true
		h.mu.Unlock()
		err := next(ctx, cmd)
		if !first || err != nil {
			return err
		}
		h.mu.Lock()
		h.waiter = fmt.Sprint(cmd.Args()[6])
		h.mu.Unlock()
		h.onCut()
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}
}

func (h *cutHandoff) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if h.filler(cmd) {
				<-h.gate
				break
			}
		}
		return next(ctx, cmds)
	}
}

// waitCoalescer waits until the Client's coalescers report done(out, queued).
func waitCoalescer(t *testing.T, c *lock.Client, what string, done func(out, queued int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, queued, _ := lock.CoalescerLoad(c)
		if done(out, queued) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: coalescer has %d sends out and %d calls queued", what, out, queued)
		}
		time.Sleep(time.Millisecond)
	}
}

// probeCtx is a cancellable context that reports (closes seen) the first
// time anyone asks its error or cause after cancel.
type probeCtx struct {
	context.Context
	stop      context.CancelFunc
	cancelled atomic.Bool
	seen      chan struct{}
	once      sync.Once
}

func newProbeCtx(parent context.Context) *probeCtx {
	ctx, stop := context.WithCancel(parent)
	return &probeCtx{Context: ctx, stop: stop, seen: make(chan struct{})}
}

func (c *probeCtx) cancel() {
	c.cancelled.Store(true)
	c.stop()
}

func (c *probeCtx) asked() {
	if c.cancelled.Load() {
		c.once.Do(func() { close(c.seen) })
	}
}

func (c *probeCtx) Err() error {
	c.asked()
	return c.Context.Err()
}

func (c *probeCtx) Value(key any) any {
	c.asked()
	return c.Context.Value(key)
}

// TestAcquire_givingUpAfterUnknownHandoffLeavesNoHold: a Release hands its
// hold to a waiter of the same Client, the handoff takes effect in Redis but
// its reply is lost, so the waiter is told to retry with its own token
// (outcome unknown). When the waiter gives up before that attempt reaches
// Redis (its ctx ends while the attempt waits in the busy coalescer), its
// failed Acquire must not leave the handed-over hold behind: Redis must not
// keep the key with the waiter's token for its whole TTL.
func TestAcquire_givingUpAfterUnknownHandoffLeavesNoHold(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	rdb := tg.newRDB(t)
	hook := &cutHandoff{gate: make(chan struct{})}
	rdb.AddHook(hook)
	var openGate sync.Once
	t.Cleanup(func() { openGate.Do(func() { close(hook.gate) }) })
	c := newClient(t, rdb)

	a := c.NewLock(key)
	must(t, "Acquire()", a.Acquire(ctx))
	wctx := newProbeCtx(ctx)
	defer wctx.cancel()
	w := c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
	done := make(chan error, 1)
	go func() { done <- w.Acquire(wctx) }()
	waitIdle(t, c, key, 1)

	// While the handoff is out, other calls of the Client fill every send
	// slot of the coalescer and one more waits in its queue; they stay
	// there until the gate opens.
	var fillers sync.WaitGroup
	var held []*lock.Lock // under hook.mu
	hook.onCut = func() {
		for i := 1; ; i++ {
			l := c.NewLock(fmt.Sprintf("%s:filler:%d", key, i))
			fillers.Go(func() {
				if ok, err := l.TryAcquire(ctx); ok && err == nil {
					hook.mu.Lock()
					held = append(held, l)
					hook.mu.Unlock()
				}
			})
			waitLoad(t, c, 1+i) // the handoff and i fillers
			if _, queued, _ := lock.CoalescerLoad(c); queued > 0 {
				return
			}
		}
	}
	err := a.Release(ctx)
	t.Logf("Release() with the handoff's reply cut = %v", err)
	// The waiter was told to retry; its attempt waits in the queue.
	waitCoalescer(t, c, "the waiter's attempt queued", func(_, queued int) bool { return queued == 1 })
	wctx.cancel()
	// Once the waiter reads its ctx's error, its attempt has left the
	// queue unsent: the fillers may go, and whatever the waiter sends to
	// clean up finds a free slot.
	recv(t, wctx.seen, "the waiter's attempt leaving the queue")
	openGate.Do(func() { close(hook.gate) })
	werr := recv(t, done, "waiter Acquire")
	wantErr(t, "waiter Acquire()", werr, lock.ErrNotAcquired)
	fillers.Wait()
	for _, l := range held {
		must(t, "filler Release()", l.Release(ctx))
	}

	hook.mu.Lock()
	token := hook.waiter
	hook.mu.Unlock()
	if token == "" {
		t.Fatalf("the cut handoff call carried no waiter token")
	}
	// The waiter's clean-up may still be on its way when Acquire returns:
	// give it a few seconds, far short of the 30s TTL a stranded hold keeps.
	if !waitFor(5*time.Second, func() bool { return tg.rdb.Get(ctx, lockKey(key)).Val() != token }) {
		t.Fatalf("after the waiter's Acquire failed (%v), Redis keeps the key with its token for PTTL %v: a handed-over hold stranded",
			werr, tg.rdb.PTTL(ctx, lockKey(key)).Val())
	}
}

// TestRelease_panickingHandoffLetsTheWaiterOn: a Release whose handoff
// call panics on the caller's goroutine after it ran in Redis (a go-redis
// hook; a ctx without deadline runs the call there) had claimed the
// longest waiter of its Client. The waiter must learn the handoff's
// outcome is unknown and try with its own token, which the handoff set:
// it gets the lock, rather than waiting, claimed, for a gift that never
// comes while its token holds the key for nobody.
func TestRelease_panickingHandoffLetsTheWaiterOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script *redis.Script
		src    string
		locks  func(c *lock.Client, key string) (holder, waiter *lock.Lock)
	}{
		{"mutex", luascripts.Handoff, luascripts.Sources[4], func(c *lock.Client, key string) (*lock.Lock, *lock.Lock) {
			return c.NewLock(key), c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		}},
		{"semaphore", luascripts.SemHandoff, luascripts.SemSources[4], func(c *lock.Client, key string) (*lock.Lock, *lock.Lock) {
			sem := c.NewSemaphore(key, 1)
			return sem.Permit(), sem.Permit()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := redistest.Start(t, redistest.Config{}).Client(t)
			rdb.AddHook(panicAfter{match: func(cmd redis.Cmder) bool { return isScript(cmd, tc.script, tc.src) }})
			c := newClient(t, rdb, lock.WithBackoff(time.Minute, time.Minute))
			holder, w := tc.locks(c, keyFor(t))
			must(t, "holder Acquire()", holder.Acquire(ctx))
			done := startAcquire(t, c, w, 1)
			mustPanic(t, "Release()", "the hook's panic", func() {
				_ = holder.Release(ctx)
			})
			must(t, "waiter Acquire()", recv(t, done, "waiter Acquire after the handoff panicked"))
			must(t, "waiter Release()", w.Release(ctx))
		})
	}
}
