package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// Windows that held: each test has a holder in one Client and waiters in
// others whose backoff is a minute, so that only a release's message wakes
// them in time (see notify_break_test.go).

// slowWaiters are the options of a Client whose waiters wake only by a
// message: a minute's backoff, and a minute's TTL on what they take.
var slowWaiters = []lock.Option{lock.WithTTL(time.Minute), lock.WithBackoff(time.Minute, time.Minute)}

// TestRelease_wakesWaiterAcrossModes: a holder's release wakes a waiter of
// another Client, whatever each side's options (each case once relied on a
// mark the waiter's attempt left: see notify_break_test.go):
// release modes mixed, holder info, audit in the script (the stream in the
// key's slot), re-entrant owners, a holder's Client that does not listen,
// a fair waiter behind a plain holder.
func TestRelease_wakesWaiterAcrossModes(t *testing.T) {
	t.Parallel()
	watch := lock.WithReleaseMode(lock.ReleaseWatch)
	cases := []struct {
		name           string
		holder, waiter []lock.Option
		audit          bool // both audit, to a stream in the key's slot
	}{
		{name: "script"},
		{name: "watchHolder", holder: []lock.Option{watch}},
		{name: "watchWaiter", waiter: []lock.Option{watch}},
		{name: "watchBoth", holder: []lock.Option{watch}, waiter: []lock.Option{watch}},
		{name: "holderInfo", holder: []lock.Option{lock.WithHolderInfo(true)}, waiter: []lock.Option{lock.WithHolderInfo(true)}},
		{name: "audited", audit: true},
		{name: "reentrant", holder: []lock.Option{lock.WithOwner("h")}, waiter: []lock.Option{lock.WithOwner("w")}},
		{name: "holderNotListening", holder: []lock.Option{lock.WithNotify(false)}},
		{name: "fairWaiter", waiter: []lock.Option{lock.WithFair(true)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := realTarget(t)
			ctx := context.Background()
			key := keyFor(t)
			holder := append([]lock.Option{lock.WithTTL(time.Minute)}, tc.holder...)
			waiter := append(append([]lock.Option{}, slowWaiters...), tc.waiter...)
			if tc.audit {
				audit := lock.WithAudit("{"+key+"}:audit", 100)
				holder, waiter = append(holder, audit), append(waiter, audit)
			}
			hc := newClient(t, tg.newRDB(t), holder...)
			wc := newClient(t, tg.newRDB(t), waiter...)
			h := hc.NewLock(key)
			must(t, "holder Acquire()", h.Acquire(ctx))
			ws := newWaiterSet(t, wc, key)
			ws.waitAndRelease(ctx, "w", wc.NewLock(key))
			must(t, "holder Release()", h.Release(ctx))
			if got := ws.next(wokenWithin, "waiter woken by the release"); got != "w" {
				t.Fatalf("waiter's outcome = %q, want w", got)
			}
		})
	}
}

// TestOnce_failedCallWakesOnceWaiter: fn fails in one Client, so its hold
// is released without a result; a Once of another Client waiting on the
// key is woken to run fn itself.
func TestOnce_failedCallWakesOnceWaiter(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	hc := newClient(t, tg.newRDB(t), lock.WithTTL(time.Minute))
	wc := newClient(t, tg.newRDB(t), slowWaiters...)
	inFn, fail := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, _, err := hc.Once(ctx, key, func(context.Context) ([]byte, error) {
			close(inFn)
			<-fail
			return nil, errors.New("fn failed")
		})
		first <- err
	}()
	waitClosed(t, inFn, 10*time.Second, "first fn")
	second := make(chan error, 1)
	go func() {
		v, _, err := wc.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("v"), nil })
		if err == nil && string(v) != "v" {
			err = errors.New("second Once() = " + string(v))
		}
		second <- err
	}()
	waitIdle(t, wc, key, 1)
	close(fail)
	if err := recv(t, first, "first Once()"); err == nil {
		t.Fatal("first Once() error = nil, want fn's")
	}
	select {
	case err := <-second:
		must(t, "second Once()", err)
	case <-time.After(wokenWithin):
		t.Fatalf("second Once() not woken within %v once the first fn failed", wokenWithin)
	}
}

// TestRelease_afterHandoffBoundWakesOtherClient: a Client hands its key
// from waiter to waiter; a waiter of another Client tried the key once,
// before the handoffs (a marking release's mark, left then, is all that
// would tell the last release of it). With 16 waiters the last one's
// release finds none left to hand to, and its Client none waiting. With
// 18 the run of handoffs reaches lease's bound of 16 and a release frees
// the key while the Client still has waiters. Either way the other
// Client's waiter gets its turn (or, if a waiter of the first Client wins
// that race, at the next release).
func TestRelease_afterHandoffBoundWakesOtherClient(t *testing.T) {
	t.Parallel()
	for _, chain := range []int{16, 18} {
		t.Run(fmt.Sprint(chain), func(t *testing.T) {
			tg := realTarget(t)
			ctx := context.Background()
			key := keyFor(t)
			hc := newClient(t, tg.newRDB(t), slowWaiters...)
			oc := newClient(t, tg.newRDB(t), slowWaiters...)
			h := hc.NewLock(key)
			must(t, "holder Acquire()", h.Acquire(ctx))
			hs, os := newWaiterSet(t, hc, key), newWaiterSet(t, oc, key)
			os.waitAndRelease(ctx, "other", oc.NewLock(key))
			for i := range chain {
				hs.waitAndRelease(ctx, string(rune('a'+i)), hc.NewLock(key))
			}
			must(t, "holder Release()", h.Release(ctx))
			for range chain {
				if got := hs.next(wokenWithin, "the Client's chain"); len(got) != 1 {
					t.Fatalf("chain outcome %q", got)
				}
			}
			if got := os.next(wokenWithin, "other Client's waiter"); got != "other" {
				t.Fatalf("other Client's outcome = %q, want other", got)
			}
		})
	}
}
