package lease

import (
	"context"
	"testing"
	"time"
)

// TestRunBounded_leavesAtDeadline: a call that outlives its caller's
// context is left to finish on its goroutine, which hands its result to
// after; Close waits for it (up to BackgroundWait).
func TestRunBounded_leavesAtDeadline(t *testing.T) {
	var e Engine
	e.Init(func(string) []Source { return nil }, nil)
	if r, ok := runBounded(&e, context.Background(), func() int { return 1 }, nil); !ok || r != 1 {
		t.Fatalf("runBounded(fast call) = %d, %v, want 1, true", r, ok)
	}
	release, got := make(chan struct{}), make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, ok := runBounded(&e, ctx, func() int { <-release; return 2 }, func(r int) { got <- r })
	if ok || r != 0 || time.Since(start) > time.Second {
		t.Fatalf("runBounded(call outliving ctx) = %d, %v after %v, want 0, false at the deadline", r, ok, time.Since(start))
	}
	close(release)
	e.Close(nil)
	select {
	case r := <-got:
		if r != 2 {
			t.Fatalf("after got %d, want 2", r)
		}
	default:
		t.Fatal("Close returned before the left call handed its result to after")
	}
}
