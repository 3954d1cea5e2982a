// Package kindtest holds the test helpers every lock kind's tests share:
// the core's (package lock_test) and redlock's. Only tests import it.
package kindtest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// ClosedAddr returns a loopback address nothing listens on, for as long
// as the test runs: a dial is refused at once. The port stays reserved
// until the test's cleanup (reserveClosed), so a server that a parallel
// test starts cannot take it meanwhile.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	addr, release, err := reserveClosed()
	if err != nil {
		t.Fatalf("ClosedAddr: %v", err)
	}
	t.Cleanup(release)
	return addr
}

// IsClosed reports whether ch is closed now.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// PrefixOnce fails the test unless every error of errs (by the name of the
// call that returned it) is one and says "lock: " once ("redlock: " ends
// with it): a verb's error names the package, the verb and the key once,
// whatever it wraps.
func PrefixOnce(t testing.TB, errs map[string]error) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		err := errs[name]
		if err == nil {
			t.Fatalf("%s: error = nil, want one", name)
		}
		if n := strings.Count(err.Error(), "lock: "); n != 1 {
			t.Errorf("%s: error %q says \"lock: \" %d times, want once", name, err, n)
		}
	}
}

// Recorder is a lock.Observer that keeps every event but EventRenewed,
// whose number depends on timing, unless Renewals is set.
type Recorder struct {
	Renewals bool // keep EventRenewed too

	mu     sync.Mutex
	events []lock.Event
}

// Observe records e.
func (r *Recorder) Observe(e lock.Event) {
	if e.Kind == lock.EventRenewed && !r.Renewals {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns the events recorded so far.
func (r *Recorder) Events() []lock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]lock.Event(nil), r.events...)
}

// Kinds returns the kind of each event recorded so far.
func (r *Recorder) Kinds() []lock.EventKind {
	var ks []lock.EventKind
	for _, e := range r.Events() {
		ks = append(ks, e.Kind)
	}
	return ks
}

type ctxKey struct{}

// CallerCtx returns a context that CallerCtxOnly recognizes.
func CallerCtx() context.Context {
	return context.WithValue(context.Background(), ctxKey{}, "caller")
}

// CallerCtxOnly fails the test unless the events recorded by r number n,
// those of a call carry the context from CallerCtx, and background ones (a
// loss) carry none.
func CallerCtxOnly(t testing.TB, r *Recorder, n int) {
	t.Helper()
	events := r.Events()
	if len(events) != n {
		t.Fatalf("events %v, want %d", r.Kinds(), n)
	}
	for _, e := range events {
		caller := e.Ctx != nil && e.Ctx.Value(ctxKey{}) == "caller"
		if background := e.Kind == lock.EventLost; caller == background {
			t.Fatalf("%v event Ctx = %v, want the caller's for a call's events and nil for a loss", e.Kind, e.Ctx)
		}
	}
}

// Locker is what every lock kind offers a holder.
type Locker interface {
	Acquire(context.Context) error
	Release(context.Context) error
	Fence() int64
}

// Exclusion runs critical sections of many holders of one key and checks
// that none overlapped and that fences came out strictly increasing in the
// order holders entered.
type Exclusion struct {
	inside, overlaps atomic.Int32
	mu               sync.Mutex
	fences           []int64
	errs             chan error
	wg               sync.WaitGroup
}

// Worker starts a goroutine that, rounds times, makes a lock with newLock,
// acquires it, runs section, and releases it.
func (x *Exclusion) Worker(ctx context.Context, rounds int, newLock func() Locker, section func() error) {
	if x.errs == nil {
		x.errs = make(chan error, 1024)
	}
	x.wg.Go(func() {
		for range rounds {
			l := newLock()
			if err := l.Acquire(ctx); err != nil {
				x.errs <- err
				return
			}
			if x.inside.Add(1) != 1 {
				x.overlaps.Add(1)
			}
			x.mu.Lock()
			x.fences = append(x.fences, l.Fence())
			x.mu.Unlock()
			if err := section(); err != nil {
				x.errs <- err
			}
			x.inside.Add(-1)
			if err := l.Release(ctx); err != nil {
				x.errs <- err
				return
			}
		}
	})
}

// Check waits for every worker and fails the test on a worker's error, an
// overlap, a hold count other than holds, or fences not strictly
// increasing. It returns the fences in the order holders entered.
func (x *Exclusion) Check(t testing.TB, holds int) []int64 {
	t.Helper()
	x.wg.Wait()
	if x.errs != nil {
		close(x.errs)
		for err := range x.errs {
			t.Fatalf("worker error = %v", err)
		}
	}
	if n := x.overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections, want 0", n)
	}
	if len(x.fences) != holds {
		t.Fatalf("holds = %d, want %d", len(x.fences), holds)
	}
	for i := 1; i < len(x.fences); i++ {
		if x.fences[i] <= x.fences[i-1] {
			t.Fatalf("fence %d entered after fence %d: not strictly increasing", x.fences[i], x.fences[i-1])
		}
	}
	return x.fences
}

// Handle is a lock handle of any kind, as its holder uses it.
type Handle interface {
	Locker
	TryAcquire(context.Context) (bool, error)
	Extend(context.Context, time.Duration) error
	Lost() <-chan struct{}
}

// EveryCall makes each kind of call on l with ctx — Acquire, Extend,
// Release, then TryAcquire, which leaves l held — failing the test on an
// error. The Observer sees six events: the start and end of each
// acquisition, the extend and the release.
func EveryCall(t testing.TB, ctx context.Context, l Handle) {
	t.Helper()
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	if err := l.Extend(ctx, time.Second); err != nil {
		t.Fatalf("Extend() error = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() error = %v", err)
	}
	if ok, err := l.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
	}
}
