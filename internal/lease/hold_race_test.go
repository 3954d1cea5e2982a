package lease

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// racedHold returns a hold of a fresh Engine, registered as the renewal
// loop registers it but not in its heap (as while its renewal is out).
func racedHold(t *testing.T) (*Engine, *Hold) {
	t.Helper()
	e := &Engine{lowered: make(chan struct{})}
	pol := &Policy{Engine: e, Pkg: "lock", TTL: time.Hour,
		Margin: func(time.Duration) time.Duration { return time.Millisecond },
		Lost:   func(key string, r Reason, err error) error { return errors.New(r.String()) }}
	hd := &Handle{pol: pol}
	hd.Keys.User = "k"
	h := newHold(hd, "token", 1, time.Now())
	h.registered = true
	return e, h
}

// The first use of a hold's extra (holdExtra) comes from goroutines that
// hold different locks: Lost, OnLost and Close's timer under the hold's mu,
// an Extend's bookkeeping under the Engine's mu, while the renewal loop
// reports the loss. Started together, every one of them must see the one
// extra: the callback runs once, the channel Lost returned closes, the
// Extend's count survives, and the race detector finds nothing.
func TestHold_firstExtraUseFromBothLocks(t *testing.T) {
	for i := range 2000 {
		e, h := racedHold(t)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var ch <-chan struct{}
		var calls atomic.Int32
		run := func(fn func()) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				fn()
			}()
		}
		run(func() { ch = h.Lost() })
		run(func() { h.OnLost(func(error) { calls.Add(1) }) })
		run(func() { e.extending(h, time.Minute, time.Now()) })
		run(func() { h.abandon(later(monoNow(), time.Hour)) })
		run(func() { h.markLost(LossExpired, nil) })
		close(start)
		wg.Wait()
		if n := calls.Load(); n != 1 {
			t.Fatalf("round %d: OnLost callback ran %d times, want 1", i, n)
		}
		select {
		case <-ch:
		default:
			t.Fatalf("round %d: the channel Lost returned is open after the loss", i)
		}
		e.mu.Lock()
		ext := h.more().extending
		e.mu.Unlock()
		if ext != 1 {
			t.Fatalf("round %d: %d Extends out, want 1", i, ext)
		}
		h.mu.Lock()
		if x := h.x.Load(); x.afterFn != nil {
			x.afterFn.Stop()
		}
		h.mu.Unlock()
	}
}
