package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// fakeBackend is an in-memory Redis for the renewal loop's tests: it keeps
// tokens and expiry times on synctest's fake clock, records every renewal
// batch, and can be told to fail or to hang.
type fakeBackend struct {
	mu      sync.Mutex
	keys    map[string]fakeKey
	fail    error         // renewals fail with this error when set
	hang    bool          // renewals block until their context ends
	stall   time.Duration // renewals block this long, ignoring their context
	delay   time.Duration // acquires reply this late (after taking the lock)
	batches []fakeBatch
}

type fakeKey struct {
	token string
	exp   time.Time
}

type fakeBatch struct {
	at    time.Time
	n     int
	ttls  []time.Duration
	until time.Time // the call's context deadline
}

func newFake() *fakeBackend { return &fakeBackend{keys: map[string]fakeKey{}} }

func (f *fakeBackend) live(k string) (fakeKey, bool) {
	v, ok := f.keys[k]
	if ok && !time.Now().Before(v.exp) {
		delete(f.keys, k)
		return fakeKey{}, false
	}
	return v, ok
}

func (f *fakeBackend) acquire(_ context.Context, k *keys, token string, ttl time.Duration) (acquireResult, error) {
	f.mu.Lock()
	if v, ok := f.live(k.Lock()); ok && v.token != token {
		f.mu.Unlock()
		return acquireResult{pttl: time.Until(v.exp)}, nil
	}
	f.keys[k.Lock()] = fakeKey{token, time.Now().Add(ttl)}
	delay := f.delay
	f.mu.Unlock()
	time.Sleep(delay)
	return acquireResult{ok: true, fence: 1}, nil
}

func (f *fakeBackend) status(k *keys, token string) extendStatus {
	v, ok := f.live(k.Lock())
	switch {
	case !ok:
		return extendGone
	case v.token != token:
		return extendStolen
	}
	return extendOK
}

func (f *fakeBackend) release(_ context.Context, k *keys, token string) (extendStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status(k, token)
	if st == extendOK {
		delete(f.keys, k.Lock())
	}
	return st, nil
}

func (f *fakeBackend) extend(_ context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status(k, token)
	if st == extendOK {
		f.keys[k.Lock()] = fakeKey{token, time.Now().Add(ttl)}
	}
	return st, nil
}

func (f *fakeBackend) pttl(_ context.Context, k *keys, token string) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status(k, token) != extendOK {
		return 0, errNotOurs
	}
	return time.Until(f.keys[k.Lock()].exp), nil
}

func (f *fakeBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	f.mu.Lock()
	b := fakeBatch{at: time.Now(), n: len(items)}
	b.until, _ = ctx.Deadline()
	for _, it := range items {
		b.ttls = append(b.ttls, it.ttl)
	}
	f.batches = append(f.batches, b)
	fail, hang, stall := f.fail, f.hang, f.stall
	f.mu.Unlock()
	if stall > 0 {
		time.Sleep(stall)
		fail = errors.New("i/o timeout")
	}
	if hang {
		<-ctx.Done()
		fail = ctx.Err()
	}
	for i, it := range items {
		if fail != nil {
			errs[i] = fail
			continue
		}
		st[i], errs[i] = f.extend(ctx, it.k, it.token, it.ttl)
	}
}

func (f *fakeBackend) set(fn func(f *fakeBackend)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeBackend) snapshot() []fakeBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeBatch(nil), f.batches...)
}

// fakeClient returns a Client whose every lock talks to f. Call it inside the
// synctest bubble and Close it there.
func fakeClient(f *fakeBackend, opts ...Option) *Client { return newClientWithBackend(f, opts...) }

func mustAcquire(t *testing.T, l *Lock) {
	t.Helper()
	if err := l.Acquire(context.Background()); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
}

// acquiredFake returns, inside a synctest bubble, a lock on "k" acquired
// through a fresh fakeBackend with opts, the backend, and when it was
// acquired. Its Client closes when the test ends.
func acquiredFake(t *testing.T, opts ...Option) (*fakeBackend, *Lock, time.Time) {
	t.Helper()
	f := newFake()
	c := fakeClient(f)
	t.Cleanup(func() { c.Close() })
	start := time.Now()
	l := c.NewLock("k", opts...)
	mustAcquire(t, l)
	return f, l, start
}

