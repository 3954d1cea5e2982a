package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// TestClient_ForceRelease_missedMessageHandoff: a holder that missed the
// force message (here: the script publishes it on a channel nobody reads,
// as when the holder's subscription broke) and whose Release goes to hand
// the key to a waiter of its Client finds the key gone there: Release
// returns ErrNotHeld and the hold is reported lost as force-released, from
// the key's force record, as a plain release reports it. The waiter, told
// to try for itself, gets the key. For a mutex and a semaphore permit.
func TestClient_ForceRelease_missedMessageHandoff(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb, lock.WithTTL(30*time.Second))
	slow := lock.WithBackoff(time.Minute, time.Minute)
	for _, kind := range []struct {
		name string
		make func(key string) *lock.Lock
	}{
		{"mutex", func(key string) *lock.Lock { return c.NewLock(key, slow) }},
		{"permit", func(key string) *lock.Lock { return c.NewSemaphore(key, 1, slow).Permit() }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			key := keyFor(t)
			holder, waiter := kind.make(key), kind.make(key)
			must(t, "Acquire()", holder.Acquire(ctx))
			got := make(chan error, 1)
			go func() { got <- waiter.Acquire(ctx) }()
			waitIdle(t, c, key, 1)
			k := luascripts.NewKeys("lock:", key)
			keys := k.ForceKeys()
			keys[1] = k.Notify() + ":unheard"
			if gone, err := luascripts.ForceRelease.Run(ctx, tg.rdb, keys, "", "").StringSlice(); len(gone) != 1 || err != nil {
				t.Fatalf("force-release script = (%q, %v), want one hold removed", gone, err)
			}
			wantErr(t, "Release() of the force-released hold", holder.Release(ctx), lock.ErrNotHeld)
			wantLoss(t, []*lock.Lock{holder}, lock.LossForceReleased)
			must(t, "waiter Acquire()", <-got)
			must(t, "waiter Release()", waiter.Release(ctx))
		})
	}
}

// TestOnce_forceReleasedMissedMessage: a Once whose lock is force-released
// while fn runs, its process missing the message, finds the lock gone when
// it goes to store fn's result: nothing is stored, and the error reports
// the loss as force-released, from the key's force record.
func TestOnce_forceReleasedMissedMessage(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb, lock.WithTTL(30*time.Second))
	key := keyFor(t)
	_, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) {
		k := luascripts.NewKeys("lock:", key)
		keys := k.ForceKeys()
		keys[1] = k.Notify() + ":unheard"
		if gone, err := luascripts.ForceRelease.Run(ctx, tg.rdb, keys, "", "").StringSlice(); len(gone) != 1 || err != nil {
			t.Errorf("force-release script = (%q, %v), want one hold removed", gone, err)
		}
		return []byte("v"), nil
	})
	var le *lock.LostError
	if !errors.As(err, &le) || le.Reason != lock.LossForceReleased {
		t.Fatalf("Once() error = %v, want a *LostError with reason force-released", err)
	}
}
