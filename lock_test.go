package lock_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestLock_Acquire_holdsAndStores(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		l := c.NewLock(key, lock.WithTTL(10*time.Second))
		if l.Token() != "" || l.Fence() != 0 || l.Lost() != nil {
			t.Fatalf("before Acquire: Token %q Fence %d Lost %v, want \"\", 0, nil", l.Token(), l.Fence(), l.Lost())
		}
		must(t, "Acquire()", l.Acquire(ctx))
		if !uuidV4.MatchString(l.Token()) {
			t.Fatalf("Token() = %q, want a UUID v4", l.Token())
		}
		if l.Fence() < clocked {
			t.Fatalf("Fence() = %d, want the server's clock in µs (a new counter starts there)", l.Fence())
		}
		if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != l.Token() {
			t.Fatalf("GET %s = %q, want the token %q", lockKey(key), got, l.Token())
		}
		if got := tg.rdb.Get(ctx, lockKey(key)+":fence").Val(); got != strconv.FormatInt(l.Fence(), 10) {
			t.Fatalf("GET fence = %q, want %d", got, l.Fence())
		}
		pttl := tg.rdb.PTTL(ctx, lockKey(key)).Val()
		if pttl <= 0 || pttl > 10*time.Second {
			t.Fatalf("PTTL = %v, want in (0, 10s]", pttl)
		}
		d, err := l.TTL(ctx)
		must(t, "TTL()", err)
		if d <= 0 || d > 10*time.Second {
			t.Fatalf("TTL() = %v, want in (0, 10s]", d)
		}
		must(t, "Release()", l.Release(ctx))
		if n := tg.rdb.Exists(ctx, lockKey(key)).Val(); n != 0 {
			t.Fatalf("key exists after Release")
		}
		if isClosed(l.Lost()) {
			t.Fatalf("Lost() closed by a normal Release")
		}
	})
}

func TestLock_TryAcquire_heldByOther(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		a, b := c.NewLock(key), c.NewLock(key)
		ok, err := a.TryAcquire(ctx)
		if !ok || err != nil {
			t.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
		}
		ok, err = b.TryAcquire(ctx)
		if ok || err != nil {
			t.Fatalf("second TryAcquire() = %v, %v, want false, nil", ok, err)
		}
		if b.Token() != "" {
			t.Fatalf("loser's Token() = %q, want \"\"", b.Token())
		}
		must(t, "Release()", a.Release(ctx))
		ok, err = b.TryAcquire(ctx)
		if !ok || err != nil {
			t.Fatalf("TryAcquire() after release = %v, %v, want true, nil", ok, err)
		}
		if b.Fence() <= a.Fence() {
			t.Fatalf("fence %d after %d, want larger", b.Fence(), a.Fence())
		}
		must(t, "Release()", b.Release(ctx))
	})
}

func TestLock_Acquire_waitTimeout(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		holder := c.NewLock(key)
		must(t, "Acquire()", holder.Acquire(ctx))
		waiter := c.NewLock(key, lock.WithWaitTimeout(50*time.Millisecond), lock.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
		err := waiter.Acquire(ctx)
		wantErr(t, "Acquire()", err, lock.ErrNotAcquired)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire() error = %v: the caller's ctx did not end, so it must not match DeadlineExceeded", err)
		}
		if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != holder.Token() {
			t.Fatalf("holder's key = %q after a failed wait, want %q", got, holder.Token())
		}
		must(t, "Release()", holder.Release(ctx))
	})
}

func TestLock_Acquire_ctxDone(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		holder := c.NewLock(key)
		must(t, "Acquire()", holder.Acquire(context.Background()))
		cause := errors.New("request abandoned")
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(30*time.Millisecond, func() { cancel(cause) })
		err := c.NewLock(key).Acquire(ctx)
		wantErr(t, "Acquire()", err, lock.ErrNotAcquired)
		wantErr(t, "Acquire()", err, cause)
		must(t, "Release()", holder.Release(context.Background()))
	})
}

