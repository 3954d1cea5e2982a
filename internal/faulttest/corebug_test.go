package faulttest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// coreBugsEnv runs the repros of known core bugs, which fail until the core
// is fixed: FAULTTEST_CORE_BUGS=1 go test -run TestCoreBug ./...
const coreBugsEnv = "FAULTTEST_CORE_BUGS"

func requireCoreBugs(t *testing.T) {
	t.Helper()
	if os.Getenv(coreBugsEnv) == "" {
		t.Skipf("repro of a known core bug (see SAFETY.md); set %s=1 to run it", coreBugsEnv)
	}
}

// TestCoreBug_renewalOutlivesDeadline: with go-redis's default options
// (ContextTimeoutEnabled false) a call ignores its context's deadline and
// waits for ReadTimeout (3s). A renewal stuck on a partitioned connection
// therefore returns only after the hold's TTL has run out on the server,
// and the renewal loop does not look at the hold's safety deadline while
// its renewal is in flight: Lost() fires seconds after another client has
// taken the lock. DESIGN.md: "every renewal call carries a timeout that ends
// before that deadline".
func TestCoreBug_renewalOutlivesDeadline(t *testing.T) {
	requireCoreBugs(t)
	const ttl = time.Second
	s := redistest.Start(t, redistest.Config{})
	p := startProxy(t, s.Addr())
	o := s.Options()
	o.Addr = p.Listen // ContextTimeoutEnabled stays false, as by default
	faulty := redis.NewClient(o)
	defer faulty.Close()
	locks := lock.NewClient(faulty, lock.WithTTL(ttl))
	defer locks.Close()
	other := lock.NewClient(s.Client(t), lock.WithTTL(ttl))
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l := locks.NewLock("core-bug-partition")
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	addToxic(t, p, "cut-up", "timeout", "upstream", `{"timeout":0}`)
	addToxic(t, p, "cut-down", "timeout", "downstream", `{"timeout":0}`)
	cut := time.Now()

	o2 := other.NewLock("core-bug-partition")
	if err := o2.Acquire(ctx); err != nil {
		t.Fatalf("other Acquire() error = %v", err)
	}
	otherAt := time.Since(cut)
	defer o2.Release(context.Background())
	var lostAt time.Duration
	select {
	case <-l.Lost():
		lostAt = time.Since(cut)
	case <-time.After(5 * time.Second):
		lostAt = -1
	}
	t.Logf("partition at 0: other client held the lock at %v, partitioned holder's Lost() at %v", otherAt, lostAt)
	if lostAt < 0 || lostAt > otherAt {
		t.Errorf("Lost() fired at %v, after another client took the lock at %v; want before", lostAt, otherAt)
	}
}

// TestCoreBug_lateAcquireReply: when the reply to a successful acquire
// arrives after the lease has run out (latency above the TTL), Acquire
// returns nil for a hold Redis no longer has, and another client can hold
// the lock at the same time. The hold is only reported lost afterwards, by
// the renewal loop.
func TestCoreBug_lateAcquireReply(t *testing.T) {
	requireCoreBugs(t)
	const ttl = 500 * time.Millisecond
	s := redistest.Start(t, redistest.Config{})
	p := startProxy(t, s.Addr())
	o := s.Options()
	o.Addr = p.Listen
	o.ContextTimeoutEnabled = true
	o.ReadTimeout = 5 * time.Second
	slow := redis.NewClient(o)
	defer slow.Close()
	if err := slow.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	addToxic(t, p, "lat", "latency", "downstream", `{"latency":800}`)
	locks := lock.NewClient(slow, lock.WithTTL(ttl))
	defer locks.Close()
	other := lock.NewClient(s.Client(t), lock.WithTTL(ttl))
	defer other.Close()

	l := locks.NewLock("core-bug-late")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Acquire(ctx); err != nil {
		t.Logf("Acquire() error = %v: the late reply was refused (the fixed behaviour)", err)
		return
	}
	lostAtReturn := false
	select {
	case <-l.Lost():
		lostAtReturn = true
	default:
	}
	ok, err := other.NewLock("core-bug-late").TryAcquire(ctx)
	if err != nil {
		t.Fatalf("other TryAcquire() error = %v", err)
	}
	if ok && !lostAtReturn {
		t.Errorf("Acquire() returned nil for a lease that had already run out: another client holds the lock at the same time")
	}
}