// lostAt waits (on the fake clock) until l's hold is lost and returns when.
func lostAt(t *testing.T, l *Lock, limit time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Lost():
		return time.Now()
	case <-time.After(limit):
		t.Fatalf("Lost() not closed within %v", limit)
	}
	return time.Time{}
}

func lossOf(l *Lock) LossReason {
	var le *LostError
	if errors.As(l.LostErr(), &le) {
		return le.Reason
	}
	return 0
}

func TestRenewal_everyThirdOfTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, l, start := acquiredFake(t, WithTTL(3*time.Second))
		time.Sleep(10*time.Second + time.Millisecond)
		got := f.snapshot()
		if len(got) != 10 {
			t.Fatalf("%d renewals in 10s with TTL 3s, want 10", len(got))
		}
		for i, b := range got {
			if want := start.Add(time.Duration(i+1) * time.Second); !b.at.Equal(want) {
				t.Fatalf("renewal %d at %v, want %v", i, b.at.Sub(start), want.Sub(start))
			}
		}
		if isClosedCh(l.Lost()) {
			t.Fatal("Lost() closed while renewals succeed")
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("Release() error = %v", err)
		}
		time.Sleep(10 * time.Second)
		if n := len(f.snapshot()); n != 10 {
			t.Fatalf("%d renewals after Release, want none beyond the 10", n-10)
		}
	})
}

func TestRenewal_unreachableLostBeforeTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ttl := 3 * time.Second
		f, l, start := acquiredFake(t, WithTTL(ttl))
		f.set(func(f *fakeBackend) { f.fail = errors.New("connection refused") })
		at := lostAt(t, l, time.Minute).Sub(start)
		deadline := ttl - safetyMargin(ttl)
		if at > deadline || at < deadline-2*time.Millisecond {
			t.Fatalf("lost at %v, want at the safety deadline %v (TTL %v)", at, deadline, ttl)
		}
		if r := lossOf(l); r != LossUnreachable {
			t.Fatalf("loss reason %v, want unreachable", r)
		}
		if n := len(f.snapshot()); n < 3 {
			t.Fatalf("%d renewal attempts before giving up, want several", n)
		}
	})
}

func TestRenewal_hangingServerLostBeforeTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ttl := 3 * time.Second
		f, l, start := acquiredFake(t, WithTTL(ttl))
		f.set(func(f *fakeBackend) { f.hang = true })
		at := lostAt(t, l, time.Minute).Sub(start)
		if deadline := ttl - safetyMargin(ttl); at > deadline {
			t.Fatalf("lost at %v, after the safety deadline %v", at, deadline)
		}
		for _, b := range f.snapshot() {
			if b.until.IsZero() || b.until.Sub(start) >= ttl-safetyMargin(ttl) {
				t.Fatalf("renewal call ran until %v, want a deadline before %v", b.until.Sub(start), ttl-safetyMargin(ttl))
			}
		}
	})
}

// TestRenewal_callIgnoresDeadline: go-redis ignores context deadlines unless
// ContextTimeoutEnabled is set, so a renewal call may outlive its deadline;
// the hold is declared lost at the deadline all the same.
func TestRenewal_callIgnoresDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ttl := time.Second
		f, l, start := acquiredFake(t, WithTTL(ttl))
		f.set(func(f *fakeBackend) { f.stall = 3 * time.Second })
		at := lostAt(t, l, time.Minute).Sub(start)
		if deadline := ttl - safetyMargin(ttl); at != deadline {
			t.Fatalf("lost at %v, want at the safety deadline %v although the call ran for 3s", at, deadline)
		}
		if !errors.Is(l.LostErr(), lease.ErrRenewalTimeout) || lossOf(l) != LossUnanswered {
			t.Fatalf("LostErr() = %v, want unanswered, renewal unanswered", l.LostErr())
		}
	})
}

// TestAcquire_lateReply: a success confirmed only after the lease's safety
// deadline is not a hold: it is undone and reported as not acquired.
func TestAcquire_lateReply(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		c := fakeClient(f)
		defer c.Close()
		f.set(func(f *fakeBackend) { f.delay = 2 * time.Second })
		l := c.NewLock("k", WithTTL(time.Second))
		ok, err := l.TryAcquire(context.Background())
		if ok || !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("TryAcquire() = %v, %v, want false and ErrNotAcquired", ok, err)
		}
		if l.Token() != "" {
			t.Fatalf("Token() = %q after a late reply, want no hold", l.Token())
		}
		f.set(func(f *fakeBackend) { f.delay = 0 })
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatalf("Acquire() once replies are prompt: %v", err)
		}
	})
}

