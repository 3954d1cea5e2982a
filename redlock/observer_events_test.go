package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/redlock"
)

// TestClient_WithObserver_renewedAndHeld: redlock's events carry what the
// adapters read: a confirmed renewal's TTL and validity left, the hold's
// duration on release, and one EventWithLock after WithLock's release.
func TestClient_WithObserver_renewedAndHeld(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 3)
	const ttl = 1500 * time.Millisecond
	events := make(chan lock.Event, 64)
	obs := lock.ObserverFunc(func(e lock.Event) {
		select {
		case events <- e:
		default:
		}
	})
	c := newClient(t, nodes, redlock.WithObserver(obs), redlock.WithTTL(ttl), loadTolerant)
	ctx := context.Background()
	err := c.WithLock(ctx, keyFor(t), func(context.Context) error {
		deadline := time.After(10 * ttl)
		for {
			select {
			case e := <-events:
				if e.Kind != lock.EventRenewed {
					continue
				}
				if e.TTL != ttl || e.Validity <= 0 || e.Validity >= ttl || e.Fence <= 0 {
					t.Errorf("renewed event %+v, want TTL %v, 0 < Validity < TTL, a fence", e, ttl)
				}
				return nil
			case <-deadline:
				t.Error("no renewal within 10 TTLs")
				return nil
			}
		}
	})
	if err != nil {
		t.Fatalf("WithLock() error = %v", err)
	}
	var rel, wl lock.Event
	for len(events) > 0 {
		switch e := <-events; e.Kind {
		case lock.EventRelease:
			rel = e
		case lock.EventWithLock:
			wl = e
		}
	}
	if rel.Held <= 0 || wl.Held < rel.Held || wl.Duration < wl.Held || wl.Fence != rel.Fence {
		t.Fatalf("release %+v, with_lock %+v: want Held > 0, the same fence, Duration >= Held", rel, wl)
	}
}

// redlockMark is the context key ctxMarker sets.
type redlockMark struct{}

// ctxMarker is a lock.ContextObserver that marks a WithLock's context and
// counts the events that carried the mark.
type ctxMarker struct {
	starts, marked atomic.Int64
}

func (m *ctxMarker) ObserveContext(ctx context.Context, e lock.Event) context.Context {
	if e.Kind == lock.EventWithLockStart {
		m.starts.Add(1)
	}
	return context.WithValue(ctx, redlockMark{}, true)
}

func (m *ctxMarker) Observe(e lock.Event) {
	if e.Ctx != nil && e.Ctx.Value(redlockMark{}) == true {
		m.marked.Add(1)
	}
}

// TestClient_WithLock_contextObserver: redlock's WithLock tells a
// lock.ContextObserver it began, and runs the acquire, fn and the release
// with the context it returned.
func TestClient_WithLock_contextObserver(t *testing.T) {
	t.Parallel()
	_, nodes := miniNodes(t, 3)
	m := &ctxMarker{}
	c := newClient(t, nodes, redlock.WithObserver(m))
	err := c.WithLock(context.Background(), keyFor(t), func(ctx context.Context) error {
		if ctx.Value(redlockMark{}) != true {
			t.Error("fn's context lacks the observer's mark")
		}
		return nil
	})
	must(t, "WithLock()", err)
	// acquire_start, acquire, release and with_lock carry the mark.
	if m.starts.Load() != 1 || m.marked.Load() != 4 {
		t.Fatalf("starts %d, marked events %d; want 1 and 4", m.starts.Load(), m.marked.Load())
	}
}
