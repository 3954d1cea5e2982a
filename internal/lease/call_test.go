package lease

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
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
	r, ok := runBounded(&e, ctx, func() int { <-release; return 2 }, func(r int, _ error) { got <- r })
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

// TestRunBounded_panicWhileWaitingGoesToCaller: a call that panics while its
// caller still waits panics on the caller's goroutine, with the same value,
// as if it had run there.
func TestRunBounded_panicWhileWaitingGoesToCaller(t *testing.T) {
	var e Engine
	e.Init(func(string) []Source { return nil }, nil)
	defer e.Close(nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := func() (v any) {
		defer func() { v = recover() }()
		runBounded(&e, ctx, func() int { panic("boom") }, nil)
		return nil
	}()
	if got != "boom" {
		t.Fatalf("runBounded(call that panics) panicked with %v on the caller, want boom", got)
	}
}

// TestRunBounded_panicAfterCallerLeftIsReported: a call that panics after
// its caller left is logged at Error level, and after receives an error
// matching ErrPanicked; the process goes on.
func TestRunBounded_panicAfterCallerLeftIsReported(t *testing.T) {
	var logs bytes.Buffer
	var e Engine
	e.Init(func(string) []Source { return nil }, slog.New(slog.NewTextHandler(&logs, nil)))
	release, got := make(chan struct{}), make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, ok := runBounded(&e, ctx, func() int { <-release; panic("boom") }, func(_ int, err error) { got <- err })
	if ok {
		t.Fatal("runBounded(call outliving ctx) reported the call's result")
	}
	close(release)
	e.Close(nil)
	select {
	case err := <-got:
		if !errors.Is(err, ErrPanicked) || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("after got %v, want an error matching ErrPanicked that names the panic", err)
		}
	default:
		t.Fatal("Close returned before after got the call's panic")
	}
	if s := logs.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "call panicked") || !strings.Contains(s, "boom") {
		t.Fatalf("log = %q, want an Error record of the panic", s)
	}
}
