package admin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/admin"
	"github.com/agentlock/lock/internal/redistest"
)

// deadlineSlack is how late past its ctx's deadline a verb may return on
// this machine.
const deadlineSlack = 150 * time.Millisecond

// TestAdmin_verbsReturnByDeadline: with the server stopped (SIGSTOP) and a
// client that does not end calls at their deadline itself, every verb of
// an Admin made by New returns by its ctx's deadline, with an error
// matching the ctx's.
// Not parallel: it stops a server and times the verbs against it.
func TestAdmin_verbsReturnByDeadline(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	ctx := context.Background()
	locks := lock.NewClient(rdb, lock.WithNotify(false))
	defer locks.Close()
	l := locks.NewLock("stuck")
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() = %v", err)
	}
	a := admin.New(rdb)
	// Every script loaded before the server stops: the verbs then hang on
	// their first command, not on a NOSCRIPT round.
	if _, err := a.Inspect(ctx, "stuck"); err != nil {
		t.Fatalf("Inspect() = %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause() = %v", err)
	}
	t.Cleanup(func() { _ = s.Resume() })
	verbs := map[string]func(ctx context.Context) error{
		"Inspect":           func(ctx context.Context) error { _, err := a.Inspect(ctx, "stuck"); return err },
		"ForceRelease":      func(ctx context.Context) error { return a.ForceRelease(ctx, "stuck") },
		"ForceReleaseToken": func(ctx context.Context) error { return a.ForceReleaseToken(ctx, "stuck", l.Token()) },
		"List": func(ctx context.Context) error {
			for _, err := range a.List(ctx, "*") {
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	for name, verb := range verbs {
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		deadline, _ := ctx.Deadline()
		err := verb(ctx)
		cancel()
		if late := time.Since(deadline); late > deadlineSlack {
			t.Errorf("%s returned %v past its deadline (error %v)", name, late, err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v, want an error matching context.DeadlineExceeded", name, err)
		}
	}
}