func TestLock_Acquire_notifyOff(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb, lock.WithNotify(false))
		key := keyFor(t)
		holder := c.NewLock(key)
		must(t, "Acquire()", holder.Acquire(ctx))
		waiter := c.NewLock(key, lock.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
		done := make(chan error, 1)
		go func() { done <- waiter.Acquire(ctx) }()
		time.Sleep(50 * time.Millisecond)
		must(t, "Release()", holder.Release(ctx))
		select {
		case err := <-done:
			must(t, "waiter Acquire()", err)
		case <-time.After(10 * time.Second):
			t.Fatal("polling waiter never got the lock")
		}
		must(t, "Release()", waiter.Release(ctx))
	})
}

func TestLock_Release_notHeld(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		l := c.NewLock(key)
		wantErr(t, "Release() before Acquire", l.Release(ctx), lock.ErrNotHeld)
		wantErr(t, "Extend() before Acquire", l.Extend(ctx, time.Second), lock.ErrNotHeld)
		_, err := l.TTL(ctx)
		wantErr(t, "TTL() before Acquire", err, lock.ErrNotHeld)

		must(t, "Acquire()", l.Acquire(ctx))
		must(t, "Release()", l.Release(ctx))
		other := c.NewLock(key)
		must(t, "other Acquire()", other.Acquire(ctx))
		wantErr(t, "second Release()", l.Release(ctx), lock.ErrNotHeld)
		if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != other.Token() {
			t.Fatalf("a stale Release touched the new holder's key: %q, want %q", got, other.Token())
		}
		wantErr(t, "stale Extend()", l.Extend(ctx, time.Second), lock.ErrNotHeld)
		must(t, "other Release()", other.Release(ctx))
	})
}

func TestLock_Release_afterExpiry(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb, lock.WithWatchdog(false))
		key := keyFor(t)
		l := c.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		tg.expire(t, key)
		wantErr(t, "Release()", l.Release(ctx), lock.ErrNotHeld)
		if !isClosed(l.Lost()) {
			t.Fatal("Lost() open after Release found the hold gone")
		}
		wantErr(t, "LostErr()", l.LostErr(), lock.ErrLockLost)
	})
}

func TestLock_reacquire(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		l := c.NewLock(keyFor(t))
		must(t, "Acquire()", l.Acquire(ctx))
		wantErr(t, "Acquire() while held", l.Acquire(ctx), lock.ErrInvalid)
		tok, fence, lost := l.Token(), l.Fence(), l.Lost()
		must(t, "Release()", l.Release(ctx))
		must(t, "Acquire() again", l.Acquire(ctx))
		if l.Token() == tok || l.Fence() <= fence || l.Lost() == lost {
			t.Fatalf("second hold: token %q fence %d, first %q %d; want a fresh token, a larger fence and a new Lost channel",
				l.Token(), l.Fence(), tok, fence)
		}
		must(t, "Release()", l.Release(ctx))
	})
}

func TestLock_Extend(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newWarmClient(t, tg.rdb)
		key := keyFor(t)
		l := c.NewLock(key, lock.WithTTL(2*time.Second))
		must(t, "Acquire()", l.Acquire(ctx))
		must(t, "Extend()", l.Extend(ctx, time.Minute))
		if d := tg.rdb.PTTL(ctx, lockKey(key)).Val(); d <= 2*time.Second {
			t.Fatalf("PTTL after Extend(1m) = %v, want > 2s", d)
		}
		wantErr(t, "Extend(0)", l.Extend(ctx, 0), lock.ErrInvalid)
		wantErr(t, "Extend(-1s)", l.Extend(ctx, -time.Second), lock.ErrInvalid)
		tg.rdb.Set(ctx, lockKey(key), "someone-else", time.Minute)
		wantErr(t, "Extend() when stolen", l.Extend(ctx, time.Minute), lock.ErrNotHeld)
		var lostErr *lock.LostError
		if !errors.As(l.LostErr(), &lostErr) || lostErr.Reason != lock.LossStolen {
			t.Fatalf("LostErr() = %v, want a LostError with reason stolen", l.LostErr())
		}
		if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != "someone-else" {
			t.Fatalf("Extend touched the other holder's key: %q", got)
		}
	})
}

