package lock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentlock/lock"
	"github.com/redis/go-redis/v9"
)

func ExampleClient_NewSemaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	// At most 2 model calls at once for this tenant, across every process.
	sem := locks.NewSemaphore("example:llm-quota:acme", 2)
	a, b, c := sem.Permit(), sem.Permit(), sem.Permit()
	fmt.Println(a.Acquire(ctx), b.Acquire(ctx))
	ok, err := c.TryAcquire(ctx) // both permits are out
	fmt.Println(ok, err)
	free, _ := sem.Available(ctx)
	fmt.Println("free:", free)

	fmt.Println(a.Release(ctx))
	ok, err = c.TryAcquire(ctx)
	fmt.Println(ok, err, c.Fence() > b.Fence())
	_, _ = b.Release(ctx), c.Release(ctx)

	_, err = locks.NewSemaphore("example:llm-quota:acme", 0).Available(ctx)
	fmt.Println(errors.Is(err, lock.ErrInvalid))
	// Output:
	// <nil> <nil>
	// false <nil>
	// free: 0
	// <nil>
	// true <nil> true
	// true
}

func ExampleSemaphore_WithPermit() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	sem := locks.NewSemaphore("example:llm-quota:globex", 4)
	err := sem.WithPermit(ctx, func(ctx context.Context) error {
		// ctx ends, cause lock.ErrLockLost, if the permit is lost.
		free, err := sem.Available(ctx)
		fmt.Println("calling the model; free permits:", free)
		return err
	})
	fmt.Println("err:", err)
	// Output:
	// calling the model; free permits: 3
	// err: <nil>
}

func ExampleSemaphore_Available() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	p := locks.NewSemaphore("example:workers", 3).Permit()
	if err := p.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer p.Release(ctx)
	// n belongs to each Semaphore value: a smaller one sees fewer free.
	for _, n := range []int{3, 1} {
		free, err := locks.NewSemaphore("example:workers", n).Available(ctx)
		fmt.Println(n, free, err)
	}
	// Output:
	// 3 2 <nil>
	// 1 0 <nil>
}

func ExampleSemaphore_Permit() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	// A mutex and a semaphore on one key exclude each other loudly.
	l := locks.NewLock("example:mixed")
	if err := l.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	_, err := locks.NewSemaphore("example:mixed", 2).Permit().TryAcquire(ctx)
	fmt.Println(errors.Is(err, lock.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// lock: acquire "example:mixed": invalid argument: key "example:mixed" is a mutex, not a semaphore
}
