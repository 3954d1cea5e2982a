package eventlabel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/eventlabel"
	"github.com/agentlock/lock/internal/obstest"
)

func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "acquired"},
		{lock.ErrNotAcquired, "contended"},
		{errors.Join(lock.ErrNotAcquired, context.Canceled), "canceled"},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), "canceled"},
		{errors.New("connection refused"), "error"},
	} {
		if got := eventlabel.AcquireNames[eventlabel.AcquireOutcome(tc.err)]; got != tc.want {
			t.Errorf("AcquireOutcome(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{{nil, "released"}, {lock.ErrNotHeld, "not_held"}, {errors.New("eof"), "error"}} {
		if got := eventlabel.ReleaseNames[eventlabel.ReleaseOutcome(tc.err)]; got != tc.want {
			t.Errorf("ReleaseOutcome(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	if got := eventlabel.WithLockNames[eventlabel.WithLockOutcome(errors.New("x"))]; got != "error" {
		t.Errorf("WithLockOutcome(err) = %s, want error", got)
	}
	for r, want := range map[lock.LossReason]string{lock.LossStolen: "stolen", lock.LossMaxHold: "max_hold", 99: "other"} {
		err := fmt.Errorf("wrapped: %w", &lock.LostError{Key: "k", Reason: r})
		if got := eventlabel.LossNames[eventlabel.LossReason(err)]; got != want {
			t.Errorf("LossReason(%v) = %s, want %s", r, got, want)
		}
	}
	if got := eventlabel.LossNames[eventlabel.LossReason(errors.New("x"))]; got != "other" {
		t.Errorf("LossReason(plain error) = %s, want other", got)
	}
}

func TestGroups(t *testing.T) {
	var made atomic.Int32
	g := eventlabel.NewGroups(eventlabel.PrefixGroup, 2, func(name string) string { made.Add(1); return name })
	// In this order: the first two groups seen take the limit of 2, later
	// ones go to "other" (a map's order would vary from run to run).
	for _, c := range []struct{ key, want string }{
		{"session:1", "session:"}, {"session:2", "session:"}, {"tool:x", "tool:"}, {"plain", "other"}, {"index:1", "other"},
	} {
		if got := g.Get(c.key); got != c.want {
			t.Errorf("Get(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	if made.Load() != 3 || !g.Grouped() {
		t.Fatalf("made %d, want 3 (session:, tool:, other)", made.Load())
	}
	none := eventlabel.NewGroups(nil, 0, func(name string) string { return "all" + name })
	if got := none.Get("session:1"); got != "all" || none.Grouped() {
		t.Fatalf("ungrouped Get = %q, want all", got)
	}
	if n := testing.AllocsPerRun(100, func() { g.Get("session:9") }); n != 0 {
		t.Fatalf("Get of a known group allocates %v times, want 0", n)
	}
}

// TestLossNames_everyReason: every loss reason the code declares has a
// label of its own (never "other"), and the docs list it twice: the guide's
// LostErr row with its name, the operations page's losses metric row with its
// label.
func TestLossNames_everyReason(t *testing.T) {
	lostRow := lineWith(t, obstest.ReadSource(t, "docs/guide.md"), "| `Lost()`, `LostErr()` |")
	metricRow := lineWith(t, obstest.ReadSource(t, "docs/operations.md"), "| `agentlock_losses_total{reason}` |")
	seen := map[string]lock.LossReason{}
	for _, r := range obstest.LossReasons(t) {
		i := eventlabel.LossReason(&lock.LostError{Reason: r})
		name := eventlabel.LossNames[i]
		if i != int(r) || name == "" || name == eventlabel.LossNames[0] {
			t.Errorf("%v: label %q (index %d), want a label of its own", r, name, i)
			continue
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%v and %v share the label %q", r, other, name)
		}
		seen[name] = r
		if !strings.Contains(lostRow, r.String()) {
			t.Errorf("the guide's LostErr row does not name %q: %s", r, lostRow)
		}
		if !strings.Contains(metricRow, "`"+name+"`") {
			t.Errorf("the operations page's agentlock_losses_total row does not list `%s`: %s", name, metricRow)
		}
	}
}

// lineWith returns the line of text containing s.
func lineWith(t *testing.T, text, s string) string {
	t.Helper()
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			return line
		}
	}
	t.Fatalf("no line with %q", s)
	return ""
}
