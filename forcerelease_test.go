package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/kindtest"
)

// wantForced fails unless l's hold was reported lost as force-released.
func wantForced(t *testing.T, l *lock.Lock) {
	t.Helper()
	var le *lock.LostError
	if err := l.LostErr(); !errors.As(err, &le) || le.Reason != lock.LossForceReleased {
		t.Fatalf("LostErr() = %v, want a *LostError with reason force-released", err)
	}
}

// TestClient_ForceRelease_withLock: another process's ForceRelease frees
// the key, wakes a waiter, and cancels the holder's WithLock context at
// once (well before any renewal: the TTL is a minute) with a force-released
// cause; WithLock returns ErrLockLost.
func TestClient_ForceRelease_withLock(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		holder := newClient(t, tg.newRDB(t), lock.WithTTL(time.Minute))
		op := newClient(t, tg.newRDB(t))
		key := keyFor(t)
		held := make(chan struct{})
		cause := make(chan error, 1)
		done := make(chan error, 1)
		go func() {
			done <- holder.WithLock(ctx, key, func(ctx context.Context) error {
				close(held)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return nil
			})
		}()
		<-held
		waitUntil(t, "the holder's inbox subscription", func() bool { return lock.InboxReady(holder) })
		// A waiter elsewhere, woken by the force-release's message.
		w := op.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		got := make(chan error, 1)
		go func() { got <- w.Acquire(ctx) }()
		waitUntil(t, "the waiter", func() bool { return lock.IdleWaiters(op, key) == 1 })

		must(t, "ForceRelease()", op.ForceRelease(ctx, key))
		var le *lock.LostError
		if err := <-cause; !errors.As(err, &le) || le.Reason != lock.LossForceReleased || le.Key != key {
			t.Fatalf("WithLock ctx cause = %v, want a force-released *LostError for %q", err, key)
		}
		if err := <-done; !errors.Is(err, lock.ErrLockLost) {
			t.Fatalf("WithLock() error = %v, want ErrLockLost", err)
		}
		must(t, "waiter Acquire()", <-got)
		must(t, "waiter Release()", w.Release(ctx))
		wantErr(t, "ForceRelease() of a free key", op.ForceRelease(ctx, key), lock.ErrNotHeld)
	})
}

// TestClient_ForceReleaseToken: only the hold with the token goes; a
// re-entrant mutex goes by its owner id or one hold's id, with every
// nested hold told.
func TestClient_ForceReleaseToken(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		l := c.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		wantErr(t, "ForceReleaseToken(other)", lock.ForceReleaseToken(c, ctx, key, "someone-else"), lock.ErrNotHeld)
		wantErr(t, "ForceReleaseToken(\"\")", lock.ForceReleaseToken(c, ctx, key, ""), lock.ErrInvalid)
		if isClosed(l.Lost()) {
			t.Fatal("Lost() closed by a force-release of another token")
		}
		waitUntil(t, "the inbox subscription", func() bool { return lock.InboxReady(c) })
		must(t, "ForceReleaseToken(ours)", lock.ForceReleaseToken(c, ctx, key, l.Token()))
		waitClosed(t, l.Lost(), 10*time.Second, "Lost()")
		wantForced(t, l)
		wantErr(t, "Release() after a force-release", l.Release(ctx), lock.ErrNotHeld)

		rc := newClient(t, tg.rdb, lock.WithOwner("worker-3"))
		a, b := rc.NewLock(key+":re"), rc.NewLock(key+":re")
		must(t, "Acquire() a", a.Acquire(ctx))
		must(t, "Acquire() b", b.Acquire(ctx))
		waitUntil(t, "the inbox subscription", func() bool { return lock.InboxReady(rc) })
		must(t, "ForceReleaseToken(owner)", lock.ForceReleaseToken(c, ctx, key+":re", "worker-3"))
		waitClosed(t, a.Lost(), 10*time.Second, "a.Lost()")
		waitClosed(t, b.Lost(), 10*time.Second, "b.Lost()")
		wantForced(t, a)
		wantForced(t, b)
	})
}

