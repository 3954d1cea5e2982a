package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// campaignAsync starts e's Campaign with value and returns where its error
// will arrive.
func campaignAsync(ctx context.Context, e *lock.Election, value string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- e.Campaign(ctx, value) }()
	return done
}

// wantState reads ch until a state with want's value and leading (or not)
// arrives, failing on a term that goes backwards or on the deadline; it
// returns that state.
func wantState(t *testing.T, ch <-chan lock.Leadership, want string, last *int64) lock.Leadership {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("Observe() closed before the state %q", want)
			}
			if l.Term != 0 && l.Term < *last {
				t.Fatalf("Observe() gave term %d after term %d", l.Term, *last)
			}
			if l.Term != 0 {
				*last = l.Term
			}
			if l.Value == want && (want == "") == (l.Term == 0) {
				return l
			}
		case <-timeout.C:
			t.Fatalf("Observe() gave no state %q", want)
		}
	}
}

// TestElection_resignHandsOver: a candidate waiting behind a leader with a
// one-hour TTL and backoff leads as soon as the leader resigns: the
// resign's message wakes it, not a timer; its term is greater; the
// resigned leader's Lost stays open.
func TestElection_resignHandsOver(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key := keyFor(t)
		c1 := newClient(t, tg.rdb, lock.WithTTL(time.Hour))
		c2 := newClient(t, tg.newRDB(t), lock.WithTTL(time.Hour), lock.WithBackoff(time.Hour, time.Hour))
		a, b := c1.NewElection(key), c2.NewElection(key)
		must(t, "a.Campaign()", a.Campaign(ctx, "a"))
		l, err := b.Leader(ctx)
		must(t, "Leader()", err)
		if l.Value != "a" || l.Term != a.Term() || l.Term <= 0 || l.Since.IsZero() {
			t.Fatalf("Leader() = %+v, want a's value and term %d", l, a.Term())
		}
		done := campaignAsync(ctx, b, "b")
		waitUntil(t, "b listening", func() bool { return lock.ElectionListening(b) })
		select {
		case err := <-done:
			t.Fatalf("b.Campaign() = %v while a leads", err)
		default:
		}
		must(t, "a.Resign()", a.Resign(ctx))
		must(t, "b.Campaign()", <-done)
		if b.Term() <= a.Term() {
			t.Fatalf("b's term %d, a's %d: want greater", b.Term(), a.Term())
		}
		select {
		case <-a.Lost():
			t.Fatal("a's Lost() closed by its Resign")
		default:
		}
		if l, err := a.Leader(ctx); err != nil || l.Value != "b" || l.Term != b.Term() {
			t.Fatalf("Leader() = %+v, %v; want b in term %d", l, err, b.Term())
		}
		wantErr(t, "a.Resign() again", a.Resign(ctx), lock.ErrNotHeld)
		must(t, "b.Resign()", b.Resign(ctx))
		if _, err := a.Leader(ctx); !errors.Is(err, lock.ErrNoLeader) {
			t.Fatalf("Leader() after the last resign = %v, want ErrNoLeader", err)
		}
	})
}

// TestElection_observe: an observer sees nobody, then each leader, a
// proclaimed value and nobody again, in term order.
func TestElection_observe(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key := keyFor(t)
		c := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
		watcher := newClient(t, tg.newRDB(t))
		octx, stop := context.WithCancel(ctx)
		ch := watcher.NewElection(key).Observe(octx)
		var last int64
		wantState(t, ch, "", &last)
		a, b := c.NewElection(key), c.NewElection(key)
		must(t, "a.Campaign()", a.Campaign(ctx, "a"))
		if l := wantState(t, ch, "a", &last); l.Term != a.Term() {
			t.Fatalf("observed term %d, a's is %d", l.Term, a.Term())
		}
		must(t, "a.Proclaim()", a.Proclaim(ctx, "a2"))
		if l := wantState(t, ch, "a2", &last); l.Term != a.Term() {
			t.Fatalf("proclaimed term %d, a's is %d", l.Term, a.Term())
		}
		must(t, "a.Resign()", a.Resign(ctx))
		wantState(t, ch, "", &last)
		must(t, "b.Campaign()", b.Campaign(ctx, "b"))
		if l := wantState(t, ch, "b", &last); l.Term != b.Term() || l.Term <= a.Term() {
			t.Fatalf("observed b in term %d (b's %d, a's %d)", l.Term, b.Term(), a.Term())
		}
		stop()
		for range ch { // closed once ctx ends
		}
		must(t, "b.Resign()", b.Resign(ctx))
	})
}

