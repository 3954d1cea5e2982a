package locktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/redistest"
	"github.com/agentlock/lock/locktest"
)

// ttl is long enough that a renewal on a loaded machine is never late by
// accident, short enough that a loss at the safety deadline comes soon.
const ttl = time.Second

// fault is one fault the Controller injects, the loss reason the holder
// must see, and how to lift it, so that the release after the loss is not
// held up by the fault.
type fault struct {
	name   string
	inject func(t *testing.T, ctl *locktest.Controller, key string)
	heal   func(ctl *locktest.Controller)
	reason lock.LossReason
}

// must reports a failed injection. It does not stop the test: inject runs
// inside WithLock's fn too, which must return for the lock to be released.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("fault: %v", err)
	}
}

// waitLost waits until l's hold is lost. The limit only turns a hang into
// a failure; a loss is due within about one TTL.
func waitLost(t *testing.T, l *lock.Lock) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(time.Minute):
		t.Fatalf("Lost() still open a minute after the fault")
	}
}

var faults = []fault{
	{name: "Expire", reason: lock.LossVanished,
		inject: func(t *testing.T, ctl *locktest.Controller, key string) { must(t, ctl.Expire(key)) }},
	{name: "ForceRelease", reason: lock.LossForceReleased,
		inject: func(t *testing.T, ctl *locktest.Controller, key string) { must(t, ctl.ForceRelease(key)) }},
	{name: "Steal", reason: lock.LossStolen,
		inject: func(t *testing.T, ctl *locktest.Controller, key string) { must(t, ctl.Steal(key)) }},
	{name: "PauseRenewals", reason: lock.LossUnanswered,
		inject: func(_ *testing.T, ctl *locktest.Controller, _ string) { ctl.PauseRenewals() },
		heal:   (*locktest.Controller).ResumeRenewals},
	{name: "Unreachable", reason: lock.LossUnreachable,
		inject: func(_ *testing.T, ctl *locktest.Controller, _ string) { ctl.Unreachable() },
		heal:   (*locktest.Controller).Restore},
	{name: "Slow", reason: lock.LossUnanswered,
		inject: func(_ *testing.T, ctl *locktest.Controller, _ string) { ctl.Slow(time.Hour) },
		heal:   (*locktest.Controller).Restore},
}

// matches reports whether a loss with reason got is what f causes. Cut
// connections (reason LossUnreachable) may also show as LossUnanswered:
// the core says unreachable only when a connection error reached it before
// the safety deadline, and go-redis's own retries can keep every error
// from it.
func (f fault) matches(got lock.LossReason) bool {
	return got == f.reason || f.reason == lock.LossUnreachable && got == lock.LossUnanswered
}

// reasonOf returns the loss reason err carries, or 0.
func reasonOf(err error) lock.LossReason {
	var le *lock.LostError
	if errors.As(err, &le) {
		return le.Reason
	}
	return 0
}

// The modes a lock's calls take: scripts, script-free (WATCH/MULTI), and
// re-entrant holds (a hash at the key).
var modes = []struct {
	name string
	opts []lock.Option
}{
	{"script", nil},
	{"watch", []lock.Option{lock.WithReleaseMode(lock.ReleaseWatch)}},
	{"reentrant", []lock.Option{lock.WithOwner("worker-1")}},
}

func TestController_faults_Lost(t *testing.T) {
	testFaultsLost(t, func(t *testing.T, opts ...lock.Option) (*lock.Client, *locktest.Controller) {
		return locktest.New(t, opts...)
	})
}

// On a real redis-server, whose TTLs run: the scripts, the proxy and the
// renewal gate meet the server's own replies (NOSCRIPT, TYPE, PTTL).
func TestController_faults_Lost_realRedis(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	testFaultsLost(t, func(t *testing.T, opts ...lock.Option) (*lock.Client, *locktest.Controller) {
		return locktest.NewOn(t, s.Addr(), opts...)
	})
}

// testFaultsLost checks, in each mode, that each fault closes the hold's
// Lost() with its reason, on the Redis newClient runs on.
func testFaultsLost(t *testing.T, newClient func(*testing.T, ...lock.Option) (*lock.Client, *locktest.Controller)) {
	for _, m := range modes {
		for _, f := range faults {
			t.Run(m.name+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				locks, ctl := newClient(t, append([]lock.Option{lock.WithTTL(ttl)}, m.opts...)...)
				ctx := t.Context()
				key := t.Name() // one server may serve every subtest
				l := locks.NewLock(key)
				if err := l.Acquire(ctx); err != nil {
					t.Fatalf("Acquire() error = %v", err)
				}
				f.inject(t, ctl, key)
				waitLost(t, l)
				if got := reasonOf(l.LostErr()); !f.matches(got) {
					t.Errorf("LostErr() = %v, want reason %v", l.LostErr(), f.reason)
				}
				if f.heal != nil {
					f.heal(ctl)
				}
				// A fault that is healed left the key in Redis: its Release
				// may still find it.
				if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) && f.heal == nil {
					t.Errorf("Release() error = %v, want %v", err, lock.ErrNotHeld)
				}
			})
		}
	}
}