// TestClient_ForceRelease_missedMessage: a holder that hears no message
// (its Client listens on no inbox: WithNotify(false)) learns of the
// force-release at its next renewal, with the same reason.
func TestClient_ForceRelease_missedMessage(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		// A TTL long enough that a loaded machine answers the renewal
		// before the hold's safety deadline: the reason is then read from
		// the force record, not "unanswered".
		holder := newClient(t, tg.newRDB(t), lock.WithNotify(false), lock.WithTTL(2*time.Second))
		op := newClient(t, tg.newRDB(t))
		key := keyFor(t)
		l := holder.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		must(t, "ForceRelease()", op.ForceRelease(ctx, key))
		// miniredis keeps no time of its own: the renewal at TTL/3 runs on
		// the wall clock either way.
		waitClosed(t, l.Lost(), 10*time.Second, "Lost() at the next renewal")
		wantForced(t, l)
	})
}

// TestClient_ForceRelease_racesRelease: a force-release and the holder's
// own Release race; exactly one of them removes the hold, and Lost()
// closes exactly when the force-release won.
func TestClient_ForceRelease_racesRelease(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		holder := newClient(t, tg.newRDB(t))
		op := newClient(t, tg.newRDB(t))
		key := keyFor(t)
		wins := map[string]int{}
		for i := range 50 {
			l := holder.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			var wg sync.WaitGroup
			var rerr, ferr error
			wg.Go(func() { rerr = l.Release(ctx) })
			wg.Go(func() { ferr = op.ForceRelease(ctx, key) })
			wg.Wait()
			switch {
			case rerr == nil && errors.Is(ferr, lock.ErrNotHeld):
				wins["release"]++
				if isClosed(l.Lost()) {
					t.Fatalf("round %d: Lost() closed after our own Release won", i)
				}
			case ferr == nil && errors.Is(rerr, lock.ErrNotHeld):
				wins["force"]++
				waitClosed(t, l.Lost(), 10*time.Second, "Lost()")
				wantForced(t, l)
			default:
				t.Fatalf("round %d: Release() = %v, ForceRelease() = %v, want one nil and one ErrNotHeld", i, rerr, ferr)
			}
		}
		t.Logf("winners: %v", wins)
	})
}

