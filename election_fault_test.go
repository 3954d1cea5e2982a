package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// TestElection_stalledLeaderNeverOverlaps: a leader whose renewals are
// held before they reach Redis (a stalled connection) reports its term
// lost before a waiting candidate can lead: when the other candidate's
// Campaign returns, the first one's Lost has closed already.
func TestElection_stalledLeaderNeverOverlaps(t *testing.T) {
	t.Parallel()
	const ttl = 600 * time.Millisecond
	srv := redistest.Start(t, redistest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyFor(t)
	stalled := srv.Client(t)
	g := hooktest.New(t, hooktest.Config{On: hooktest.Pipelines, Match: hooktest.AnyScript})
	stalled.AddHook(g)
	ca := newClient(t, stalled, lock.WithTTL(ttl))
	t.Cleanup(g.Release) // before the Client closes: it waits for the renewal held
	cb := newClient(t, srv.Client(t), lock.WithTTL(ttl))
	a, b := ca.NewElection(key), cb.NewElection(key)
	must(t, "a.Campaign()", a.Campaign(ctx, "a"))
	g.Arm()
	must(t, "b.Campaign()", b.Campaign(ctx, "b"))
	select {
	case <-a.Lost():
	default:
		t.Fatal("b leads while a's term is not reported lost: two leaders")
	}
	if b.Term() <= a.Term() {
		t.Fatalf("b's term %d, a's %d: want greater", b.Term(), a.Term())
	}
	wantErr(t, "a.Proclaim() after the loss", a.Proclaim(ctx, "a2"), lock.ErrNotHeld)
	if l, err := b.Leader(ctx); err != nil || l.Value != "b" {
		t.Fatalf("Leader() = %+v, %v; want b", l, err)
	}
	must(t, "b.Resign()", b.Resign(ctx))
}

// TestElection_crashTakeover: a leader whose process stops without
// resigning (its Client closed, nothing renews) is replaced once its term
// runs out; the new term is greater, and an observer ends at the new
// leader.
func TestElection_crashTakeover(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyFor(t)
	crashed := lock.NewClient(tg.newRDB(t), lock.WithTTL(time.Second))
	a := crashed.NewElection(key)
	must(t, "a.Campaign()", a.Campaign(ctx, "a"))
	watcher := newClient(t, tg.newRDB(t))
	octx, stop := context.WithCancel(ctx)
	defer stop()
	ch := watcher.NewElection(key).Observe(octx)
	var last int64
	wantState(t, ch, "a", &last)
	must(t, "Close()", crashed.Close())
	c := newClient(t, tg.rdb, lock.WithTTL(time.Second))
	b := c.NewElection(key)
	must(t, "b.Campaign()", b.Campaign(ctx, "b"))
	if b.Term() <= a.Term() {
		t.Fatalf("b's term %d, a's %d: want greater", b.Term(), a.Term())
	}
	if l := wantState(t, ch, "b", &last); l.Term != b.Term() {
		t.Fatalf("observed b in term %d, b's is %d", l.Term, b.Term())
	}
	must(t, "b.Resign()", b.Resign(ctx))
}

// TestElection_restartWithoutPersistence: Redis restarts with no data;
// the leader's term is reported lost, and the next term is still greater
// than every term before, though the counter restarted.
// Not parallel: restarts its server.
func TestElection_restartWithoutPersistence(t *testing.T) {
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyFor(t)
	c := newClient(t, tg.rdb, lock.WithTTL(time.Second))
	a, b := c.NewElection(key), c.NewElection(key)
	must(t, "a.Campaign()", a.Campaign(ctx, "a"))
	if err := tg.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, a.Lost(), 10*time.Second, "a.Lost() after the restart")
	must(t, "b.Campaign()", b.Campaign(ctx, "b"))
	if b.Term() <= a.Term() {
		t.Fatalf("term after the restart %d, before %d: want greater", b.Term(), a.Term())
	}
	must(t, "b.Resign()", b.Resign(ctx))
	if !errors.Is(a.LostErr(), lock.ErrLockLost) {
		t.Fatalf("a.LostErr() = %v, want ErrLockLost", a.LostErr())
	}
}

// TestElection_cluster: on a Redis Cluster an election lives in one slot;
// a resign hands over and an observer follows.
func TestElection_cluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	rdb := cl.NewClient()
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyFor(t)
	c := newClient(t, rdb, lock.WithTTL(time.Minute))
	octx, stop := context.WithCancel(ctx)
	defer stop()
	ch := c.NewElection(key).Observe(octx)
	var last int64
	wantState(t, ch, "", &last)
	a, b := c.NewElection(key), c.NewElection(key)
	must(t, "a.Campaign()", a.Campaign(ctx, "a"))
	wantState(t, ch, "a", &last)
	done := campaignAsync(ctx, b, "b")
	must(t, "a.Resign()", a.Resign(ctx))
	must(t, "b.Campaign()", <-done)
	if l := wantState(t, ch, "b", &last); l.Term != b.Term() || b.Term() <= a.Term() {
		t.Fatalf("observed b in term %d; b's %d, a's %d", l.Term, b.Term(), a.Term())
	}
	must(t, "b.Resign()", b.Resign(ctx))
	wantState(t, ch, "", &last)
}