// TestElection_badInput: bad input is ErrInvalid; verbs of a candidate
// that does not lead are ErrNotHeld; a name held by a mutex is refused.
func TestElection_badInput(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	e := c.NewElection(key)
	wantErr(t, "NewElection(\"\").Campaign()", c.NewElection("").Campaign(ctx, "v"), lock.ErrInvalid)
	wantErr(t, "Campaign(\"\")", e.Campaign(ctx, ""), lock.ErrInvalid)
	wantErr(t, "Lead(nil)", e.Lead(ctx, "v", nil), lock.ErrInvalid)
	wantErr(t, "Lead(\"\")", e.Lead(ctx, "", func(context.Context) error { return nil }), lock.ErrInvalid)
	wantErr(t, "zero Campaign()", new(lock.Election).Campaign(ctx, "v"), lock.ErrInvalid)
	wantErr(t, "WithFencing(false)", c.NewElection(key, lock.WithFencing(false)).Campaign(ctx, "v"), lock.ErrInvalid)
	wantErr(t, "Proclaim() not leading", e.Proclaim(ctx, "v"), lock.ErrNotHeld)
	wantErr(t, "Resign() not leading", e.Resign(ctx), lock.ErrNotHeld)
	if _, err := e.Leader(ctx); !errors.Is(err, lock.ErrNoLeader) {
		t.Fatalf("Leader() = %v, want ErrNoLeader", err)
	}
	if e.Term() != 0 || e.Lost() != nil {
		t.Fatalf("before a term: Term() %d, Lost() %v; want 0, nil", e.Term(), e.Lost())
	}
	must(t, "Campaign()", e.Campaign(ctx, "v"))
	wantErr(t, "Campaign() while leading", e.Campaign(ctx, "v"), lock.ErrInvalid)
	wantErr(t, "Proclaim(\"\")", e.Proclaim(ctx, ""), lock.ErrInvalid)
	must(t, "Resign()", e.Resign(ctx))

	m := c.NewLock(key + ":m")
	must(t, "Acquire()", m.Acquire(ctx))
	wantErr(t, "Campaign() on a mutex", c.NewElection(key+":m").Campaign(ctx, "v"), lock.ErrInvalid)
	if _, err := c.NewElection(key + ":m").Leader(ctx); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Leader() of a mutex = %v, want ErrInvalid", err)
	}
	must(t, "Campaign()", e.Campaign(ctx, "v"))
	ok, err := c.NewLock(key).TryAcquire(ctx)
	if ok || !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "election") {
		t.Fatalf("mutex TryAcquire() on an election = %v, %v; want ErrInvalid naming the election", ok, err)
	}
	must(t, "Resign()", e.Resign(ctx))
	ch := new(lock.Election).Observe(ctx)
	if _, ok := <-ch; ok {
		t.Fatal("Observe() of a zero Election gave a state")
	}
}

// TestElection_leadCancelsOnLoss: when the term is lost while fn runs,
// fn's ctx ends with a LostError and Lead's error matches ErrLockLost;
// Lead resigns when fn returns.
func TestElection_leadCancelsOnLoss(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key := keyFor(t)
		c := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
		e := c.NewElection(key)
		err := e.Lead(ctx, "v", func(ctx context.Context) error {
			if l, err := e.Leader(ctx); err != nil || l.Term != e.Term() {
				t.Errorf("Leader() in fn = %+v, %v", l, err)
			}
			tg.expire(t, key) // the term vanishes
			<-ctx.Done()
			var le *lock.LostError
			if !errors.As(context.Cause(ctx), &le) {
				t.Errorf("fn's ctx cause = %v, want a LostError", context.Cause(ctx))
			}
			return nil
		})
		wantErr(t, "Lead()", err, lock.ErrLockLost)
		if !errors.Is(e.LostErr(), lock.ErrLockLost) {
			t.Fatalf("LostErr() = %v, want ErrLockLost", e.LostErr())
		}
		must(t, "Lead() again", e.Lead(ctx, "v", func(context.Context) error { return nil }))
		if _, err := e.Leader(ctx); !errors.Is(err, lock.ErrNoLeader) {
			t.Fatalf("Leader() after Lead() = %v, want ErrNoLeader (resigned)", err)
		}
	})
}

// TestElection_inspect: Inspect and List show an election as kind
// "election", its leader as the holder with the value and the term.
func TestElection_inspect(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.rdb)
		e := c.NewElection(key)
		must(t, "Campaign()", e.Campaign(ctx, "host-a:8080"))
		info, err := c.Inspect(ctx, key)
		must(t, "Inspect()", err)
		if info.Kind != "election" || len(info.Holders) != 1 || info.Fence != e.Term() {
			t.Fatalf("Inspect() = %+v, want kind election, one holder, fence %d", info, e.Term())
		}
		h := info.Holders[0]
		if h.Metadata != "host-a:8080" || h.Fence != e.Term() || h.Since.IsZero() || h.TTL <= 0 {
			t.Fatalf("holder = %+v, want the leader's value, term %d, since and TTL", h, e.Term())
		}
		must(t, "ForceRelease()", c.ForceRelease(ctx, key))
		waitClosed(t, e.Lost(), 5*time.Second, "Lost() after ForceRelease")
		if _, err := e.Leader(ctx); !errors.Is(err, lock.ErrNoLeader) {
			t.Fatalf("Leader() after ForceRelease = %v, want ErrNoLeader", err)
		}
	})
}