// TestClient_ForceRelease_racesRenewal: a force-release lands while the
// holder's renewal is out (held back by a hook until the key is gone);
// the hold is reported lost once, force-released, whichever of the
// message and the renewal's reply comes first.
func TestClient_ForceRelease_racesRenewal(t *testing.T) {
	t.Parallel()
	rec := &kindtest.Recorder{}
	l, stall := forcedWhileRenewalOut(t, lock.WithTTL(600*time.Millisecond), lock.WithObserver(rec))
	stall.Release()
	waitClosed(t, l.Lost(), 10*time.Second, "Lost()")
	wantForced(t, l)
	n := 0
	for _, k := range rec.Kinds() {
		if k == lock.EventLost {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d EventLost reported, want 1", n)
	}
}

// TestClient_ForceRelease_reachesHoldWhileRenewalOut: the force-release
// message reaches a hold whose renewal call is out (held back by a hook for
// as long as the test runs), which the renewal loop has taken off its heap:
// Lost() closes, force-released, before the renewal could say anything.
func TestClient_ForceRelease_reachesHoldWhileRenewalOut(t *testing.T) {
	t.Parallel()
	l, stall := forcedWhileRenewalOut(t, lock.WithTTL(3*time.Second))
	defer stall.Release()
	select {
	case <-l.Lost():
	case <-time.After(2 * time.Second): // the safety deadline is 3s less its margin
		t.Fatal("Lost() still open 2s after the force-release, the renewal held back: want the message to reach the hold in flight")
	}
	wantForced(t, l)
}

// forcedWhileRenewalOut acquires a lock on real Redis with a Client made
// with opts, and force-releases it from another Client while its first
// renewal is held back, not yet sent; stall.Release lets it go.
func forcedWhileRenewalOut(t *testing.T, opts ...lock.Option) (l *lock.Lock, stall *hooktest.Gate) {
	t.Helper()
	ctx := context.Background()
	tg := realTarget(t)
	// The first script pipeline: the renewal's.
	stall = hooktest.New(t, hooktest.Config{On: hooktest.Pipelines, Match: hooktest.AnyScript, Nth: 1, Armed: true})
	rdb := tg.newRDB(t)
	rdb.AddHook(stall)
	holder := newClient(t, rdb, opts...)
	op := newClient(t, tg.newRDB(t))
	key := keyFor(t)
	l = holder.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	waitUntil(t, "the inbox subscription", func() bool { return lock.InboxReady(holder) })
	<-stall.Held() // the renewal pipeline is out, not yet sent
	must(t, "ForceRelease()", op.ForceRelease(ctx, key))
	return l, stall
}

// TestClient_ForceRelease_cluster: on a 3-master cluster, a force-release
// of a key on each master reaches its holder at once (the force channel's
// messages cross the cluster bus), List finds every lock on every master,
// and the audit stream, on its own slot, gets every key's entries.
func TestClient_ForceRelease_cluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	ctx := context.Background()
	stream := keyFor(t) + ":audit"
	holder := newClient(t, cl.Client(t), lock.WithTTL(time.Minute), lock.WithMetadata("pod-a"), lock.WithAudit(stream, 1000))
	op := newClient(t, cl.Client(t))
	masters := map[string]bool{}
	var ls []*lock.Lock
	for i := range 12 {
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		srv, err := cl.MasterForKey(ctx, lockKey(key))
		must(t, "MasterForKey()", err)
		masters[srv.Addr()] = true
		l := holder.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		ls = append(ls, l)
	}
	if len(masters) != 3 {
		t.Fatalf("keys landed on %d masters, want 3", len(masters))
	}
	n := 0
	for info, err := range op.List(ctx, keyFor(t)+":*") {
		must(t, "List()", err)
		if info.Kind != "mutex" || len(info.Holders) != 1 || info.Holders[0].Metadata != "pod-a" {
			t.Fatalf("List() item %+v, want a mutex held with metadata pod-a", info)
		}
		n++
	}
	if n != len(ls) {
		t.Fatalf("List() found %d locks, want %d", n, len(ls))
	}
	waitUntil(t, "the inbox subscription", func() bool { return lock.InboxReady(holder) })
	for _, l := range ls {
		must(t, "ForceRelease()", op.ForceRelease(ctx, l.Key()))
		waitClosed(t, l.Lost(), 10*time.Second, "Lost() of "+l.Key())
		wantForced(t, l)
	}
	// Each key: acquired, then lost; the loss entries are sent in the
	// background.
	rdb := cl.Client(t)
	waitUntil(t, "the audit entries", func() bool { return rdb.XLen(ctx, stream).Val() >= int64(2*len(ls)) })
	xs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	must(t, "XRANGE", err)
	seen := map[string]int{}
	for _, x := range xs {
		seen[x.Values["key"].(string)+" "+x.Values["event"].(string)]++
	}
	for _, l := range ls {
		if seen[l.Key()+" acquired"] != 1 || seen[l.Key()+" lost"] != 1 {
			t.Fatalf("audit entries of %q: %v, want one acquired and one lost", l.Key(), seen)
		}
	}
}