func TestLock_keys(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		long := string(make([]byte, 1024))
		keys := []string{"a b", "a{b}c", "a{b}d", "}x", "{", "}", "ключ-键-🔒", long, long + "x", "a:b", "a", "a:fence", "a}:fence"}
		var held []*lock.Lock
		for _, k := range keys {
			l := c.NewLock(k)
			ok, err := l.TryAcquire(ctx)
			if !ok || err != nil {
				t.Fatalf("TryAcquire(%q) = %v, %v, want true, nil: distinct keys must not exclude each other", k, ok, err)
			}
			held = append(held, l)
		}
		for i, k := range keys {
			ok, err := c.NewLock(k).TryAcquire(ctx)
			if ok || err != nil {
				t.Fatalf("second TryAcquire(%q) = %v, %v, want false, nil", k, ok, err)
			}
			must(t, "Release()", held[i].Release(ctx))
		}
	})
}

// TestLock_Acquire_lostReplyIsRetried: an attempt whose reply is lost took
// the lock; the retry, with the same token, confirms that hold instead of
// taking another (the key holds that token, and a fence). A re-entrant hold
// counts once, so its Release frees the key.
func TestLock_Acquire_lostReplyIsRetried(t *testing.T) {
	t.Parallel()
	for _, owner := range []string{"", "o"} {
		t.Run("owner="+owner, func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg *target) {
				ctx := context.Background()
				rdb := tg.newRDB(t)
				h := &dropReplies{drop: 1}
				rdb.AddHook(h)
				c := newClient(t, rdb, lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
				key := keyFor(t)
				var opts []lock.Option
				if owner != "" {
					opts = append(opts, lock.WithOwner(owner))
				}
				l := c.NewLock(key, opts...)
				must(t, "Acquire()", l.Acquire(ctx))
				if h.dropped.Load() != 1 {
					t.Fatalf("hook dropped %d replies, want 1", h.dropped.Load())
				}
				if l.Fence() < clocked {
					t.Fatalf("Fence() = %d, want a fence from the counter", l.Fence())
				}
				if owner == "" {
					if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != l.Token() {
						t.Fatalf("key = %q, want %q", got, l.Token())
					}
				}
				must(t, "Release()", l.Release(ctx))
				tg.wantFree(t, key, "after the only hold was released")
			})
		})
	}
}

func TestLock_TryAcquire_failureLeavesNothing(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb := tg.newRDB(t)
		rdb.AddHook(&dropReplies{drop: 1})
		c := newClient(t, rdb)
		key := keyFor(t)
		ok, err := c.NewLock(key).TryAcquire(ctx)
		if ok || err == nil {
			t.Fatalf("TryAcquire() = %v, %v, want false and the network error", ok, err)
		}
		if n := tg.rdb.Exists(ctx, lockKey(key)).Val(); n != 0 {
			t.Fatal("a failed TryAcquire left its key behind")
		}
	})
}

// TestLock_Acquire_reentrantResentCountsOnce: a re-entrant acquire whose
// reply is cut after Redis ran it is resent by go-redis (acquiring is safe
// to repeat), and the resend counts the hold once: after the Releases the
// key is free.
func TestLock_Acquire_reentrantResentCountsOnce(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	rdb := tg.newRDB(t)
	cut := &cutReplies{}
	rdb.AddHook(cut)
	c := newClient(t, rdb)
	key := keyFor(t)
	const owner = "owner-5e0b2d" // the cut's marker: only these holds' calls carry it
	outer := c.NewLock(key, lock.WithOwner(owner))
	inner := c.NewLock(key, lock.WithOwner(owner))
	must(t, "outer Acquire()", outer.Acquire(ctx))
	cut.arm(owner, 2) // inside "*2\r\n:2\r\n:1\r\n"
	must(t, "inner Acquire()", inner.Acquire(ctx))
	if cut.cut() != 1 {
		t.Fatalf("%d connections cut, want 1", cut.cut())
	}
	must(t, "inner Release()", inner.Release(ctx))
	must(t, "outer Release()", outer.Release(ctx))
	tg.wantFree(t, key, "after every hold was released")
}

