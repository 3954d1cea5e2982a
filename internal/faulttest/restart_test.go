package faulttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// holdRecord is one hold watched through a Redis fault.
type holdRecord struct {
	key      string
	expiry   time.Time // conservative server-side expiry, read just before the fault
	lostAt   time.Time
	reason   lock.LossReason
	withLock bool
	fnCause  error // WithLock: context.Cause of fn's ctx
	result   error // WithLock's return
}

// freezeExpiries stops every write on s with CLIENT PAUSE (so no renewal
// can move an expiry any more) and returns, per lock key, the earliest time
// its TTL can run out on the server: read start + PTTL.
func freezeExpiries(ctx context.Context, t *testing.T, rdb *redis.Client, keys []string) map[string]time.Time {
	t.Helper()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	out := map[string]time.Time{}
	for _, k := range keys {
		start := time.Now()
		d, err := rdb.PTTL(ctx, lock.DefaultPrefix+"{"+k+"}").Result()
		if err != nil || d <= 0 {
			t.Fatalf("PTTL %s = %v, %v; want a live lock", k, d, err)
		}
		out[k] = start.Add(d)
	}
	return out
}

// TestRestart_redisKilledDuringHolds kills redis-server while a Client holds
// several locks (half through WithLock, half through Acquire) and restarts
// it empty, soon or only after the TTL. Every hold must be reported lost
// before its TTL could have run out on the server, WithLock's ctx must end
// with a *LostError cause and WithLock must return ErrLockLost; new
// acquisitions must work afterwards.
func TestRestart_redisKilledDuringHolds(t *testing.T) {
	const ttl = 3 * time.Second
	for _, tc := range []struct {
		name  string
		after time.Duration // from the kill to the restart
	}{
		{"restartWithinTTL", 300 * time.Millisecond},
		{"restartAfterTTL", ttl + 500*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restartDuringHolds(t, ttl, tc.after)
		})
	}
}

func restartDuringHolds(t *testing.T, ttl, restartAfter time.Duration) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	admin := s.Client(t)
	locks := lock.NewClient(rdb, lock.WithTTL(ttl))
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const n = 8
	// Earlier holds push the fence counters up, so that the restart's reset
	// of them shows.
	for i := range n {
		for range 5 {
			l := locks.NewLock(fmt.Sprintf("restart-%d", i))
			if err := l.Acquire(ctx); err != nil {
				t.Fatalf("Acquire() error = %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release() error = %v", err)
			}
		}
	}
	recs := make([]*holdRecord, n)
	var keys []string
	var wg sync.WaitGroup
	heldCh := make(chan int64, n)
	for i := range recs {
		r := &holdRecord{key: fmt.Sprintf("restart-%d", i), withLock: i%2 == 0}
		recs[i] = r
		keys = append(keys, r.key)
		if r.withLock {
			wg.Go(func() {
				r.result = locks.WithLock(ctx, r.key, func(fctx context.Context) error {
					heldCh <- 0
					<-fctx.Done()
					r.lostAt = time.Now()
					r.fnCause = context.Cause(fctx)
					return nil
				})
			})
			continue
		}
		l := locks.NewLock(r.key)
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("Acquire(%s) error = %v", r.key, err)
		}
		heldCh <- l.Fence()
		wg.Go(func() {
			select {
			case <-l.Lost():
				r.lostAt = time.Now()
				var le *lock.LostError
				if errors.As(l.LostErr(), &le) {
					r.reason = le.Reason
				}
			case <-ctx.Done():
			}
		})
	}
	for range n {
		<-heldCh
	}
	maxFence, err := admin.Get(ctx, lock.DefaultPrefix+"{restart-0}:fence").Int64()
	if err != nil {
		t.Fatalf("GET fence: %v", err)
	}
	// Let renewal run a couple of rounds first.
	time.Sleep(ttl / 2)

	expiry := freezeExpiries(ctx, t, admin, keys)
	s.Kill()
	killed := time.Now()
	time.Sleep(restartAfter)
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart() error = %v", err)
	}
	// Another process's view: the empty server grants restart-1 at once,
	// while its first holder may not have been told yet.
	other := lock.NewClient(s.Client(t), lock.WithTTL(ttl))
	defer other.Close()
	second := other.NewLock("restart-1")
	if err := second.Acquire(ctx); err != nil {
		t.Fatalf("second client Acquire() after restart: %v", err)
	}
	secondAt := time.Now()
	wg.Wait()
	// How long the first holder still believed it held restart-1 while
	// the second did: what a restart without persistence costs.
	doubleGrant := max(recs[1].lostAt.Sub(secondAt), 0)
	if err := second.Release(ctx); err != nil {
		t.Errorf("second Release() error = %v", err)
	}

	reasons := map[string]int{}
	minMargin := time.Hour
	for _, r := range recs {
		r.expiry = expiry[r.key]
		if r.lostAt.IsZero() {
			t.Errorf("%s: hold never reported lost", r.key)
			continue
		}
		if r.withLock {
			var le *lock.LostError
			if !errors.As(r.fnCause, &le) {
				t.Errorf("%s: fn ctx cause = %v, want a *lock.LostError", r.key, r.fnCause)
			} else {
				r.reason = le.Reason
			}
			if !errors.Is(r.result, lock.ErrLockLost) {
				t.Errorf("%s: WithLock() error = %v, want ErrLockLost", r.key, r.result)
			}
		}
		reasons[r.reason.String()]++
		margin := r.expiry.Sub(r.lostAt)
		minMargin = min(minMargin, margin)
		if margin <= 0 {
			t.Errorf("%s: lost %v after its server-side expiry, want before", r.key, -margin)
		}
	}

	// The server is back, empty: new holds must work. Its fence counters
	// are gone too: they restart from the server's clock, above the lost
	// values.
	l := locks.NewLock("restart-0")
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() after restart: %v", err)
	}
	after := time.Since(killed)
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release() after restart: %v", err)
	}
	if l.Fence() <= maxFence {
		t.Errorf("fence after restart %d <= %d before: a counter lost in a restart must restart above its values", l.Fence(), maxFence)
	}
	figure(t, "redis_restart", "ttl_ms", ttl.Milliseconds(), "restart_after_ms", restartAfter.Milliseconds(),
		"holds", n, "lost", n-countZero(recs), "min_margin_before_expiry_ms", minMargin.Milliseconds(),
		"reasons", fmtCounts(reasons), "reacquired_after_kill_ms", after.Milliseconds(),
		"fence_before", maxFence, "fence_after_restart", l.Fence(), "double_grant_ms", doubleGrant.Milliseconds())
}

func countZero(recs []*holdRecord) int {
	n := 0
	for _, r := range recs {
		if r.lostAt.IsZero() {
			n++
		}
	}
	return n
}

// fmtCounts renders counts as one greppable field: name:n,name:n.
func fmtCounts(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", strings.ReplaceAll(k, " ", "_"), m[k])
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
