package locktest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/locktest"
)

// copyRows is the code under test: it copies rows under the table's lock,
// and must stop as soon as the lock is lost.
func copyRows(ctx context.Context, locks *lock.Client, table string, rows <-chan int, copied *int) error {
	return locks.WithLock(ctx, "copy:"+table, func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done(): // the lock is gone: another process may be copying
				return context.Cause(ctx)
			case _, ok := <-rows:
				if !ok {
					return nil
				}
				*copied++
			}
		}
	})
}

// A handler's test: the lock is stolen while the handler works, and the
// handler must stop with an error matching lock.ErrLockLost. In a test file
// the body is that of func TestCopyRows(t *testing.T).
func Example() {
	runTest(func(t locktest.TB) {
		locks, ctl := locktest.New(t, lock.WithTTL(time.Second))
		rows, errc, copied := make(chan int), make(chan error, 1), 0
		go func() { errc <- copyRows(context.Background(), locks, "users", rows, &copied) }()

		rows <- 1 // received: the handler holds the lock now
		if err := ctl.Steal("copy:users"); err != nil {
			t.Fatalf("Steal() error = %v", err)
		}
		err := <-errc // the handler stops at its next renewal, a third of the TTL later

		var lost *lock.LostError
		fmt.Println(copied, errors.Is(err, lock.ErrLockLost), errors.As(err, &lost) && lost.Reason == lock.LossStolen)
	})
	// Output: 1 true true
}