// TestClient_ForceRelease_reachesHandedOverHold: a hold a release in this
// process handed straight to a waiter (a mutex's handoff, a semaphore's
// permit passed on, a fair lock's give message) listens for force-releases as one acquired by its own
// call does: a force-release of its token reports it lost at once (the TTL
// is a minute: no renewal could).
func TestClient_ForceRelease_reachesHandedOverHold(t *testing.T) {
	t.Parallel()
	for name, newLock := range map[string]func(c *lock.Client, key string, opts ...lock.Option) *lock.Lock{
		"mutex": func(c *lock.Client, key string, opts ...lock.Option) *lock.Lock {
			return c.NewLock(key, opts...)
		},
		"semaphore": func(c *lock.Client, key string, opts ...lock.Option) *lock.Lock {
			return c.NewSemaphore(key, 1, opts...).Permit()
		},
		"fair": func(c *lock.Client, key string, opts ...lock.Option) *lock.Lock {
			return c.NewLock(key, append(opts, lock.WithFair(true))...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			tg := realTarget(t)
			c := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
			op := newClient(t, tg.newRDB(t))
			key := keyFor(t)
			cur := newLock(c, key)
			must(t, "Acquire()", cur.Acquire(ctx))
			gifts := make(chan struct{}, 1)
			lock.OnGiftTaken(c, func() { gifts <- struct{}{} })
			next := newLock(c, key, lock.WithBackoff(time.Minute, time.Minute))
			passTo(t, c, key, cur, next)
			if len(gifts) != 1 {
				t.Fatal("waiter took no handed-over hold: want the lock handed over")
			}
			waitUntil(t, "the inbox subscription", func() bool { return lock.InboxReady(c) })
			must(t, "ForceReleaseToken(handed over)", lock.ForceReleaseToken(op, ctx, key, next.Token()))
			waitClosed(t, next.Lost(), 2*time.Second, "Lost() of the handed-over hold")
			wantForced(t, next)
		})
	}
}

// TestClient_ForceRelease_twoClientsOnePrefix: two Clients of one process
// with the same prefix both hear every force-release on it; only the one
// whose hold it names reports a loss, and only of that hold.
func TestClient_ForceRelease_twoClientsOnePrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	c1 := newClient(t, tg.newRDB(t), lock.WithTTL(time.Minute))
	c2 := newClient(t, tg.newRDB(t), lock.WithTTL(time.Minute))
	key := keyFor(t)
	a, b, c := c1.NewLock(key+":a"), c2.NewLock(key+":b"), c2.NewLock(key+":c")
	for _, l := range []*lock.Lock{a, b, c} {
		must(t, "Acquire()", l.Acquire(ctx))
	}
	waitUntil(t, "both inbox subscriptions", func() bool { return lock.InboxReady(c1) && lock.InboxReady(c2) })
	must(t, "ForceRelease(a)", c2.ForceRelease(ctx, key+":a"))
	waitClosed(t, a.Lost(), 2*time.Second, "a.Lost()")
	wantForced(t, a)
	// c2 hears the messages in order: once c is lost, it has heard a's.
	must(t, "ForceRelease(c)", c1.ForceRelease(ctx, key+":c"))
	waitClosed(t, c.Lost(), 2*time.Second, "c.Lost()")
	wantForced(t, c)
	if isClosed(b.Lost()) {
		t.Fatalf("b lost by force-releases of other holds: %v", b.LostErr())
	}
	must(t, "Release() b", b.Release(ctx))
}

// TestClient_ForceRelease_missedMessageVerbs: a holder of every kind (and
// of a fair lock, and a ReleaseWatch one) that
// hears no force message (WithNotify(false)) and calls Release, Extend or
// TTL on its force-released hold gets ErrNotHeld, and the hold is reported
// lost as force-released, from the key's force record, not as vanished.
func TestClient_ForceRelease_missedMessageVerbs(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	op := newClient(t, tg.rdb)
	verbs := map[string]func(l *lock.Lock) error{
		"Release": func(l *lock.Lock) error { return l.Release(ctx) },
		"Extend":  func(l *lock.Lock) error { return l.Extend(ctx, time.Minute) },
		"TTL":     func(l *lock.Lock) error { _, err := l.TTL(ctx); return err },
	}
	for name, verb := range verbs {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, tg.rdb, lock.WithTTL(30*time.Second), lock.WithNotify(false))
			ls := vanishKinds(t, c)
			for _, l := range []*lock.Lock{
				c.NewLock(keyFor(t)+":fair", lock.WithFair(true)),
				c.NewLock(keyFor(t)+":watch", lock.WithReleaseMode(lock.ReleaseWatch)),
			} {
				must(t, "Acquire() of "+l.Key(), l.Acquire(ctx))
				ls = append(ls, l)
			}
			for _, l := range ls {
				must(t, "ForceRelease()", op.ForceRelease(ctx, l.Key()))
				wantErr(t, name+"() of "+l.Key(), verb(l), lock.ErrNotHeld)
			}
			wantLoss(t, ls, lock.LossForceReleased)
		})
	}
}
