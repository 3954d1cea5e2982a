package lock_test

import (
	"context"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/luascripts"
)

// The tests here guard waiters' wake-ups in the sequences that a "marking"
// release missed: one that publishes only when an attempt that found the
// key taken left a mark (a key named as the channel, P{K}:notify), and
// deletes the mark, or when the releasing Client has waiters of its own.
// That design was tried and reverted (1171fb3); today every release
// publishes. In each sequence an earlier release takes the mark and wakes
// a waiter that then does not mark the key again. Every waiter's backoff
// is a minute and every holder's TTL too, so only a message wakes a waiter
// in time; windows are opened with scriptGate, never with sleeps.

// scriptTexts returns what a call of script s (one of luascripts.All)
// carries, as EVALSHA or as EVAL: its SHA1 and its source, and its audited
// variant's too.
func scriptTexts(s *redis.Script) []string {
	var texts []string
	for i, a := range luascripts.All {
		if a != s {
			continue
		}
		texts = append(texts, a.Hash(), luascripts.Sources[i])
		if v, src := luascripts.Audited(a); v != nil {
			texts = append(texts, v.Hash(), src)
		}
	}
	return texts
}

// scriptGate returns a Gate that, once armed, holds the next call of script
// s (sent alone or in a pipeline): its reply after Redis ran it, so the
// call took effect and its caller does not know yet; or, with early, the
// call before it is sent.
func scriptGate(t *testing.T, s *redis.Script, early bool) *hooktest.Gate {
	return hooktest.New(t, hooktest.Config{After: !early, Match: hooktest.Script(scriptTexts(s)...), Nth: 1})
}

// waiterSet runs Acquires of one Client and reports each one's outcome by
// name.
type waiterSet struct {
	t   *testing.T
	c   *lock.Client
	key string
	got chan string
	n   int
}

func newWaiterSet(t *testing.T, c *lock.Client, key string) *waiterSet {
	return &waiterSet{t: t, c: c, key: key, got: make(chan string, 16)}
}

// wait starts l's Acquire under ctx as name, and waits until it sits
// between attempts with the ones started before.
func (ws *waiterSet) wait(ctx context.Context, name string, l *lock.Lock) {
	ws.t.Helper()
	ws.start(ctx, name, l, false)
}

// waitAndRelease is wait, l releasing the key as soon as it has it.
func (ws *waiterSet) waitAndRelease(ctx context.Context, name string, l *lock.Lock) {
	ws.t.Helper()
	ws.start(ctx, name, l, true)
}

func (ws *waiterSet) start(ctx context.Context, name string, l *lock.Lock, release bool) {
	ws.t.Helper()
	go func() {
		err := l.Acquire(ctx)
		if err == nil && release {
			if err = l.Release(ctx); err != nil {
				name += " release"
			}
		}
		if err != nil {
			ws.got <- name + ": " + err.Error()
			return
		}
		ws.got <- name
	}()
	ws.n++
	waitIdle(ws.t, ws.c, ws.key, ws.n)
}

// next returns the next outcome, failing after d.
func (ws *waiterSet) next(d time.Duration, what string) string {
	ws.t.Helper()
	select {
	case s := <-ws.got:
		return s
	case <-time.After(d):
		ws.t.Fatalf("%s: nothing within %v", what, d)
		return ""
	}
}

// wokenWithin is how long a waiter woken by a message may take to get a
// free key: far below the minute its timer would take.
const wokenWithin = 5 * time.Second

// holdElsewhere has a holder of another Client take key, and returns its
// release: the release that wakes the waiters, and under a marking release
// takes their mark.
func holdElsewhere(t *testing.T, rdb redis.UniversalClient, key string) (release func()) {
	t.Helper()
	ctx := context.Background()
	other := newClient(t, rdb, lock.WithTTL(time.Minute))
	h := other.NewLock(key)
	must(t, "other Client's Acquire()", h.Acquire(ctx))
	return func() {
		t.Helper()
		must(t, "other Client's Release()", h.Release(ctx))
	}
}

