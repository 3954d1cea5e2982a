package lock

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// hookBackend is a fakeBackend whose Extend and Release calls (not the
// renewal loop's, which go to the fakeBackend directly) run hooks, so a test
// can order them against other calls.
type hookBackend struct {
	*fakeBackend
	beforeExtend func()
	afterExtend  func()
	afterRelease func()
	beforeRenew  func()
}

func (b *hookBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	if b.beforeRenew != nil {
		b.beforeRenew()
	}
	b.fakeBackend.renew(ctx, items, st, errs)
}

func (b *hookBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	if b.beforeExtend != nil {
		b.beforeExtend()
	}
	st, err := b.fakeBackend.extend(ctx, k, token, ttl)
	if b.afterExtend != nil {
		b.afterExtend()
	}
	return st, err
}

func (b *hookBackend) release(ctx context.Context, k *keys, token string) (extendStatus, error) {
	st, err := b.fakeBackend.release(ctx, k, token)
	if b.afterRelease != nil {
		b.afterRelease()
	}
	return st, err
}

// reviewClient is fakeClient over any backend.
func reviewClient(be backend, opts ...Option) *Client { return newClientWithBackend(be, opts...) }

// TestReview_extendOutstandingDuringRenewal: an Extend that lengthens the
// TTL is sent; while it is out, a renewal with the old TTL is sent, lands in
// Redis after the Extend and is answered first. Redis now has the old, short
// TTL, yet extended() trusts the Extend alone: the hold keeps a deadline 27s
// away and is next renewed at 10.5s, long after the key expired at 4s.
func TestReview_extendOutstandingDuringRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		gate := make(chan struct{})
		b := &hookBackend{fakeBackend: f}
		c := reviewClient(b)
		defer c.Close()
		l := c.NewLock("k", WithTTL(3*time.Second))
		mustAcquire(t, l) // t=0; renewal due at 1s
		time.Sleep(500 * time.Millisecond)
		b.afterExtend = func() { <-gate } // applied in Redis at 0.5s, answered at 1.5s
		done := make(chan error, 1)
		go func() { done <- l.Extend(context.Background(), 30*time.Second) }()
		time.Sleep(time.Second) // the renewal at 1s (TTL 3s) lands after the Extend
		close(gate)
		if err := <-done; err != nil {
			t.Fatalf("Extend() error = %v", err)
		}
		time.Sleep(4500 * time.Millisecond) // t=6s
		f.mu.Lock()
		_, live := f.live(l.hd.Keys.Lock())
		f.mu.Unlock()
		if !live && !isClosedCh(l.Lost()) {
			t.Fatal("the key expired in Redis at 4s, but at 6s Lost() is still open: the hold is reported held when it is not")
		}
	})
}

// TestReview_releaseRacingExtendClosesLost: an Extend (or TTL) that is out
// while Release deletes the key finds it gone and marks the hold lost before
// Release marks it finished: a normal Release closes Lost().
func TestReview_releaseRacingExtendClosesLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := &hookBackend{fakeBackend: f}
		c := reviewClient(b)
		defer c.Close()
		l := c.NewLock("k", WithTTL(3*time.Second))
		mustAcquire(t, l)
		lost := l.Lost()
		entered, gate, extended := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var once sync.Once
		b.beforeExtend = func() { close(entered); <-gate }
		b.afterRelease = func() { once.Do(func() { close(gate); <-extended }) }
		go func() {
			err := l.Extend(context.Background(), time.Minute)
			if !errors.Is(err, ErrNotHeld) {
				t.Errorf("Extend() racing Release = %v, want ErrNotHeld", err)
			}
			close(extended)
		}()
		<-entered
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("Release() error = %v", err)
		}
		if isClosedCh(lost) {
			t.Fatalf("Lost() closed by a normal Release (LostErr %v)", l.LostErr())
		}
	})
}

// TestReview_extendOnLostHold: once Lost() has closed (here: the watchdog is
// off and the safety deadline passed while the key still lives in Redis),
// Extend still returns nil, and Redis keeps a hold nothing renews while the
// handle says it is lost.
func TestReview_extendOnLostHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		c := reviewClient(f, WithWatchdog(false))
		defer c.Close()
		l := c.NewLock("k", WithTTL(time.Second))
		mustAcquire(t, l)
		time.Sleep(950 * time.Millisecond) // past the deadline (898ms), before the TTL
		if !isClosedCh(l.Lost()) {
			t.Fatal("Lost() open past the safety deadline")
		}
		if err := l.Extend(context.Background(), time.Minute); err == nil {
			t.Fatal("Extend() = nil on a hold already reported lost")
		}
	})
}

// TestReview_backoffOverflow: with a huge max, min·2^n overflows and wraps;
// from n = 57 on (min 10ms) the ceiling is 0 and every sleep is exactly min.
func TestReview_backoffOverflow(t *testing.T) {
	lo := 10 * time.Millisecond
	for _, n := range []int{60, 100, 1000} {
		above := false
		for range 20 {
			d := lease.Backoff(lo, math.MaxInt64, n)
			if d < lo {
				t.Fatalf("backoff(%d) = %v, below min %v", n, d, lo)
			}
			above = above || d > lo
		}
		if !above {
			t.Fatalf("backoff(%d) = min %v 20 times, want uniform in [min, max]: the ceiling overflowed", n, lo)
		}
	}
}

// TestReview_backoffBounds: within sane bounds every sleep lies in
// [min, min(max, min·2^n)].
func TestReview_backoffBounds(t *testing.T) {
	lo, hi := 10*time.Millisecond, 500*time.Millisecond
	for n := range 70 {
		ceil := hi
		if n < 6 {
			ceil = min(hi, lo<<n)
		}
		for range 10 {
			if d := lease.Backoff(lo, hi, n); d < lo || d > ceil {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", n, d, lo, ceil)
			}
		}
	}
}

// TestReview_extendAnsweredDuringRenewal: the case the extDeadline logic
// covers. A renewal with the old TTL is out; an Extend is sent and answered
// meanwhile; the renewal then lands last, cutting the TTL back. The hold
// must keep the earlier deadline and renew at once with the new TTL.
func TestReview_extendAnsweredDuringRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		gate := make(chan struct{})
		var once sync.Once
		b := &hookBackend{fakeBackend: f, beforeRenew: func() { once.Do(func() { <-gate }) }}
		c := reviewClient(b)
		defer c.Close()
		l := c.NewLock("k", WithTTL(3*time.Second))
		mustAcquire(t, l)                   // renewal due at 1s
		time.Sleep(1200 * time.Millisecond) // the renewal (TTL 3s) is out
		if err := l.Extend(context.Background(), 30*time.Second); err != nil {
			t.Fatalf("Extend() error = %v", err)
		}
		time.Sleep(300 * time.Millisecond)
		close(gate) // the renewal lands now: TTL 3s again
		time.Sleep(4500 * time.Millisecond)
		f.mu.Lock()
		_, live := f.live(l.hd.Keys.Lock())
		f.mu.Unlock()
		if !live || isClosedCh(l.Lost()) {
			t.Fatalf("at 6s: key live %v, Lost() closed %v (%v); want a live hold renewed with the 30s TTL", live, isClosedCh(l.Lost()), l.LostErr())
		}
		got := f.snapshot()
		if last := got[len(got)-1]; last.ttls[0] != 30*time.Second {
			t.Fatalf("last renewal TTL %v, want 30s", last.ttls[0])
		}
	})
}