// TestLock_TryAcquire_reentrantFailureLeavesNothing: a re-entrant
// TryAcquire whose reply is lost undoes its level, and only its own: the
// owner's outer hold stays, and its Release frees the key.
func TestLock_TryAcquire_reentrantFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb := tg.newRDB(t)
		c := newClient(t, rdb)
		key := keyFor(t)
		outer := c.NewLock(key, lock.WithOwner("o"))
		must(t, "outer Acquire()", outer.Acquire(ctx))
		rdb.AddHook(&dropReplies{drop: 1})
		ok, err := c.NewLock(key, lock.WithOwner("o")).TryAcquire(ctx)
		if ok || err == nil {
			t.Fatalf("TryAcquire() = %v, %v, want false and the network error", ok, err)
		}
		wantTaken(t, c, key)
		must(t, "outer Release()", outer.Release(ctx))
		tg.wantFree(t, key, "after a failed TryAcquire and the outer Release")
	})
}

func TestClient_Close(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := lock.NewClient(tg.rdb)
		key := keyFor(t)
		l := c.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		must(t, "Close()", c.Close())
		must(t, "second Close()", c.Close())
		wantErr(t, "Acquire() after Close", c.NewLock(key+"2").Acquire(ctx), lock.ErrClosed)
		_, err := c.NewLock(key + "3").TryAcquire(ctx)
		wantErr(t, "TryAcquire() after Close", err, lock.ErrClosed)
		wantErr(t, "Extend() after Close", l.Extend(ctx, time.Second), lock.ErrClosed)
		wantErr(t, "WithLock() after Close", c.WithLock(ctx, key+"4", func(context.Context) error { return nil }), lock.ErrClosed)
		must(t, "Release() after Close", l.Release(ctx))
		if n := tg.rdb.Exists(ctx, lockKey(key)).Val(); n != 0 {
			t.Fatal("Release after Close left the key")
		}
	})
}

func TestClient_Close_wakesWaiters(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := lock.NewClient(tg.rdb)
		key := keyFor(t)
		holder := c.NewLock(key)
		must(t, "Acquire()", holder.Acquire(ctx))
		done := make(chan error, 1)
		go func() { done <- c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute)).Acquire(ctx) }()
		time.Sleep(50 * time.Millisecond)
		must(t, "Close()", c.Close())
		select {
		case err := <-done:
			wantErr(t, "waiting Acquire() at Close", err, lock.ErrClosed)
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter outlived Close")
		}
		must(t, "Release()", holder.Release(ctx))
	})
}

