package lock

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// laggyBackend is a fakeBackend whose renewals and extends take effect at a
// random point of a call that takes up to lag: the write lands after the
// call is sent and before its reply, as on a slow network.
type laggyBackend struct {
	*fakeBackend
	lag   time.Duration
	flaky bool // a third of the calls fail (see callLost and after)

	rmu sync.Mutex
	r   *rand.Rand
}

// errFlaky is the error of a call laggyBackend fails.
var errFlaky = io.ErrUnexpectedEOF

// How a call of laggyBackend goes.
const (
	callOK       = iota
	callLost     // fails before it lands
	callFailed   // lands, then fails (its reply lost)
	callStraggle // fails, and lands later: after its failure is reported
)

// delays returns how long a call waits before and after it lands, and how
// it goes.
func (b *laggyBackend) delays() (before, after time.Duration, how int) {
	b.rmu.Lock()
	defer b.rmu.Unlock()
	if b.flaky {
		how = max(b.r.IntN(9)-5, 0)
	}
	return time.Duration(b.r.Int64N(int64(b.lag)/2 + 1)), time.Duration(b.r.Int64N(int64(b.lag)/2 + 1)), how
}

// call runs land as a call that goes as how, waiting before and after.
func (b *laggyBackend) call(land func()) error {
	before, after, how := b.delays()
	time.Sleep(before)
	switch how {
	case callOK, callFailed:
		land()
	case callStraggle:
		time.AfterFunc(after+before+b.lag, land)
	}
	time.Sleep(after)
	if how != callOK {
		return errFlaky
	}
	return nil
}

func (b *laggyBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	var st2 = make([]extendStatus, len(items))
	var errs2 = make([]error, len(items))
	err := b.call(func() { b.fakeBackend.renew(context.Background(), items, st2, errs2) })
	for i := range items {
		if err != nil {
			st[i], errs[i] = 0, err
		} else {
			st[i], errs[i] = st2[i], errs2[i]
		}
	}
}

func (b *laggyBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	var st extendStatus
	var err error
	if ferr := b.call(func() { st, err = b.fakeBackend.extend(context.Background(), k, token, ttl) }); ferr != nil {
		return 0, ferr
	}
	return st, err
}

// TestRenewal_laggyExtendsKeepDeadlinesSafe: 60 holds with TTLs of 300ms,
// 1s and 3s, renewals and Extends (to any of those TTLs, shorter ones
// included) overlapping on calls that land at a random point within 40ms,
// over 8s. At every instant each active hold's deadline (now + Left) must
// come before its key's expiry in the backend, and since every call
// succeeds well within the TTLs, no hold may be lost: one renewed late (a
// stale renewal-heap entry) would be.
func TestRenewal_laggyExtendsKeepDeadlinesSafe(t *testing.T) {
	t.Parallel()
	laggyHolds(t, false)
}

// TestRenewal_flakyExtendsKeepDeadlinesSafe is
// TestRenewal_laggyExtendsKeepDeadlinesSafe with a third of the calls
// failing (half of them after they landed) and holds released and taken
// again meanwhile: holds may now be lost, but no deadline may pass the
// key's expiry, and a hold not lost must have its key.
func TestRenewal_flakyExtendsKeepDeadlinesSafe(t *testing.T) {
	t.Parallel()
	laggyHolds(t, true)
}

// laggyHolds runs the holds of TestRenewal_laggyExtendsKeepDeadlinesSafe,
// flaky as for TestRenewal_flakyExtendsKeepDeadlinesSafe.
func laggyHolds(t *testing.T, flaky bool) {
	for seed := range uint64(4) {
		synctest.Test(t, func(t *testing.T) {
			b := &laggyBackend{fakeBackend: newFake(), lag: 40 * time.Millisecond, flaky: flaky, r: rand.New(rand.NewPCG(seed, 7))}
			c := newClientWithBackend(b)
			defer c.Close()
			ttls := []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second}
			const n = 60
			locks := make([]*Lock, n)
			for i := range locks {
				locks[i] = c.NewLock("k"+itoa(i), WithTTL(ttls[i%len(ttls)]))
				mustAcquire(t, locks[i])
			}
			end := time.Now().Add(8 * time.Second)
			var wg sync.WaitGroup
			for i, l := range locks {
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(end) {
						time.Sleep(time.Duration(r.Int64N(int64(400 * time.Millisecond))))
						if flaky && (r.IntN(4) == 0 || l.LostErr() != nil) {
							_ = l.Release(context.Background())
							for l.Acquire(context.Background()) != nil {
							}
							continue
						}
						err := l.Extend(context.Background(), ttls[r.IntN(len(ttls))])
						if err != nil && !(flaky && (errors.Is(err, errFlaky) || errors.Is(err, ErrNotHeld))) {
							t.Errorf("lock %d: Extend() error = %v", i, err)
							return
						}
					}
				}()
			}
			for time.Now().Before(end) {
				b.mu.Lock()
				for i, l := range locks {
					left := l.hd.Left()
					if left <= 0 {
						continue
					}
					v, ok := b.live(l.hd.Keys.Lock())
					if !ok || v.token != l.Token() || time.Now().Add(left).After(v.exp) {
						t.Errorf("lock %d: held for %v more, but its key expires in %v (present %v)", i, left, time.Until(v.exp), ok)
					}
				}
				b.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
			wg.Wait()
			for i, l := range locks {
				if err := l.LostErr(); err != nil && !flaky {
					t.Errorf("lock %d (TTL %v): lost: %v", i, ttls[i%len(ttls)], err)
				}
			}
		})
	}
}