func TestRenewal_keyGoneOrStolen(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		token string // "" deletes the key
		want  LossReason
	}{
		{"deleted", "", LossVanished},
		{"stolen", "intruder", LossStolen},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				c := fakeClient(f)
				defer c.Close()
				start := time.Now()
				l := c.NewLock("k", WithTTL(3*time.Second))
				mustAcquire(t, l)
				time.Sleep(1500 * time.Millisecond)
				f.set(func(f *fakeBackend) {
					if tt.token == "" {
						delete(f.keys, l.hd.Keys.Lock())
					} else {
						f.keys[l.hd.Keys.Lock()] = fakeKey{tt.token, time.Now().Add(time.Hour)}
					}
				})
				at := lostAt(t, l, time.Minute).Sub(start)
				if at != 2*time.Second {
					t.Fatalf("lost at %v, want at the next renewal (2s)", at)
				}
				if r := lossOf(l); r != tt.want {
					t.Fatalf("loss reason %v, want %v", r, tt.want)
				}
			})
		})
	}
}

func TestRenewal_batches(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		c := fakeClient(f)
		defer c.Close()
		const n = 1200
		for i := range n {
			mustAcquire(t, c.NewLock(string(rune('a'+i%26))+itoa(i), WithTTL(3*time.Second)))
			if i == n/2 {
				time.Sleep(100 * time.Millisecond) // within TTL/12: still one tick
			}
		}
		time.Sleep(1100 * time.Millisecond)
		got := f.snapshot()
		total := 0
		for _, b := range got {
			if b.n > lease.BatchSize {
				t.Fatalf("a batch of %d renewals, want at most %d", b.n, lease.BatchSize)
			}
			total += b.n
		}
		if total != n || len(got) != (n+lease.BatchSize-1)/lease.BatchSize {
			t.Fatalf("%d renewals in %d batches, want %d in %d", total, len(got), n, (n+lease.BatchSize-1)/lease.BatchSize)
		}
	})
}

func TestRenewal_extendKeepsNewTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		c := fakeClient(f)
		defer c.Close()
		l := c.NewLock("k", WithTTL(3*time.Second))
		mustAcquire(t, l)
		if err := l.Extend(context.Background(), 9*time.Second); err != nil {
			t.Fatalf("Extend() error = %v", err)
		}
		time.Sleep(7 * time.Second)
		got := f.snapshot()
		if len(got) != 2 || got[0].ttls[0] != 9*time.Second || got[1].ttls[0] != 9*time.Second {
			t.Fatalf("renewals %+v, want 2 with TTL 9s (every 3s)", got)
		}
	})
}

func TestRenewal_watchdogOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		c := fakeClient(f, WithWatchdog(false))
		defer c.Close()
		start := time.Now()
		ttl := 2 * time.Second
		l := c.NewLock("k", WithTTL(ttl))
		mustAcquire(t, l)
		at := lostAt(t, l, time.Minute).Sub(start)
		if at != ttl-safetyMargin(ttl) || lossOf(l) != LossExpired {
			t.Fatalf("lost at %v (%v), want at %v (expired)", at, lossOf(l), ttl-safetyMargin(ttl))
		}
		if n := len(f.snapshot()); n != 0 {
			t.Fatalf("%d renewals with the watchdog off", n)
		}
	})
}

func TestRenewal_maxHold(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, l, start := acquiredFake(t, WithTTL(3*time.Second), WithMaxHold(2500*time.Millisecond))
		at := lostAt(t, l, time.Minute).Sub(start)
		if at != 2500*time.Millisecond || lossOf(l) != LossMaxHold {
			t.Fatalf("lost at %v (%v), want at 2.5s (max hold)", at, lossOf(l))
		}
		if n := len(f.snapshot()); n != 2 {
			t.Fatalf("%d renewals, want 2 (at 1s and 2s)", n)
		}
	})
}