// TestZeroValues_returnErrInvalid: every verb of every exported type's zero
// value (and of a nil *Client or *Lock) returns an error wrapping ErrInvalid
// or a harmless zero result, never a panic; Close of a zero Client returns
// nil, and a nil Option is ignored.
func TestZeroValues_returnErrInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	// lockVerbs are the verbs of *Lock that report an error.
	lockVerbs := func(l func() *lock.Lock) map[string]func() error {
		return map[string]func() error{
			"Acquire":    func() error { return l().Acquire(ctx) },
			"TryAcquire": func() error { _, err := l().TryAcquire(ctx); return err },
			"Release":    func() error { return l().Release(ctx) },
			"Extend":     func() error { return l().Extend(ctx, time.Second) },
			"TTL":        func() error { _, err := l().TTL(ctx); return err },
		}
	}
	// accessors are the verbs of *Lock that report no error: zero results.
	accessors := func(l func() *lock.Lock, key string) map[string]func() error {
		return map[string]func() error{
			"Key": func() error {
				if got := l().Key(); got != key {
					return fmt.Errorf("= %q, want %q", got, key)
				}
				return nil
			},
			"Token": func() error {
				if got := l().Token(); got != "" {
					return fmt.Errorf("= %q, want \"\"", got)
				}
				return nil
			},
			"Fence": func() error {
				if got := l().Fence(); got != 0 {
					return fmt.Errorf("= %d, want 0", got)
				}
				return nil
			},
			"Lost": func() error {
				if got := l().Lost(); got != nil {
					return fmt.Errorf("= %v, want nil", got)
				}
				return nil
			},
			"LostErr": func() error { return l().LostErr() },
		}
	}
	var nilClient *lock.Client
	var nilLock *lock.Lock
	wantInvalid := map[string]func() error{
		"Client{}.WithLock":       func() error { return new(lock.Client).WithLock(ctx, "k", fn) },
		"(*Client)(nil).WithLock": func() error { return nilClient.WithLock(ctx, "k", fn) },
	}
	wantNil := map[string]func() error{
		"Client{}.Close":            func() error { return new(lock.Client).Close() },
		"(*Client)(nil).Close":      func() error { return nilClient.Close() },
		"ObserverFunc(nil).Observe": func() error { lock.ObserverFunc(nil).Observe(lock.Event{}); return nil },
		"LostError{}.Error":         func() error { _ = new(lock.LostError).Error(); return nil },
		"LostError{}.Unwrap": func() error {
			if !errors.Is(new(lock.LostError), lock.ErrLockLost) {
				return errors.New("does not match ErrLockLost")
			}
			return nil
		},
		"LossReason(0).String":  func() error { _ = lock.LossReason(0).String(); return nil },
		"EventKind(0).String":   func() error { _ = lock.EventKind(0).String(); return nil },
		"ReleaseMode(0).String": func() error { _ = lock.ReleaseMode(0).String(); return nil },
	}
	handles := map[string]struct {
		l   func() *lock.Lock
		key string
	}{
		"Client{}.NewLock":       {func() *lock.Lock { return new(lock.Client).NewLock("k") }, "k"},
		"Client{}.NewLock(opts)": {func() *lock.Lock { return new(lock.Client).NewLock("k", lock.WithTTL(time.Second)) }, "k"},
		"(*Client)(nil).NewLock": {func() *lock.Lock { return nilClient.NewLock("k") }, "k"},
		"Lock{}":                 {func() *lock.Lock { return new(lock.Lock) }, ""},
		"(*Lock)(nil)":           {func() *lock.Lock { return nilLock }, ""},
	}
	for hname, h := range handles {
		for v, call := range lockVerbs(h.l) {
			wantInvalid[hname+"."+v] = call
		}
		for v, call := range accessors(h.l, h.key) {
			wantNil[hname+"."+v] = call
		}
	}
	run := func(t *testing.T, name string, call func() error) (err error) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", name, r)
			}
		}()
		return call()
	}
	for name, call := range wantInvalid {
		if err := run(t, name, call); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s error = %v, want %v", name, err, lock.ErrInvalid)
		}
	}
	for name, call := range wantNil {
		if err := run(t, name, call); err != nil {
			t.Errorf("%s: %v, want nil", name, err)
		}
	}

	// A nil Option is skipped, on NewClient and on NewLock.
	tg := realTarget(t)
	l := newClient(t, tg.rdb, nil).NewLock(keyFor(t), nil)
	must(t, "Acquire() with nil Options", run(t, "Acquire() with nil Options", func() error { return l.Acquire(ctx) }))
	must(t, "Release()", l.Release(ctx))
}