func TestController_faults_WithLock(t *testing.T) {
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			locks, ctl := locktest.New(t, lock.WithTTL(ttl))
			var cause error
			err := locks.WithLock(t.Context(), "job", func(ctx context.Context) error {
				f.inject(t, ctl, "job")
				<-ctx.Done()
				cause = context.Cause(ctx)
				if f.heal != nil {
					f.heal(ctl)
				}
				return nil
			})
			if !errors.Is(err, lock.ErrLockLost) {
				t.Errorf("WithLock() error = %v, want %v", err, lock.ErrLockLost)
			}
			if got := reasonOf(cause); !f.matches(got) {
				t.Errorf("context.Cause = %v, want reason %v", cause, f.reason)
			}
		})
	}
}

func TestController_Steal_keepsKeyWithAnotherToken(t *testing.T) {
	locks, ctl := locktest.New(t, lock.WithPrefix("app:"))
	l := locks.NewLock("k")
	if err := l.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	if got, want := ctl.RedisKey("k"), "app:{k}"; got != want {
		t.Fatalf("RedisKey() = %q, want %q", got, want)
	}
	if err := ctl.Steal("k"); err != nil {
		t.Fatalf("Steal() error = %v", err)
	}
	v, err := ctl.Miniredis().Get(ctl.RedisKey("k"))
	if err != nil || v == "" || v == l.Token() {
		t.Errorf("key after Steal = %q, %v; want another token than %q", v, err, l.Token())
	}
	if ttl := ctl.Miniredis().TTL(ctl.RedisKey("k")); ttl <= 0 {
		t.Errorf("TTL after Steal = %v, want > 0", ttl)
	}
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release() error = %v, want %v", err, lock.ErrNotHeld)
	}
}

// ForceRelease publishes a force-release message (its holder's token),
// which also wakes waiters, on the channel waiters listen to; Expire publishes nothing: the first message after it
// is one the test publishes once Expire has returned, so a message of
// Expire's would have come first.
func TestController_ForceRelease_wakesWaiters_Expire_doesNot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*locktest.Controller, string) error
		want  string
	}{
		{"ForceRelease", (*locktest.Controller).ForceRelease, lease.MsgForce}, // "force:" and the hold's token
		{"Expire", (*locktest.Controller).Expire, "marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			locks, ctl := locktest.New(t)
			if err := locks.NewLock("k").Acquire(t.Context()); err != nil {
				t.Fatalf("Acquire() error = %v", err)
			}
			m := ctl.Miniredis()
			sub := ctl.Redis().Subscribe(t.Context(), "lock:{k}:notify")
			defer sub.Close()
			if _, err := sub.Receive(t.Context()); err != nil { // the subscription's confirmation
				t.Fatalf("Subscribe() error = %v", err)
			}
			if err := tc.fault(ctl, "k"); err != nil {
				t.Fatalf("%s() error = %v", tc.name, err)
			}
			if m.Exists(ctl.RedisKey("k")) {
				t.Errorf("key still exists after %s", tc.name)
			}
			m.Publish("lock:{k}:notify", "marker")
			msg, err := sub.ReceiveMessage(t.Context())
			if err != nil || !strings.HasPrefix(msg.Payload, tc.want) {
				t.Errorf("first message after %s = %v, %v; want payload %q", tc.name, msg, err, tc.want)
			}
		})
	}
}

func TestController_keyMethods_free(t *testing.T) {
	_, ctl := locktest.New(t)
	for name, fn := range map[string]func(string) error{
		"Expire": ctl.Expire, "ForceRelease": ctl.ForceRelease, "Steal": ctl.Steal,
	} {
		if err := fn("free"); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("%s(free key) error = %v, want %v", name, err, lock.ErrNotHeld)
		}
	}
}

func TestController_Steal_otherKind(t *testing.T) {
	_, ctl := locktest.New(t)
	if _, err := ctl.Miniredis().ZAdd(ctl.RedisKey("sem"), 1, "permit"); err != nil {
		t.Fatal(err)
	}
	err := ctl.Steal("sem")
	if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), `key "sem" is a semaphore, not a mutex`) {
		t.Errorf("Steal(semaphore key) error = %v, want %v naming both kinds", err, lock.ErrInvalid)
	}
}

func TestController_PauseRenewals_keyStays(t *testing.T) {
	locks, ctl := locktest.New(t, lock.WithTTL(ttl))
	l := locks.NewLock("k")
	if err := l.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	ctl.PauseRenewals()
	waitLost(t, l)
	if !ctl.Miniredis().Exists(ctl.RedisKey("k")) {
		t.Errorf("key gone after a paused renewal; want it left to its TTL")
	}
	ctl.ResumeRenewals()
	// Renewals pass again: a second hold extends at once, and keeps going.
	ctl.Miniredis().Del(ctl.RedisKey("k"))
	l2 := locks.NewLock("k")
	if err := l2.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire() after resume error = %v", err)
	}
	if err := l2.Extend(t.Context(), ttl); err != nil {
		t.Errorf("Extend() after resume error = %v", err)
	}
}