// TestUndo_ofWokenWaitersCutAttemptWakesTheNext: two waiters of one Client
// wait behind another Client's holder, whose release wakes the longer, a
// (and, marking, takes their mark). a's attempt takes the key in Redis,
// but a's ctx ends before the reply comes, so a leaves and the attempt is
// undone by a release of a's token. That undo frees the key: it must wake
// b, the Client's other waiter.
func TestUndo_ofWokenWaitersCutAttemptWakesTheNext(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	release := holdElsewhere(t, tg.rdb, key)

	rdb := tg.newRDB(t)
	gate := scriptGate(t, luascripts.Acquire, false)
	rdb.AddHook(gate)
	c := newClient(t, rdb, slowWaiters...)
	ws := newWaiterSet(t, c, key)
	// A deadline: the attempt then returns at a's cancel (the call is bounded).
	actx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	ws.wait(actx, "a", c.NewLock(key))
	ws.wait(ctx, "b", c.NewLock(key))

	gate.Arm()
	release() // a is woken; its attempt takes the key, its reply is held
	waitClosed(t, gate.Held(), 10*time.Second, "a's attempt")
	defer gate.Release()
	cancel()
	if got := ws.next(10*time.Second, "a leaving"); got == "a" || got == "b" {
		t.Fatalf("first outcome = %q, want a's error", got)
	}
	waitIdle(t, c, key, 1) // b still sleeps
	gate.Release()         // a's attempt returns: its undo frees the key
	if got := ws.next(wokenWithin, "b woken once a's undo freed the key"); got != "b" {
		t.Fatalf("second outcome = %q, want b", got)
	}
}

// TestHandoff_toWaiterThatLeftWakesTheNext: three waiters of one Client, a
// b and c, wait behind another Client's holder, whose release wakes a
// (and, marking, takes their mark). a's release hands the key to b
// (handoff.lua), but b's ctx ends while the handoff's reply is out; the
// handoff is then undone with b's token, freeing the key. c must be woken.
func TestHandoff_toWaiterThatLeftWakesTheNext(t *testing.T) {
	leftDuringRelease(t, scriptGate(t, luascripts.Handoff, false), nil)
}

// TestHandoff_auditedWaiterThatLeftWakesTheNext: as
// TestHandoff_toWaiterThatLeftWakesTheNext, but b audits to a stream and a
// does not, so a's release cannot hand b the key: it deletes it and wakes b
// to try (handoff.go). b's ctx ends before that release is sent, and b
// leaves; c must be woken. (Were the release's message to reach the Client
// before b left, b, claimed, would take the wake-up and drop it: the
// Notifier's signalHead skips only waiters owed one already. Not tested
// here: the order is not under the test's control.)
func TestHandoff_auditedWaiterThatLeftWakesTheNext(t *testing.T) {
	gate := scriptGate(t, luascripts.Release, true)
	leftDuringRelease(t, gate, func(key string) []lock.Option {
		return []lock.Option{lock.WithAudit("{"+key+"}:audit", 100)}
	})
}

// leftDuringRelease has waiters a, b (with bOpts, if any) and c of one
// Client wait behind another Client's holder, whose release wakes a. gate
// holds a's release (what a's release sends to b: see the callers); b's
// ctx ends meanwhile, and once b has left, gate lets the release go on. c
// must be woken.
func leftDuringRelease(t *testing.T, gate *hooktest.Gate, bOpts func(key string) []lock.Option) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	release := holdElsewhere(t, tg.rdb, key)

	rdb := tg.newRDB(t)
	rdb.AddHook(gate)
	c := newClient(t, rdb, slowWaiters...)
	ws := newWaiterSet(t, c, key)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var opts []lock.Option
	if bOpts != nil {
		opts = bOpts(key)
	}
	a := c.NewLock(key)
	ws.wait(ctx, "a", a)
	ws.wait(bctx, "b", c.NewLock(key, opts...))
	ws.wait(ctx, "c", c.NewLock(key))

	release()
	if got := ws.next(10*time.Second, "a woken"); got != "a" {
		t.Fatalf("first outcome = %q, want a", got)
	}
	waitIdle(t, c, key, 2)

	gate.Arm()
	done := make(chan error, 1)
	go func() { done <- a.Release(ctx) }()
	waitClosed(t, gate.Held(), 10*time.Second, "a's release")
	defer gate.Release()
	cancel()
	if got := ws.next(10*time.Second, "b leaving"); got == "b" || got == "c" {
		t.Fatalf("second outcome = %q, want b's error", got)
	}
	gate.Release()
	must(t, "a.Release()", recv(t, done, "a.Release"))
	if got := ws.next(wokenWithin, "c woken once a's release freed the key"); got != "c" {
		t.Fatalf("third outcome = %q, want c", got)
	}
}

// TestRelease_wakesWaiterWhoseWokenAttemptFailed: a waits in one Client, c
// in another, behind a third Client's holder, whose release wakes both
// (and, marking, takes their mark). a's attempt fails (the connection
// drops before it is sent), c's takes the key. c's release must wake a,
// though no attempt of a's has reached Redis since and c's Client has no
// other waiter.
func TestRelease_wakesWaiterWhoseWokenAttemptFailed(t *testing.T) {
	wokenNeverReached(t, false)
}

