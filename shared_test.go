package lock

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestNewLock_sameOptionsShareSettings: locks made with equal options share
// one settings, and locks with other options do not.
func TestNewLock_sameOptionsShareSettings(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newClientWithBackend(newFake())
		defer c.Close()
		a := c.NewLock("a", WithTTL(10*time.Second))
		b := c.NewLock("b", WithTTL(10*time.Second), nil)
		if a.cfg == nil || a.cfg != b.cfg {
			t.Fatalf("settings of two locks WithTTL(10s): %p and %p, want one shared", a.cfg, b.cfg)
		}
		if a.cfg == c.set {
			t.Fatal("a lock WithTTL(10s) has the Client's settings (TTL 30s)")
		}
		if got := a.cfg.pol.TTL; got != 10*time.Second {
			t.Fatalf("shared settings' TTL = %v, want 10s", got)
		}
		if o := c.NewLock("o", WithTTL(11*time.Second)); o.cfg == a.cfg {
			t.Fatal("WithTTL(11s) shares the settings of WithTTL(10s)")
		}
		if d := c.NewLock("d", WithTTL(DefaultTTL)); d.cfg == a.cfg {
			t.Fatal("WithTTL(DefaultTTL) shares the settings of WithTTL(10s)")
		}
	})
}

// TestNewLock_ownObserverNotShared: a lock given an Observer of its own (a
// func, which == cannot compare) gets settings of its own, and its
// Observer hears its events.
func TestNewLock_ownObserverNotShared(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newClientWithBackend(newFake())
		defer c.Close()
		var n atomic.Int32
		obs := ObserverFunc(func(e Event) {
			if e.Kind == EventAcquire {
				n.Add(1)
			}
		})
		a := c.NewLock("a", WithObserver(obs))
		b := c.NewLock("b", WithObserver(obs))
		if a.cfg == b.cfg {
			t.Fatal("two locks with their own Observer share settings")
		}
		mustAcquire(t, a)
		if got := n.Load(); got != 1 {
			t.Fatalf("the lock's Observer heard %d acquisitions, want 1", got)
		}
	})
}

// TestNewLock_sharedSettingsKeepClientObserver: a lock with options but no
// Observer of its own reports to the Client's; WithObserver(nil) silences
// it.
func TestNewLock_sharedSettingsKeepClientObserver(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		c := newClientWithBackend(newFake(), WithObserver(ObserverFunc(func(e Event) {
			if e.Kind == EventAcquire {
				n.Add(1)
			}
		})))
		defer c.Close()
		mustAcquire(t, c.NewLock("a", WithTTL(10*time.Second)))
		if got := n.Load(); got != 1 {
			t.Fatalf("the Client's Observer heard %d acquisitions of a lock WithTTL, want 1", got)
		}
		mustAcquire(t, c.NewLock("b", WithTTL(10*time.Second), WithObserver(nil)))
		if got := n.Load(); got != 1 {
			t.Fatalf("the Client's Observer heard %d acquisitions, want 1: WithObserver(nil) must silence the lock", got)
		}
	})
}

// TestNewLock_sharedSettingsBounded: options that differ on every call
// (a metadata per request) keep at most maxShared settings.
func TestNewLock_sharedSettingsBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newClientWithBackend(newFake())
		defer c.Close()
		for i := range 3 * maxShared {
			l := c.NewLock("k", WithMetadata("request "+strconv.Itoa(i)))
			if ok, err := l.TryAcquire(context.Background()); err != nil || !ok {
				t.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
			}
			if err := l.Release(context.Background()); err != nil {
				t.Fatalf("Release() error = %v", err)
			}
		}
		c.shared.mu.Lock()
		defer c.shared.mu.Unlock()
		if n := len(c.shared.m); n > maxShared {
			t.Fatalf("%d shared settings kept, want at most %d", n, maxShared)
		}
	})
}
