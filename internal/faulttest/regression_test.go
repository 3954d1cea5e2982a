package faulttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestRegression_renewalStuckPastDeadline: with go-redis's default options
// (ContextTimeoutEnabled false) a call ignores its context's deadline and
// waits for ReadTimeout (3s), so a renewal stuck on a partitioned
// connection returns only after the hold's TTL has run out on the server.
// Lost() must still fire at the safety deadline, before another client can
// take the lock. (Found by this suite; the core used to report the loss
// seconds after the other client held the lock.)
func TestRegression_renewalStuckPastDeadline(t *testing.T) {
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
	lostCh := make(chan time.Time, 1)
	go func() {
		select {
		case <-l.Lost():
			lostCh <- time.Now()
		case <-time.After(8 * time.Second):
			lostCh <- time.Time{}
		}
	}()
	addToxic(t, p, "cut-up", "timeout", "upstream", `{"timeout":0}`)
	addToxic(t, p, "cut-down", "timeout", "downstream", `{"timeout":0}`)
	cut := time.Now()

	o2 := other.NewLock("core-bug-partition")
	if err := o2.Acquire(ctx); err != nil {
		t.Fatalf("other Acquire() error = %v", err)
	}
	otherAt := time.Since(cut)
	defer o2.Release(context.Background())
	lostAt := time.Duration(-1)
	if at := <-lostCh; !at.IsZero() {
		lostAt = at.Sub(cut)
	}
	figure(t, "renewal_stuck_default_client", "ttl_ms", ttl.Milliseconds(), "read_timeout_ms", 3000,
		"lost_after_partition_ms", lostAt.Milliseconds(), "other_held_after_ms", otherAt.Milliseconds())
	if lostAt < 0 || lostAt > otherAt {
		t.Errorf("Lost() fired at %v, after another client took the lock at %v; want before", lostAt, otherAt)
	}
}

// TestRegression_lateAcquireReply: when the reply to a successful acquire
// arrives after the lease's safety deadline (reply latency above the TTL),
// Acquire must not report the lock held. (Found by this suite; the core
// used to return nil for a lease that had already run out, while another
// client could hold the lock.)
func TestRegression_lateAcquireReply(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	err := l.Acquire(ctx)
	figure(t, "late_acquire_reply", "ttl_ms", ttl.Milliseconds(), "reply_latency_ms", 800,
		"acquire_refused", err != nil, "after_ms", time.Since(start).Milliseconds())
	if err != nil {
		if !errors.Is(err, lock.ErrNotAcquired) {
			t.Errorf("Acquire() error = %v, want ErrNotAcquired", err)
		}
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