func TestRenewal_closeLeavesDeadlineTimers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		c := fakeClient(f)
		start := time.Now()
		ttl := 3 * time.Second
		l := c.NewLock("k", WithTTL(ttl))
		mustAcquire(t, l)
		time.Sleep(500 * time.Millisecond)
		c.Close()
		at := lostAt(t, l, time.Minute).Sub(start)
		if at != ttl-safetyMargin(ttl) || !errors.Is(l.LostErr(), ErrClosed) {
			t.Fatalf("lost at %v with %v, want at %v with ErrClosed", at, l.LostErr(), ttl-safetyMargin(ttl))
		}
		if n := len(f.snapshot()); n != 0 {
			t.Fatalf("%d renewals after Close", n)
		}
	})
}

func isClosedCh(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// plannedCall says when a call lands in the fake Redis and when its reply
// comes, counted from the acquire; notYet for either means not before the
// test ends. A failed call reports an error when its reply is due.
type plannedCall struct {
	send, land, answer time.Duration // send: Extend only; the loop sends renewals
	fail               bool
}

const notYet time.Duration = -1

// plannedBackend is a fakeBackend whose first renewal and first Extend keep
// to a plan, so that a test can put them in any order.
type plannedBackend struct {
	*fakeBackend
	start        time.Time
	renewal, ext plannedCall
	renews       int
	stop         chan struct{} // ends calls that are never answered
}

// run carries out one planned call: apply lands it.
func (b *plannedBackend) run(p plannedCall, apply func()) error {
	wait := func(at time.Duration) bool {
		if at == notYet {
			<-b.stop
			return false
		}
		time.Sleep(time.Until(b.start.Add(at)))
		return true
	}
	landed := wait(p.land)
	if landed {
		apply()
	}
	if !landed || !wait(p.answer) || p.fail {
		return errors.New("i/o timeout")
	}
	return nil
}

func (b *plannedBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	b.mu.Lock()
	b.renews++
	first := b.renews == 1
	b.mu.Unlock()
	if !first {
		b.fakeBackend.renew(ctx, items, st, errs)
		return
	}
	if err := b.run(b.renewal, func() { b.fakeBackend.renew(ctx, items, st, errs) }); err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
}

func (b *plannedBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	var st extendStatus
	err := b.run(b.ext, func() { st, _ = b.fakeBackend.extend(ctx, k, token, ttl) })
	return st, err
}

// ours reports whether the fake Redis has k with token now.
func (f *fakeBackend) ours(k *keys, token string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status(k, token) == extendOK
}

// TestRenewal_extendDuringRenewal puts one renewal (TTL 3s, sent at 1s) and
// one Extend in every order of sending, landing and answering, the renewal
// confirmed, failed or never answered, the Extend shorter (600ms) or longer
// (30s), and checks every millisecond that while Lost() is open the key is
// ours in Redis: the hold is lost before it could expire, never after. Holds
// that can be kept must be kept. An Extend called while the renewal is out
// is sent once the renewal is answered (at its planned times, if they have
// not passed by then), and a renewal due while the Extend is out waits for
// the Extend's answer.
func TestRenewal_extendDuringRenewal(t *testing.T) {
	t.Parallel()
	// Times in milliseconds from the acquire; never: not before the test ends.
	const never = -1
	ms := func(n int) time.Duration {
		if n == never {
			return notYet
		}
		return time.Duration(n) * time.Millisecond
	}
	r := func(land, answer int) plannedCall { return plannedCall{land: ms(land), answer: ms(answer)} }
	x := func(send, land, answer int) plannedCall {
		return plannedCall{send: ms(send), land: ms(land), answer: ms(answer)}
	}
	failed := func(p plannedCall) plannedCall { p.fail = true; return p }
	for _, tt := range []struct {
		name    string
		renewal plannedCall
		ext     plannedCall
		// lost: whether the hold must end lost, with the shorter and the
		// longer Extend.
		lostShort, lostLong bool
	}{
		{"renewal out, extend answered, renewal confirmed", r(1000, 1300), x(1100, 1100, 1100), false, false},
		{"renewal lands after the extend, confirmed", r(1200, 1300), x(1100, 1100, 1100), false, false},
		{"renewal out, extend answered, renewal failed", failed(r(1000, 1300)), x(1100, 1100, 1100), false, false},
		{"renewal lands after the extend, failed", failed(r(1200, 1300)), x(1100, 1100, 1100), false, false},
		{"renewal never lands nor is answered", r(never, never), x(1100, 1100, 1100), true, true},
		{"renewal out, extend answered, renewal unanswered", r(1000, never), x(1100, 1100, 1100), true, true},
		{"renewal lands after the extend, unanswered", r(1200, never), x(1100, 1100, 1100), true, true},
		{"extend sent first, renewal answered last", r(1000, 1200), x(900, 900, 1100), false, false},
		{"extend sent first, lands after the renewal, renewal answered last", r(1000, 1200), x(900, 1050, 1100), false, false},
		{"extend sent first, renewal answered first", r(1000, 1050), x(900, 900, 1100), false, false},
		{"extend sent first, lands after the renewal answered first", r(1000, 1050), x(900, 1020, 1100), false, false},
		{"extend sent first, renewal unanswered", r(1000, never), x(900, 1050, 1100), true, false},
		{"renewal answered after the extend was sent", r(1000, 1100), x(1050, 1050, 1200), false, false},
		{"renewal lands after the extend, answered before it", r(1080, 1100), x(1050, 1050, 1200), false, false},
		{"extend failed while the renewal is out", r(1000, 1300), failed(x(1100, 1100, 1200)), false, false},
		{"extend failed after landing, no renewal out", r(1000, 1000), failed(x(1200, 1200, 1300)), false, false},
		{"extend answered past its deadline", r(1000, 1000), x(1500, 1500, 2200), true, false},
		{"extend unanswered, lands after the next renewal", r(1000, 1000), x(1500, 2050, never), true, false},
	} {
		for _, ttl := range []time.Duration{600 * time.Millisecond, 30 * time.Second} {
			t.Run(fmt.Sprintf("%s/%v", tt.name, ttl), func(t *testing.T) {
				wantLost := tt.lostLong
				if ttl < time.Second {
					wantLost = tt.lostShort
				}
				synctest.Test(t, func(t *testing.T) {
					checkExtendDuringRenewal(t, tt.renewal, tt.ext, ttl, wantLost)
				})
			})
		}
	}
}

func checkExtendDuringRenewal(t *testing.T, renewal, ext plannedCall, ttl time.Duration, wantLost bool) {
	t.Helper()
	b := &plannedBackend{fakeBackend: newFake(), start: time.Now(), renewal: renewal, ext: ext, stop: make(chan struct{})}
	c := hookClient(b)
	defer c.Close()
	defer close(b.stop) // before Close, which waits for the renewal call
	l := c.NewLock("k", WithTTL(3*time.Second))
	mustAcquire(t, l)
	token := l.Token()
	done := make(chan error, 1)
	lostAt := notYet
	for at := time.Duration(0); at <= 6*time.Second; at += time.Millisecond {
		time.Sleep(time.Until(b.start.Add(at)))
		if at == ext.send {
			go func() { done <- l.Extend(context.Background(), ttl) }()
		}
		lost := isClosedCh(l.Lost())
		if lost && lostAt == notYet {
			lostAt = at
		}
		if !lost && !b.ours(&l.hd.Keys, token) {
			t.Fatalf("at %v the key is no longer ours in Redis, but Lost() is open", at)
		}
	}
	if lost := lostAt != notYet; lost != wantLost {
		t.Fatalf("at 6s Lost() closed = %v (%v), want %v", lost, l.LostErr(), wantLost)
	}
	if ext.answer == notYet {
		return
	}
	// A confirmed Extend reports a hold lost before its reply came. One
	// called while the renewal (sent at 1s) is out waits for its answer:
	// when none comes, it is never sent and reports the loss.
	err := <-done
	waits := renewal.answer == notYet && ext.send > time.Second
	switch lostFirst := lostAt != notYet && (waits || lostAt < ext.answer); {
	case ext.fail && (err == nil || errors.Is(err, ErrNotHeld)):
		t.Fatalf("failed Extend() error = %v, want the call's error", err)
	case !ext.fail && lostFirst && !errors.Is(err, ErrNotHeld):
		t.Fatalf("Extend() answered at %v, the hold lost at %v: error = %v, want ErrNotHeld", ext.answer, lostAt, err)
	case !ext.fail && !lostFirst && err != nil:
		t.Fatalf("Extend() error = %v, want nil", err)
	}
}

// TestLock_Extend_outstandingDuringRenewal: an Extend that lengthens the
// TTL is sent; while it is out, a renewal with the old TTL is sent, lands in
// Redis after the Extend and is answered first, leaving Redis the old, short
// TTL. The hold does not trust the Extend alone: by the time the key expires
// in Redis, Lost() has closed.
func TestLock_Extend_outstandingDuringRenewal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		gate := make(chan struct{})
		b := &hookBackend{fakeBackend: f}
		c := hookClient(b)
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

// TestLock_Extend_onLostHold: once Lost() has closed (here: the watchdog is
// off and the safety deadline passed while the key still lives in Redis),
// Extend returns an error instead of reviving the hold.
func TestLock_Extend_onLostHold(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		c := hookClient(f, WithWatchdog(false))
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

// TestLock_Extend_waitsForRenewalOut: a renewal with the old TTL is out
// when Extend is called. Sent before the renewal was answered, the Extend
// could be overtaken by it, and the renewal would cut the TTL back; so the
// Extend waits for the renewal's answer and goes out after it. The key
// keeps the Extend's TTL and later renewals carry it.
func TestLock_Extend_waitsForRenewalOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		var once sync.Once
		b := &hookBackend{fakeBackend: f, beforeRenew: func() { once.Do(func() { <-gate }) }}
		c := hookClient(b)
		defer c.Close()
		defer open() // first, if the test fails: the call held must end
		l := c.NewLock("k", WithTTL(3*time.Second))
		mustAcquire(t, l)                   // renewal due at 1s
		time.Sleep(1200 * time.Millisecond) // the renewal (TTL 3s) is out
		done := make(chan error, 1)
		go func() { done <- l.Extend(context.Background(), 30*time.Second) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Extend() = %v with a renewal of the hold out, want it to wait for the renewal's answer", err)
		default:
		}
		open() // the renewal lands now, before the Extend is sent
		if err := <-done; err != nil {
			t.Fatalf("Extend() error = %v", err)
		}
		if d, err := f.pttl(context.Background(), &l.hd.Keys, l.Token()); err != nil || d != 30*time.Second {
			t.Fatalf("TTL in the backend after Extend(30s) = %v, %v; want 30s", d, err)
		}
		time.Sleep(11 * time.Second) // the next renewal, a third of 30s after the Extend
		if isClosedCh(l.Lost()) {
			t.Fatalf("Lost() closed (%v); want a hold renewed with the 30s TTL", l.LostErr())
		}
		got := f.snapshot()
		if len(got) < 2 || got[0].ttls[0] != 3*time.Second {
			t.Fatalf("renewals %+v, want the one out at the Extend (3s), then others", got)
		}
		for _, b := range got[1:] {
			if b.ttls[0] != 30*time.Second {
				t.Fatalf("renewals %+v, want every one after the Extend with 30s", got)
			}
		}
	})
}

