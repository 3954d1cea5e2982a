package lease

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// panicGroup is a renewal batch whose call panics.
type panicGroup struct{}

func (panicGroup) Renew(context.Context, []*Hold, []time.Duration, []Outcome) { panic("boom") }

// TestRenewal_panickingGroupLosesHoldAtDeadline: a hold whose renewal
// batch lookup or renewal call panics, on every try, is retried and then
// lost at its safety deadline, not before and never later, with an error
// matching ErrPanicked; the loop goes on.
func TestRenewal_panickingGroupLosesHoldAtDeadline(t *testing.T) {
	for name, group := range map[string]func(context.Context, *Hold) Group{
		"lookup": func(context.Context, *Hold) Group { panic("boom") },
		"call":   func(context.Context, *Hold) Group { return panicGroup{} },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := &Engine{}
				e.Init(nil, nil)
				pol := &Policy{Engine: e, Pkg: "lock", TTL: 3 * time.Second, Watchdog: true, Group: group,
					Margin: func(time.Duration) time.Duration { return 100 * time.Millisecond },
					Lost:   func(key string, r Reason, err error) error { return err }}
				hd := &Handle{pol: pol}
				hd.Keys.User = "k"
				start := time.Now()
				h := newHold(hd, "token", 1, start)
				e.add(h, nil)
				select {
				case <-h.Lost():
				case <-time.After(time.Minute):
					t.Fatal("hold not lost a minute after its deadline")
				}
				if took, want := time.Since(start), 2900*time.Millisecond; took != want {
					t.Fatalf("lost after %v, want at the deadline, %v", took, want)
				}
				if err := h.LostErr(); !errors.Is(err, ErrPanicked) {
					t.Fatalf("LostErr() = %v, want an error matching ErrPanicked", err)
				}
				e.Close(nil)
			})
		})
	}
}