func TestController_Unreachable_callsFail(t *testing.T) {
	locks, ctl := locktest.New(t, lock.WithTTL(ttl))
	ctl.Unreachable()
	if ok, err := locks.NewLock("k").TryAcquire(t.Context()); err == nil || ok {
		t.Errorf("TryAcquire() while unreachable = %v, %v; want an error", ok, err)
	}
	// The Controller's own calls still reach Redis.
	if err := ctl.Expire("k"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Expire() while unreachable error = %v, want %v", err, lock.ErrNotHeld)
	}
	ctl.Restore()
	if ok, err := locks.NewLock("k").TryAcquire(t.Context()); err != nil || !ok {
		t.Errorf("TryAcquire() after Restore = %v, %v; want true, nil", ok, err)
	}
}

func TestController_Slow_delaysReplies(t *testing.T) {
	locks, ctl := locktest.New(t)
	const d = 50 * time.Millisecond
	ctl.Slow(d)
	start := time.Now()
	ok, err := locks.NewLock("k").TryAcquire(t.Context())
	if err != nil || !ok {
		t.Fatalf("TryAcquire() while slow = %v, %v; want true, nil", ok, err)
	}
	if took := time.Since(start); took < d {
		t.Errorf("TryAcquire() while slow took %v, want at least %v", took, d)
	}
}

func TestController_Slow_restoreReleasesHeldReplies(t *testing.T) {
	_, ctl := locktest.New(t)
	ctl.Slow(time.Hour)
	done := make(chan error, 1)
	go func() { done <- ctl.Redis().Ping(context.Background()).Err() }()
	// The ping's reply is held by the proxy until Restore; without it the
	// test would hang.
	ctl.Restore()
	if err := <-done; err != nil {
		t.Errorf("Ping() after Restore error = %v", err)
	}
}

func TestNew_invalidOptions(t *testing.T) {
	locks, ctl := locktest.New(t, lock.WithTTL(-time.Second))
	if err := locks.NewLock("k").Acquire(t.Context()); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Acquire() error = %v, want %v", err, lock.ErrInvalid)
	}
	if got, want := ctl.RedisKey("k"), "lock:{k}"; got != want {
		t.Errorf("RedisKey() = %q, want %q", got, want)
	}
}

func TestNew_nilTB(t *testing.T) {
	locks, ctl := locktest.New(nil)
	defer locks.Close()
	if err := locks.NewLock("k").Acquire(t.Context()); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Acquire() error = %v, want %v", err, lock.ErrInvalid)
	}
	if err := ctl.Steal("k"); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Steal() error = %v, want %v", err, lock.ErrInvalid)
	}
}

func TestController_zero(t *testing.T) {
	for _, ctl := range []*locktest.Controller{nil, new(locktest.Controller)} {
		for name, fn := range map[string]func(string) error{
			"Expire": ctl.Expire, "ForceRelease": ctl.ForceRelease, "Steal": ctl.Steal,
		} {
			if err := fn("k"); !errors.Is(err, lock.ErrInvalid) {
				t.Errorf("%s() on a zero Controller error = %v, want %v", name, err, lock.ErrInvalid)
			}
		}
		ctl.PauseRenewals()
		ctl.ResumeRenewals()
		ctl.Unreachable()
		ctl.Slow(time.Second)
		ctl.Restore()
		if ctl.Redis() != nil || ctl.Miniredis() != nil || ctl.RedisKey("k") != "" {
			t.Errorf("accessors of a zero Controller: want nil and \"\"")
		}
	}
}

func TestNew_prefixFromOptions(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			locks, ctl := locktest.New(t, append([]lock.Option{lock.WithPrefix("app:")}, m.opts...)...)
			if got, want := ctl.RedisKey("k"), "app:{k}"; got != want {
				t.Errorf("RedisKey() = %q, want %q", got, want)
			}
			l := locks.NewLock("k")
			if err := l.Acquire(t.Context()); err != nil {
				t.Fatalf("Acquire() error = %v", err)
			}
			if err := ctl.Expire("k"); err != nil {
				t.Errorf("Expire() error = %v", err)
			}
		})
	}
}

// Reading the prefix from New's options sends the Observer and the logger
// nothing: a test that counts events sees only its own.
func TestNew_probeIsSilent(t *testing.T) {
	var events []lock.Event
	locks, _ := locktest.New(t, lock.WithObserver(lock.ObserverFunc(func(e lock.Event) {
		events = append(events, e)
	})))
	if len(events) != 0 {
		t.Errorf("events after New = %v, want none", events)
	}
	if err := locks.NewLock("k").Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	if len(events) == 0 {
		t.Errorf("no event after Acquire: the Observer is not the client's")
	}
}