// TestLock_renewalWaitsForExtendOut: while an Extend is out, the renewal
// loop sends no renewal of its hold, which would carry the old TTL and
// might land after the Extend, until a third of the TTL before the hold's
// deadline; the Extend's answer schedules the next renewal, with the new
// TTL.
func TestLock_renewalWaitsForExtendOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		var once sync.Once
		b := &hookBackend{fakeBackend: f, beforeExtend: func() { once.Do(func() { <-gate }) }}
		c := hookClient(b)
		defer c.Close()
		defer open() // first, if the test fails: the call held must end
		l := c.NewLock("k", WithTTL(3*time.Second))
		mustAcquire(t, l) // renewal due at 1s
		done := make(chan error, 1)
		go func() { done <- l.Extend(context.Background(), 30*time.Second) }()
		// Past the renewal's time (1s), before the last call a third of the
		// TTL before the deadline (2.698s).
		time.Sleep(1500 * time.Millisecond)
		if got := f.snapshot(); len(got) != 0 {
			t.Fatalf("renewals %+v while an Extend was out, want none", got)
		}
		open()
		if err := <-done; err != nil {
			t.Fatalf("Extend() error = %v", err)
		}
		time.Sleep(11 * time.Second)
		got := f.snapshot()
		if isClosedCh(l.Lost()) || len(got) == 0 || slices.ContainsFunc(got, func(b fakeBatch) bool { return b.ttls[0] != 30*time.Second }) {
			t.Fatalf("Lost() closed %v (%v), renewals %+v; want one renewal, with 30s", isClosedCh(l.Lost()), l.LostErr(), got)
		}
	})
}

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

// hookClient is fakeClient over any backend.
func hookClient(be backend, opts ...Option) *Client { return newClientWithBackend(be, opts...) }