// TestElection_lostResign: a Resign whose reply never comes back (it ran
// in Redis) returns at its deadline with an error; the waiting candidate
// leads, and the resigned one no longer acts as leader: Proclaim is
// ErrNotHeld, and its Lost stays open (it resigned; nothing took it).
func TestElection_lostResign(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyFor(t)
	rdb := srv.Client(t)
	g := hooktest.New(t, hooktest.Config{On: hooktest.Calls, After: true, Nth: 1,
		Match: hooktest.Script(luascripts.ElectionResign.Hash(), luascripts.ElectionResignSrc)})
	rdb.AddHook(g)
	ca := newClient(t, rdb, lock.WithTTL(time.Minute))
	t.Cleanup(g.Release)
	cb := newClient(t, srv.Client(t), lock.WithTTL(time.Minute), lock.WithBackoff(time.Hour, time.Hour))
	a, b := ca.NewElection(key), cb.NewElection(key)
	must(t, "a.Campaign()", a.Campaign(ctx, "a"))
	// Loaded, so that the reply held is the resign's own, not a NOSCRIPT.
	must(t, "Load()", luascripts.ElectionResign.Load(ctx, rdb).Err())
	done := campaignAsync(ctx, b, "b")
	g.Arm()
	rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer rcancel()
	if err := a.Resign(rctx); err == nil {
		t.Fatal("a.Resign() with its reply held = nil, want an error")
	}
	must(t, "b.Campaign()", <-done)
	wantErr(t, "a.Proclaim() after the resign", a.Proclaim(ctx, "a2"), lock.ErrNotHeld)
	select {
	case <-a.Lost():
		t.Fatal("a's Lost() closed by its own resign")
	default:
	}
	if l, err := b.Leader(ctx); err != nil || l.Value != "b" || l.Term <= a.Term() {
		t.Fatalf("Leader() = %+v, %v; want b in a later term than %d", l, err, a.Term())
	}
	g.Release()
	must(t, "b.Resign()", b.Resign(ctx))
}

// TestElection_stuckObserver: an observer that never reads blocks no
// other observer and no leader change; its channel holds the latest state.
func TestElection_stuckObserver(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyFor(t)
	c := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
	stuck := c.NewElection(key).Observe(ctx)
	live := c.NewElection(key).Observe(ctx)
	var last int64
	wantState(t, live, "", &last)
	e := c.NewElection(key)
	for i := range 20 {
		v := fmt.Sprint("v", i)
		must(t, "Campaign()", e.Campaign(ctx, v))
		wantState(t, live, v, &last)
		must(t, "Resign()", e.Resign(ctx))
		wantState(t, live, "", &last)
	}
	must(t, "Campaign()", e.Campaign(ctx, "final"))
	wantState(t, live, "final", &last)
	var stuckLast int64
	if l := wantState(t, stuck, "final", &stuckLast); l.Term != e.Term() {
		t.Fatalf("the stuck observer ends at term %d, want %d", l.Term, e.Term())
	}
	must(t, "Resign()", e.Resign(ctx))
}

// TestElection_observeAfterReconnect: an observer whose subscription
// breaks misses the messages of the changes made meanwhile (its redial is
// held); once it is subscribed again it reads the state, and ends at the
// current leader, with a one-hour backoff, so the reconnect is what made
// it look.
func TestElection_observeAfterReconnect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyFor(t)
	rdb := srv.Client(t)
	g := hooktest.New(t, hooktest.Config{On: hooktest.Dials})
	rdb.AddHook(g)
	oc := newClient(t, rdb, lock.WithBackoff(time.Hour, time.Hour))
	t.Cleanup(g.Release)
	c := newClient(t, srv.Client(t), lock.WithTTL(time.Minute))
	octx, stop := context.WithCancel(ctx)
	defer stop()
	ch := oc.NewElection(key).Observe(octx)
	var last int64
	wantState(t, ch, "", &last)
	a, b := c.NewElection(key), c.NewElection(key)
	must(t, "a.Campaign()", a.Campaign(ctx, "a"))
	wantState(t, ch, "a", &last)

	g.Arm()
	if err := srv.Client(t).ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub: %v", err)
	}
	select {
	case <-g.Held():
	case <-ctx.Done():
		t.Fatal("the subscription did not redial")
	}
	must(t, "a.Resign()", a.Resign(ctx))
	must(t, "b.Campaign()", b.Campaign(ctx, "b"))
	g.Release()
	if l := wantState(t, ch, "b", &last); l.Term != b.Term() {
		t.Fatalf("observed b in term %d, b's is %d", l.Term, b.Term())
	}
	must(t, "b.Resign()", b.Resign(ctx))
}
