package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestMaxWaiters_onceFollowersCount: with WithMaxWaiters(1), while one
// Once of a Client runs fn, one more Once of it on the key may wait and a
// further one fails at once with ErrContended, as WithLock's callers do.
func TestMaxWaiters_onceFollowersCount(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	key := keyFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := newClient(t, tg.rdb)
	cap1 := lock.WithMaxWaiters(1)
	running, stop := make(chan struct{}), make(chan struct{})
	leader := make(chan error, 1)
	go func() {
		_, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { close(running); <-stop; return []byte("v"), nil }, cap1)
		leader <- err
	}()
	waitClosed(t, running, 5*time.Second, "fn")
	const callers = 3
	out := make(chan error, callers)
	for range callers {
		go func() {
			_, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("w"), nil }, cap1)
			out <- err
		}()
	}
	// Those refused return at once; those let wait until fn returns.
	refused := 0
	for i := 0; i < callers-1; i++ {
		if err := <-out; errors.Is(err, lock.ErrContended) {
			refused++
		}
	}
	close(stop)
	must(t, "leader's Once()", <-leader)
	<-out
	if refused != callers-1 {
		t.Fatalf("%d of %d Once calls beyond WithMaxWaiters(1) refused, want %d", refused, callers-1, callers-1)
	}
}