// TestClient_NewLock_keyBytes: braces, NUL bytes and near-collisions of the
// key layout are distinct locks, in both release modes.
func TestClient_NewLock_keyBytes(t *testing.T) {
	t.Parallel()
	for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
		t.Run(mode.String(), func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg *target) {
				ctx := context.Background()
				c := newClient(t, tg.rdb, lock.WithReleaseMode(mode))
				keys := []string{"a\x00b", "a\x00c", "\x00", "{a}", "a}", "{a", "}{", "a}:fence", "a}:notify", "x}:fence}", "\xff\xfe"}
				var held []*lock.Lock
				for _, k := range keys {
					l := c.NewLock(k)
					must(t, "Acquire("+k+")", l.Acquire(ctx))
					held = append(held, l)
				}
				for i, k := range keys {
					if ok, err := c.NewLock(k).TryAcquire(ctx); ok || err != nil {
						t.Fatalf("second TryAcquire(%q) = %v, %v, want false, nil", k, ok, err)
					}
					if _, err := held[i].TTL(ctx); err != nil {
						t.Fatalf("TTL(%q) = %v", k, err)
					}
					must(t, "Release()", held[i].Release(ctx))
				}
			})
		})
	}
}

// TestLock_handleLifecycle: Token/Fence/Lost before the first hold and
// after a failed attempt; a normal Release leaves Lost() open; a re-acquire
// gets a new token, fence and Lost channel; a stale Release touches nothing.
func TestLock_handleLifecycle(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		other := c.NewLock(key)
		must(t, "other Acquire()", other.Acquire(ctx))
		l := c.NewLock(key)
		if l.Token() != "" || l.Fence() != 0 || l.Lost() != nil || l.LostErr() != nil {
			t.Fatalf("fresh handle: Token %q Fence %d Lost %v LostErr %v, want zero values", l.Token(), l.Fence(), l.Lost(), l.LostErr())
		}
		wantErr(t, "Release() before Acquire", l.Release(ctx), lock.ErrNotHeld)
		wantErr(t, "Extend() before Acquire", l.Extend(ctx, time.Second), lock.ErrNotHeld)
		if _, err := l.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("TTL() before Acquire = %v, want ErrNotHeld", err)
		}
		if ok, err := l.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() on a held key = %v, %v", ok, err)
		}
		if l.Token() != "" || l.Fence() != 0 {
			t.Fatalf("after a failed TryAcquire: Token %q Fence %d, want none", l.Token(), l.Fence())
		}
		must(t, "other Release()", other.Release(ctx))

		must(t, "Acquire()", l.Acquire(ctx))
		tok1, f1, lost1 := l.Token(), l.Fence(), l.Lost()
		wantErr(t, "Acquire() on a held handle", l.Acquire(ctx), lock.ErrInvalid)
		if ok, err := l.TryAcquire(ctx); ok || !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("TryAcquire() on a held handle = %v, %v, want false, ErrInvalid", ok, err)
		}
		must(t, "Release()", l.Release(ctx))
		if isClosed(lost1) {
			t.Fatal("a normal Release closed Lost()")
		}
		must(t, "re-Acquire()", l.Acquire(ctx))
		if l.Token() == tok1 || l.Fence() <= f1 || l.Lost() == lost1 {
			t.Fatalf("re-acquire: token %q fence %d (was %q, %d), same Lost channel %v", l.Token(), l.Fence(), tok1, f1, l.Lost() == lost1)
		}
		must(t, "Release()", l.Release(ctx))
		wantErr(t, "second Release()", l.Release(ctx), lock.ErrNotHeld)
		must(t, "other Acquire()", other.Acquire(ctx))
		wantErr(t, "stale Release()", l.Release(ctx), lock.ErrNotHeld)
		if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != other.Token() {
			t.Fatalf("stale Release touched the holder's key: %q", got)
		}
		if isClosed(lost1) {
			t.Fatal("stale Release closed an old hold's Lost()")
		}
		must(t, "other Release()", other.Release(ctx))
	})
}