// hangingExtend is a fakeBackend whose extends take effect at once but
// answer only after stall.
type hangingExtend struct {
	*fakeBackend
	stall time.Duration
}

func (b *hangingExtend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	st, err := b.fakeBackend.extend(ctx, k, token, ttl)
	time.Sleep(b.stall)
	return st, err
}

// TestExtend_shorterUnansweredLostAtItsDeadline: a hold of TTL 3s, waiting
// in the renewal loop for its renewal at 1s, is extended to 300ms by a call
// that lands at once but answers only 2s later. Redis lets the key go 300ms
// after the Extend, so the hold must be reported lost by the Extend's own
// safety deadline (300ms less the margin), not at the renewal time the
// loop had for it before.
func TestExtend_shorterUnansweredLostAtItsDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := &hangingExtend{fakeBackend: newFake(), stall: 2 * time.Second}
		c := newClientWithBackend(b)
		defer c.Close()
		l := c.NewLock("k", WithTTL(3*time.Second))
		mustAcquire(t, l)
		time.Sleep(100 * time.Millisecond)
		sent := time.Now()
		short := 300 * time.Millisecond
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = l.Extend(context.Background(), short)
		}()
		at := lostAt(t, l, time.Minute).Sub(sent)
		if want := short - safetyMargin(short); at > want {
			t.Errorf("lost %v after the Extend (%v), want by %v", at, l.LostErr(), want)
		}
		<-done
	})
}

// slowRenewals is a fakeBackend whose renewals land at once and answer
// after reply; with firstOnly, only a hold's first renewal is slow.
type slowRenewals struct {
	*fakeBackend
	reply     time.Duration
	firstOnly bool
	seen      map[string]bool // tokens renewed before (firstOnly)
}

func (b *slowRenewals) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	b.fakeBackend.renew(ctx, items, st, errs)
	slow := !b.firstOnly
	b.mu.Lock()
	for _, it := range items {
		if b.firstOnly && !b.seen[it.token] {
			b.seen[it.token], slow = true, true
		}
	}
	b.mu.Unlock()
	if slow {
		time.Sleep(b.reply)
	}
}

// TestRenewal_lateRepliesKeepHolds: holds of TTL 300ms (50 of them,
// acquired 3ms apart, so their renewals fall due in many ticks; deadline
// 268ms after a write is sent, renewal 100ms after). A first renewal
// answered 167ms after it was sent, just before the deadline the hold had
// then, or every renewal answered 130ms after (the next is sent on the
// reply, and answered before the deadline its predecessor set: a
// round trip up to (TTL - margin)/2 is sustainable), keeps every hold, and
// each goes on renewing.
func TestRenewal_lateRepliesKeepHolds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reply     time.Duration
		firstOnly bool
	}{{167 * time.Millisecond, true}, {100 * time.Millisecond, false}, {130 * time.Millisecond, false}} {
		synctest.Test(t, func(t *testing.T) {
			b := &slowRenewals{fakeBackend: newFake(), reply: tc.reply, firstOnly: tc.firstOnly, seen: map[string]bool{}}
			c := newClientWithBackend(b)
			defer c.Close()
			locks := make([]*Lock, 50)
			for i := range locks {
				locks[i] = c.NewLock("k"+itoa(i), WithTTL(300*time.Millisecond))
				mustAcquire(t, locks[i])
				time.Sleep(3 * time.Millisecond)
			}
			time.Sleep(5 * time.Second)
			for i, l := range locks {
				if err := l.LostErr(); err != nil {
					t.Errorf("%+v: lock %d lost: %v", tc, i, err)
				}
			}
			renewed := 0
			for _, bt := range b.snapshot() {
				renewed += bt.n
			}
			if want := len(locks) * int(5*time.Second/(tc.reply+100*time.Millisecond)); renewed < want {
				t.Errorf("%+v: %d renewals in 5s, want at least %d", tc, renewed, want)
			}
		})
	}
}