// TestRelease_wakesWaitersAfterWokenOneGaveUp: a and b wait in one Client,
// c in another, behind a third Client's holder, whose release wakes a and
// c (and, marking, takes their mark). a's wait ends as it is about to send
// its attempt (its ctx is cancelled then), so no attempt of a's reaches
// Redis and the wake-up it used is not passed on to b; c takes the key.
// c's release must wake b.
func TestRelease_wakesWaitersAfterWokenOneGaveUp(t *testing.T) {
	wokenNeverReached(t, true)
}

// wokenNeverReached has a (and, when a gives up, b) wait in one Client and c
// in another behind a third Client's holder, whose release wakes a and c.
// a's attempt then never reaches Redis: the connection drops, or (giveUp)
// a's ctx ends as it is about to send it. c takes the key; its release
// must wake a, or b when a gave up.
func wokenNeverReached(t *testing.T, giveUp bool) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	release := holdElsewhere(t, tg.rdb, key)

	rdb := tg.newRDB(t)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Once armed, the next acquire of a's Client fails without being sent
	// (failed closes then); with giveUp, a's ctx ends first.
	var armed atomic.Bool
	isAcquire, failed := hooktest.Script(scriptTexts(luascripts.Acquire)...), make(chan struct{})
	fail := &kindtest.FailWhen{Err: io.EOF, Match: func(cmds []redis.Cmder) bool {
		if !slices.ContainsFunc(cmds, isAcquire) || !armed.CompareAndSwap(true, false) {
			return false
		}
		if giveUp {
			cancel()
		}
		close(failed)
		return true
	}}
	if giveUp {
		fail.Err = context.Canceled
	}
	rdb.AddHook(fail)
	ca := newClient(t, rdb, slowWaiters...)
	cc := newClient(t, tg.newRDB(t), slowWaiters...)
	wa, wc := newWaiterSet(t, ca, key), newWaiterSet(t, cc, key)
	wa.wait(actx, "a", ca.NewLock(key))
	want := "a"
	if giveUp {
		wa.wait(ctx, "b", ca.NewLock(key))
		want = "b"
	}
	c := cc.NewLock(key)
	wc.wait(ctx, "c", c)

	armed.Store(true)
	release()
	if got := wc.next(10*time.Second, "c woken"); got != "c" {
		t.Fatalf("c's outcome = %q, want c", got)
	}
	if giveUp {
		if got := wa.next(10*time.Second, "a giving up"); got == "a" || got == "b" {
			t.Fatalf("first outcome in a's Client = %q, want a's error", got)
		}
	}
	// a's woken attempt has failed (a waiter still idle from before its
	// wake-up would count as idle too), and a (or b) sleeps.
	waitClosed(t, failed, 10*time.Second, "a's attempt failing")
	waitIdle(t, ca, key, 1)
	must(t, "c.Release()", c.Release(ctx))
	if got := wa.next(wokenWithin, want+" woken by c's release"); got != want {
		t.Fatalf("outcome in a's Client = %q, want %s", got, want)
	}
}

// TestLock_TTL_watchWritesNoKey: in ReleaseWatch mode TTL only reads the
// hold: it writes no P{K}:notify key (the marking release's mark, which a
// copy of the acquire's SET in the TTL call's MULTI once wrote), so the
// hold's release is not told of a waiter that never was.
func TestLock_TTL_watchWritesNoKey(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, tg.rdb, lock.WithReleaseMode(lock.ReleaseWatch))
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	defer l.Release(ctx)
	if _, err := l.TTL(ctx); err != nil {
		t.Fatalf("TTL() error = %v", err)
	}
	if n := tg.rdb.Exists(ctx, lockKey(key)+":notify").Val(); n != 0 {
		t.Fatal("TTL() wrote P{K}:notify")
	}
}

// TestReplicaAck_undoWakesOwnWaiters: with WithReplicaAck on a server with
// no replica, every attempt that takes the key is undone (too few
// acknowledgements: replica.go releases it at once). a and b wait in one
// Client behind another Client's holder, whose release wakes a (and,
// marking, takes their mark); a takes the key and undoes it, its Acquire
// failing. That undo frees the key: b must be woken to try (and fail the
// same way) rather than sleep through its minute's backoff.
func TestReplicaAck_undoWakesOwnWaiters(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	release := holdElsewhere(t, tg.rdb, key)
	c := newClient(t, tg.newRDB(t), append(append([]lock.Option{}, slowWaiters...), lock.WithReplicaAck(1, time.Millisecond))...)
	ws := newWaiterSet(t, c, key)
	ws.wait(ctx, "a", c.NewLock(key))
	ws.wait(ctx, "b", c.NewLock(key))
	release()
	for _, who := range []string{"a", "b"} {
		if got := ws.next(wokenWithin, who+" woken"); got == who {
			t.Fatalf("%s acquired with no replica to acknowledge it", who)
		}
	}
}
