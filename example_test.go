package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentlock/lock"
	"github.com/redis/go-redis/v9"
)

func ExampleNewClient() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// One Client per process; its options are the defaults of every lock it makes.
	locks := lock.NewClient(rdb, lock.WithTTL(10*time.Second), lock.WithWaitTimeout(5*time.Second))
	defer locks.Close()
	ctx := context.Background()

	err := locks.WithLock(ctx, "example:new-client", func(ctx context.Context) error {
		fmt.Println("held")
		return nil
	})
	fmt.Println("err:", err)

	// NewClient never fails: the first call reports a bad option.
	bad := lock.NewClient(rdb, lock.WithTTL(0))
	defer bad.Close()
	err = bad.WithLock(ctx, "example:new-client-bad", func(context.Context) error { return nil })
	fmt.Println(errors.Is(err, lock.ErrInvalid))
	// Output:
	// held
	// err: <nil>
	// true
}

func ExampleClient_WithLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	err := locks.WithLock(ctx, "example:report:2024-06-01", func(ctx context.Context) error {
		// One holder at a time across every process. ctx is cancelled,
		// with cause lock.ErrLockLost, if the lock is lost mid-way.
		fmt.Println("building the report")
		return nil
	})
	fmt.Println("err:", err)

	// fn's error comes back, after the lock is released.
	errUpstream := errors.New("upstream unavailable")
	err = locks.WithLock(ctx, "example:report:2024-06-01", func(context.Context) error { return errUpstream })
	fmt.Println(errors.Is(err, errUpstream))
	// Output:
	// building the report
	// err: <nil>
	// true
}

func ExampleLock_TryAcquire() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	a := locks.NewLock("example:try")
	b := locks.NewLock("example:try") // another holder of the same key
	ok, err := a.TryAcquire(ctx)
	fmt.Println("a:", ok, err)
	ok, err = b.TryAcquire(ctx) // false, nil: held by a
	fmt.Println("b:", ok, err)

	if err := a.Release(ctx); err != nil {
		fmt.Println(err)
	}
	ok, err = b.TryAcquire(ctx)
	fmt.Println("b after a's release:", ok, err)
	if err := b.Release(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// a: true <nil>
	// b: false <nil>
	// b after a's release: true <nil>
}

func ExampleLock_Acquire() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	holder := locks.NewLock("example:acquire")
	if err := holder.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// A waiter gives up after its wait timeout.
	waiter := locks.NewLock("example:acquire", lock.WithWaitTimeout(50*time.Millisecond))
	err := waiter.Acquire(ctx)
	fmt.Println(errors.Is(err, lock.ErrNotAcquired))

	// A release wakes a waiter at once.
	time.AfterFunc(20*time.Millisecond, func() { _ = holder.Release(ctx) })
	waiter = locks.NewLock("example:acquire", lock.WithWaitTimeout(5*time.Second))
	err = waiter.Acquire(ctx)
	fmt.Println("acquired after the release:", err)
	if err := waiter.Release(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// true
	// acquired after the release: <nil>
}

func ExampleLock_Fence() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	l := locks.NewLock("example:fence")
	fmt.Println("before the first hold:", l.Fence())
	var fences []int64
	for range 2 {
		if err := l.Acquire(ctx); err != nil {
			fmt.Println(err)
			return
		}
		fences = append(fences, l.Fence()) // pass it to the store you write to
		if err := l.Release(ctx); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println("each hold's fence is higher:", fences[1] > fences[0])
	// Output:
	// before the first hold: 0
	// each hold's fence is higher: true
}

func ExampleLock_Lost() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	l := locks.NewLock("example:lost")
	if err := l.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	rdb.Del(ctx, "lock:{example:lost}") // someone deletes the lock by hand
	err := l.Extend(ctx, time.Minute)   // (renewal would notice within TTL/3)
	fmt.Println(errors.Is(err, lock.ErrNotHeld))

	select { // in the work loop: stop when the lock goes
	case <-l.Lost():
		fmt.Println("stop:", l.LostErr())
		fmt.Println(errors.Is(l.LostErr(), lock.ErrLockLost))
	case <-time.After(5 * time.Second):
		fmt.Println("still held")
	}
	// Output:
	// true
	// stop: lock: lock "example:lost" lost (vanished)
	// true
}

func ExampleWithReleaseMode() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// For servers where scripting is denied: WATCH/MULTI instead of Lua.
	locks := lock.NewClient(rdb, lock.WithReleaseMode(lock.ReleaseWatch))
	defer locks.Close()
	ctx := context.Background()

	l := locks.NewLock("example:watch-mode")
	if err := l.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("fence:", l.Fence() > 0)
	fmt.Println("release:", l.Release(ctx))
	err := l.Release(ctx) // a second release finds the lock gone
	fmt.Println(errors.Is(err, lock.ErrNotHeld))
	// Output:
	// fence: true
	// release: <nil>
	// true
}
