package lock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// A lock that falls back to an in-process lock when Redis cannot be
// reached (here nothing listens on the address). The hold is degraded: it
// excludes the Client's other locks on the key, not other processes.
func ExampleWithFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	locks := lock.NewClient(rdb, lock.WithFallback(lock.FallbackLocal))
	defer locks.Close()
	ctx := context.Background()

	l := locks.NewLock("session:42")
	if err := l.Acquire(ctx); err != nil {
		fmt.Println("acquire:", err)
		return
	}
	fmt.Println("degraded:", l.Degraded(), "fence:", l.Fence())
	ok, _ := locks.NewLock("session:42").TryAcquire(ctx)
	fmt.Println("another lock of this Client gets it:", ok)
	fmt.Println("release:", l.Release(ctx))
	// Output:
	// degraded: true fence: 0
	// another lock of this Client gets it: false
	// release: <nil>
}

// Shedding load: at most one Acquire waits for a key in this process; the
// next fails at once with ErrContended.
func ExampleWithMaxWaiters() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb, lock.WithMaxWaiters(1))
	defer locks.Close()
	ctx := context.Background()

	holder := locks.NewLock("report:daily")
	if err := holder.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	wait := func() { go func() { waiting <- locks.NewLock("report:daily").Acquire(wctx) }() }
	wait()
	done, stop := context.WithCancel(ctx)
	stop() // the probes below return at once once admitted: they only test the cap
	var err error
	for !errors.Is(err, lock.ErrContended) { // until the first waiter is counted
		select {
		case <-waiting: // refused while a probe was counted: wait again
			wait()
		default:
		}
		err = locks.NewLock("report:daily").Acquire(done)
	}
	fmt.Println("second waiter:", errors.Is(err, lock.ErrContended))
	cancel()
	fmt.Println("first waiter:", errors.Is(<-waiting, lock.ErrNotAcquired))
	_ = holder.Release(ctx)
	// Output:
	// second waiter: true
	// first waiter: true
}
